//! Expert iteration's pieces: Dirichlet noise with the distribution's moments, the root mixture
//! exactly as its formula says and only at the root, the polished strategy's one-hot targets on
//! every op group, and recipes that say so checked.

mod common;

use rand::SeedableRng;
use rand::rngs::StdRng;
use topoplace::cost::CostModel;
use topoplace::mcts::noise::dirichlet;
use topoplace::mcts::{Mcts, MctsConfig, RootNoise, metis_groups};
use topoplace::problem::Problem;
use topoplace::train::Recipe;
use topoplace::train::selfplay::{self, Models};
use topoplace::zoo;

/// Symmetric Dirichlet draws lie on the simplex, and their first component has the closed-form
/// mean 1/n and variance (1/n)(1 − 1/n)/(nα + 1), for α below and above 1 (the two Gamma paths).
#[test]
fn dirichlet_draws_have_the_distributions_moments() {
    let n = 4;
    for alpha in [0.3, 2.0] {
        let mut rng = StdRng::seed_from_u64(7);
        let draws: Vec<Vec<f64>> = (0..20_000).map(|_| dirichlet(&mut rng, alpha, n)).collect();
        for d in &draws {
            assert!(d.iter().all(|&x| (0.0..=1.0).contains(&x)));
            assert!((d.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        let first: Vec<f64> = draws.iter().map(|d| d[0]).collect();
        let mean = first.iter().sum::<f64>() / first.len() as f64;
        let var = first.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / first.len() as f64;
        let m = 1.0 / n as f64;
        let expected_var = m * (1.0 - m) / (n as f64 * alpha + 1.0);
        assert!((mean - m).abs() < 0.01, "alpha {alpha}: mean {mean}");
        assert!(
            (var / expected_var - 1.0).abs() < 0.06,
            "alpha {alpha}: variance {var} vs {expected_var}"
        );
    }
}

/// `P = (1 − ε)·p^(1/τ)/Σ + ε·η`: no noise and τ = 1 give the priors back, τ = 2 their
/// normalised square roots, ε = 1 the Dirichlet draw of the same generator state.
#[test]
fn the_root_mixture_follows_its_formula() {
    let p = [0.7, 0.2, 0.1, 0.0];
    let rng = || StdRng::seed_from_u64(11);
    let noise = |fraction, temperature| RootNoise {
        alpha: 0.5,
        fraction,
        temperature,
    };
    let same = noise(0.0, 1.0).apply(&p, &mut rng());
    assert!(same.iter().zip(&p).all(|(a, b)| (a - b).abs() < 1e-12));
    let roots: Vec<f64> = p.iter().map(|x: &f64| x.sqrt()).collect();
    let total: f64 = roots.iter().sum();
    let flatter = noise(0.0, 2.0).apply(&p, &mut rng());
    for (a, r) in flatter.iter().zip(&roots) {
        assert!((a - r / total).abs() < 1e-12);
    }
    let pure = noise(1.0, 1.0).apply(&p, &mut rng());
    assert_eq!(pure, dirichlet(&mut rng(), 0.5, 4));
    let mixed = noise(0.25, 1.0).apply(&p, &mut rng());
    assert!((mixed.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    for (m, (q, eta)) in mixed.iter().zip(p.iter().zip(&pure)) {
        assert!((m - (0.75 * q + 0.25 * eta)).abs() < 1e-12);
    }
    assert!(noise(0.0, 1.0).problem().is_none());
    assert_eq!(noise(1.5, 1.0).problem().map(|x| x.0), Some("fraction"));
    assert_eq!(noise(0.2, 0.0).problem().map(|x| x.0), Some("temperature"));
}

/// With root noise the root's priors are a different distribution (at least (1 − ε) of each
/// policy prior kept), the same for the same seed.
#[test]
fn root_noise_mixes_into_the_roots_priors() {
    let g = zoo::build("mlp", &zoo::ZooOptions::default()).unwrap();
    let c = common::testbed();
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let policy = common::small_policy(1);
    let op_group = metis_groups(&p, 4, 0).unwrap();
    let search = |root_noise| {
        let config = MctsConfig {
            iterations: 16,
            sfb_check: false,
            polish: 0,
            root_noise,
            ..MctsConfig::default()
        };
        let mcts = Mcts::new(p, op_group.clone(), config)
            .unwrap()
            .with_policy(&policy)
            .unwrap();
        mcts.root_priors().unwrap().to_vec()
    };
    let noise = RootNoise {
        alpha: 0.3,
        fraction: 0.25,
        temperature: 1.0,
    };
    let plain = search(None);
    let noisy = search(Some(noise));
    let again = search(Some(noise));
    assert_eq!(noisy, again, "same seed, same noise");
    assert!((noisy.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(noisy.iter().zip(&plain).any(|(a, b)| (a - b).abs() > 1e-6));
    for (a, b) in noisy.iter().zip(&plain) {
        // The GNN's softmax sums to 1 in f32: the priors are renormalised within that.
        assert!(*a >= 0.75 * b * (1.0 - 1e-5), "{a} vs {b}");
    }
}

fn recipe(extra_search: &str) -> Recipe {
    let text = format!(
        "name = \"expert\"\nseed = 5\nsteps = 2\n\
         [training_set]\nmodels = [\"alexnet\"]\ntopologies = 20\n\
         [search]\nbudget = 24\ngroups = 4\nmin_visits = 4\ngames_per_step = 1\n{extra_search}\n\
         [model]\nwidth = 16\nheads = 2\n\
         [evaluation]\nevery = 0\n"
    );
    Recipe::parse(&text, "expert.toml").unwrap()
}

/// With `polished_targets`, a game's result is polished and its decisions are one-hot targets at
/// each op group's vertex on its path, beside the tree's visit targets; the game's result is at
/// least as fast as the same game's tree alone.
#[test]
fn polished_results_give_a_one_hot_target_per_op_group() {
    let tree_only = recipe("");
    let expert = recipe("polished_targets = 300");
    let models = Models::load(&expert.training_set, &expert.training_set.models).unwrap();
    let policy = common::small_policy(2);
    let mut checked = 0;
    for worker in 0..3 {
        let setup = selfplay::draw(&expert, 0, worker);
        let plain = selfplay::play(&tree_only, &setup, &models, &policy).unwrap();
        let game = selfplay::play(&expert, &setup, &models, &policy).unwrap();
        assert!(
            game.best_us <= plain.best_us * (1.0 + 1e-12),
            "worker {worker}"
        );
        assert_eq!(game.samples[..plain.samples.len()], plain.samples[..]);
        let extra = &game.samples[plain.samples.len()..];
        if !game.fits || extra.is_empty() {
            continue;
        }
        assert_eq!(extra.len(), 4, "one per op group");
        for (depth, s) in extra.iter().enumerate() {
            assert_eq!(s.group as usize, depth);
            assert_eq!(s.target.len(), 1);
            assert_eq!(s.target[0].1, 1.0);
        }
        checked += 1;
    }
    assert!(
        checked > 0,
        "some polished result is a point of the search space"
    );
}

/// Recipes with impossible expert settings are refused naming the key.
#[test]
fn impossible_expert_settings_are_refused_by_name() {
    let base = "name = \"x\"\n[training_set]\nmodels = [\"mlp\"]\n[search]\n";
    for (line, key) in [
        ("polished_targets = 0", "search.polished_targets"),
        ("root_noise = { alpha = -1.0 }", "search.root_noise.alpha"),
        (
            "root_noise = { alpha = 0.3, fraction = 2.0 }",
            "search.root_noise.fraction",
        ),
    ] {
        let err = Recipe::parse(&format!("{base}{line}\n"), "r.toml").unwrap_err();
        assert!(err.to_string().contains(key), "{line}: {err}");
    }
    let ok = Recipe::parse(
        &format!("{base}root_noise = {{ alpha = 0.3 }}\npolished_targets = 100\n"),
        "r.toml",
    )
    .unwrap();
    let noise = ok.search.root_noise.unwrap();
    assert_eq!((noise.fraction, noise.temperature), (0.25, 1.0));
}

/// A recipe's `gpus = "wide"` draws its games' random topologies from the wide GPU mix (named
/// apart); an unknown mix is refused naming the key.
#[test]
fn a_wide_recipe_draws_wide_topologies() {
    use topoplace::cluster::GpuMix;
    use topoplace::train::selfplay::ClusterSource;
    let base = "name = \"x\"\n[training_set]\nmodels = [\"mlp\"]\n";
    let wide = Recipe::parse(&format!("{base}gpus = \"wide\"\n"), "r.toml").unwrap();
    assert_eq!(wide.training_set.gpus, GpuMix::Wide);
    for worker in 0..4 {
        let setup = selfplay::draw(&wide, 0, worker);
        let ClusterSource::Random(seed, distribution) = &setup.cluster else {
            panic!("no configs in this training set");
        };
        assert_eq!(distribution.gpus, GpuMix::Wide);
        assert_eq!(setup.cluster.name(), format!("random-{seed}-wide"));
        assert_eq!(setup.cluster.load().unwrap().name, setup.cluster.name());
    }
    let err = Recipe::parse(&format!("{base}gpus = \"newest\"\n"), "r.toml").unwrap_err();
    assert!(err.to_string().contains("gpus"), "{err}");
}
