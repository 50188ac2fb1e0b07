//! Training recipes and durable checkpoints.

mod common;

use std::path::Path;

use topoplace::cluster::TopologyDistribution;
use topoplace::cost::MemoryFormat;
use topoplace::train::selfplay::{self, ClusterSource};
use topoplace::train::{Checkpoints, Recipe, step_seed};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn minimal(extra: &str) -> String {
    format!("name = \"t\"\n{extra}\n[training_set]\nmodels = [\"mlp\"]\n")
}

#[test]
fn shipped_recipe_loads_with_every_field_checked() {
    let r = Recipe::load(&root().join("training/tag-expert.toml")).unwrap();
    assert_eq!(r.name, "tag-expert");
    assert_eq!(r.training_set.models.len(), 6);
    assert!(r.evaluation.topology_seed >= r.training_set.topology_seed + r.training_set.topologies);
}

/// The NVLink recipe is the expert recipe with `training_set.nvlink` and its name changed only,
/// and its games draw clusters of the NVLink distribution.
#[test]
fn the_nvlink_recipe_differs_from_the_expert_one_in_its_topologies_only() {
    let expert = Recipe::load(&root().join("training/tag-expert.toml")).unwrap();
    let nvlink = Recipe::load(&root().join("training/tag-nvlink.toml")).unwrap();
    assert!(nvlink.training_set.nvlink && !expert.training_set.nvlink);
    let mut same = nvlink.clone();
    same.name = expert.name.clone();
    same.training_set.nvlink = false;
    assert_eq!(same, expert);
    let setup = selfplay::draw(&nvlink, 0, 0);
    assert!(
        setup.cluster.name().ends_with("-nvlink"),
        "{:?}",
        setup.cluster
    );
}

/// The recipe for today's clusters: its topologies are today's distribution, its models train
/// in bf16 with PyTorch's kernels, and its games simulate with that precision; everything else is
/// the expert recipe's. A recipe that leaves the precision out trains in TAG's FP32 and writes no
/// precision key, so older runs' recipes read back unchanged.
#[test]
fn the_today_recipe_trains_todays_models_on_todays_clusters() {
    use topoplace::precision::Precision;
    use topoplace::zoo::Framework;
    let expert = Recipe::load(&root().join("training/tag-expert.toml")).unwrap();
    let today = Recipe::load(&root().join("training/today.toml")).unwrap();
    let set = &today.training_set;
    assert_eq!(set.distribution(), TopologyDistribution::TODAY);
    assert_eq!(
        (set.precision, set.framework),
        (Precision::Bf16, Framework::Pytorch)
    );
    assert_eq!(set.cost().precision, Precision::Bf16);
    // PyTorch's layout unless the recipe says otherwise; `memory_format` round-trips.
    assert_eq!(set.cost().memory_format, MemoryFormat::ChannelsFirst);
    let mut last = today.clone();
    last.training_set.memory_format = Some(MemoryFormat::ChannelsLast);
    assert_eq!(
        last.training_set.cost().memory_format,
        MemoryFormat::ChannelsLast
    );
    let text = toml::to_string(&last).unwrap();
    assert!(text.contains("memory_format = \"channels-last\""), "{text}");
    assert_eq!(Recipe::parse(&text, "r.toml").unwrap(), last);
    let mut same = today.clone();
    same.name = expert.name.clone();
    same.training_set = expert.training_set.clone();
    assert_eq!(same, expert);
    assert_eq!(expert.training_set.precision, Precision::Fp32);
    let written = toml::to_string(&expert).unwrap();
    assert!(
        !written.contains("precision") && !written.contains("framework"),
        "{written}"
    );
    let setup = selfplay::draw(&today, 0, 0);
    assert!(
        setup.cluster.name().ends_with("-today-nvlink"),
        "{:?}",
        setup.cluster
    );
}

/// The bounds refuse only what is past them: the largest sizes allowed, `min_visits` equal to
/// the budget, a replay buffer of one batch, and no evaluation with no held-out topology.
#[test]
fn a_recipe_at_its_bounds_is_accepted() {
    let text = minimal(
        "steps = 1000000\n[search]\nbudget = 100000\ngroups = 10000\nmin_visits = 100000\n\
         games_per_step = 1024\n[optimizer]\nbatch = 64\nreplay = 64\nlearning_rate = 0.5\n\
         [evaluation]\nevery = 0\ntopologies = 0",
    );
    let r = Recipe::parse(&text, "r.toml").unwrap();
    assert_eq!((r.search.budget, r.search.groups), (100_000, 10_000));
    assert_eq!(r.optimizer.replay, r.optimizer.batch);
}

#[test]
fn defaults_fill_what_a_recipe_leaves_out() {
    let r = Recipe::parse(&minimal(""), "r.toml").unwrap();
    assert_eq!(r.steps, 200);
    assert_eq!(r.search.budget, 200);
    assert_eq!(r.checkpoint.every, 10);
    assert_eq!(r.training_set.topologies, 1000);
    assert_eq!(r.training_set.distribution(), TopologyDistribution::TAG);
}

#[test]
fn a_recipe_with_other_bandwidths_draws_its_topologies_within_them() {
    let text = "name = \"t\"\n[training_set]\nmodels = [\"mlp\"]\ntopologies = 50\n\
                intra_gbps = [300, 400]\ninter_gbps = [90, 100]\n";
    let r = Recipe::parse(text, "r.toml").unwrap();
    let gbps = topoplace::units::GBPS;
    for step in 0..20 {
        let setup = selfplay::draw(&r, step, 0);
        let ClusterSource::Random(seed, b) = setup.cluster else {
            panic!("{:?}", setup.cluster)
        };
        assert!(seed < 50);
        let c = setup.cluster.load().unwrap();
        assert_eq!(c.name, setup.cluster.name());
        assert_eq!(c.name, format!("random-{seed}-intra300-400-inter90-100"));
        assert_eq!(b, r.training_set.distribution());
        for g in &c.groups {
            assert!((300.0 * gbps..=400.0 * gbps).contains(&g.intra_bandwidth));
        }
        for m in &c.machines {
            assert!((90.0 * gbps..=100.0 * gbps).contains(&m.nic_bandwidth));
        }
    }
    // TAG's ranges keep the names games were written with before.
    let tag = Recipe::parse(&minimal(""), "r.toml").unwrap();
    let setup = selfplay::draw(&tag, 0, 0);
    let ClusterSource::Random(seed, b) = setup.cluster else {
        panic!("{:?}", setup.cluster)
    };
    assert_eq!(b, TopologyDistribution::TAG);
    assert_eq!(setup.cluster.name(), format!("random-{seed}"));
}

#[test]
fn bad_recipes_name_the_file_and_field() {
    let cases = [
        (minimal("stepz = 3"), "stepz"),
        (minimal("steps = 0"), "steps"),
        (minimal("[search]\nbudget = 0"), "search.budget"),
        (
            "name = \"t\"\n[training_set]\nmodels = []\n".to_string(),
            "training_set.models",
        ),
        (
            minimal("[evaluation]\ntopology_seed = 500"),
            "evaluation.topology_seed",
        ),
        (
            "name = \"a/b\"\n[training_set]\nmodels = [\"mlp\"]\n".into(),
            "name",
        ),
        ("name = \"t\"\n[training_set\n".into(), "malformed TOML"),
        (
            "name = \"t\"\n[training_set]\nmodels = [\"mlp\"]\ninter_gbps = [50, 20]\n".into(),
            "training_set.inter_gbps",
        ),
        (
            "name = \"t\"\n[training_set]\nmodels = [\"mlp\"]\nintra_gbps = [0, 100]\n".into(),
            "training_set.intra_gbps",
        ),
        (
            "name = \"t\"\n[training_set]\nmodels = [\"mlp\"]\nintra_gbps = [-5, 100]\n".into(),
            "intra_gbps",
        ),
        // Above the cluster loader's 1 PB/s: the first game's topology panicked.
        (
            minimal("").replace("models", "intra_gbps = [9000000, 9000000]\nmodels"),
            "training_set.intra_gbps",
        ),
        (
            minimal("").replace("models", "precision = \"fp64\"\nmodels"),
            "precision",
        ),
        (
            minimal("").replace("models", "framework = \"jax\"\nmodels"),
            "framework",
        ),
        (
            minimal("").replace("models", "memory_format = \"nhcw\"\nmodels"),
            "memory_format",
        ),
        // TAG's GPUs have no bfloat16: refused up front, not in the first game.
        (
            minimal("").replace("models", "precision = \"bf16\"\nmodels"),
            "training_set.precision",
        ),
        // A GNN the model cannot build is the recipe's error, not a bare one.
        (minimal("[model]\nwidth = 30\nheads = 4"), "model"),
        // Sizes past any sane run: 2⁶⁴−1 leaves played one game for ever.
        (
            minimal("[search]\nbudget = 18446744073709551615"),
            "search.budget",
        ),
        (minimal("[search]\ngroups = 1000000000"), "search.groups"),
        (minimal("steps = 100000000000"), "steps"),
        (
            minimal("[search]\ngames_per_step = 100000"),
            "search.games_per_step",
        ),
        // No vertex is visited more often than the budget: no game would give a target.
        (
            minimal("[search]\nbudget = 10\nmin_visits = 11"),
            "search.min_visits",
        ),
        // A buffer smaller than a batch cannot fill one.
        (
            minimal("[optimizer]\nbatch = 2\nreplay = 1"),
            "optimizer.replay",
        ),
        // No held-out topology: the evaluation's mean was NaN.
        (
            minimal("[evaluation]\ntopologies = 0"),
            "evaluation.topologies",
        ),
        // Adam diverges at a rate of 1 or more: 1e300 wrote NaN weights.
        (
            minimal("[optimizer]\nlearning_rate = 1e300"),
            "optimizer.learning_rate",
        ),
        (
            minimal("[optimizer]\nlearning_rate = 1.0"),
            "optimizer.learning_rate",
        ),
        // A blank name, `.` or `..` is no folder of its own under training/runs/.
        (
            "name = \"  \"\n[training_set]\nmodels = [\"mlp\"]\n".into(),
            "name",
        ),
        (
            "name = \"..\"\n[training_set]\nmodels = [\"mlp\"]\n".into(),
            "name",
        ),
    ];
    for (text, field) in cases {
        let e = Recipe::parse(&text, "r.toml").unwrap_err().to_string();
        assert!(e.starts_with("r.toml"), "{e}");
        assert!(e.contains(field), "{field}: {e}");
    }
    // A model that is neither in the zoo nor a file names the recipe and the entry; it named
    // `<cli>` once training had started.
    let dir = common::scratch("recipe-model");
    let path = dir.join("r.toml");
    std::fs::write(
        &path,
        "name = \"t\"\n[training_set]\nmodels = [\"mlp\", \"nosuchmodel\"]\n",
    )
    .unwrap();
    let e = Recipe::load(&path).unwrap_err().to_string();
    assert!(e.starts_with(&*path.to_string_lossy()), "{e}");
    assert!(
        e.contains("training_set.models[1]") && e.contains("nosuchmodel"),
        "{e}"
    );
    // Every zoo name is one, the sized GPTs and Llamas included (not a path beside the recipe).
    std::fs::write(
        &path,
        "name = \"t\"\n[training_set]\nmodels = [\"llama-1b\", \"gpt2-xl\"]\n",
    )
    .unwrap();
    let r = Recipe::load(&path).unwrap();
    assert_eq!(r.training_set.models, ["llama-1b", "gpt2-xl"]);
}

#[test]
fn relative_graph_paths_resolve_against_the_recipe() {
    let dir = common::scratch("train-recipe");
    // Loading checks that the graph exists (what it holds is read when training starts) and
    // that the cluster loads.
    std::fs::write(dir.join("g.json"), "{}").unwrap();
    std::fs::copy("configs/tag-testbed.toml", dir.join("c.toml")).unwrap();
    std::fs::write(
        dir.join("r.toml"),
        "name = \"t\"\n[training_set]\nmodels = [\"vgg19\", \"g.json\"]\nclusters = [\"c.toml\", \"tag-testbed\"]\n",
    )
    .unwrap();
    let r = Recipe::load(&dir.join("r.toml")).unwrap();
    assert_eq!(r.training_set.models[0], "vgg19");
    assert_eq!(
        r.training_set.models[1],
        dir.join("g.json").display().to_string()
    );
    assert_eq!(
        r.training_set.clusters[0],
        dir.join("c.toml").display().to_string()
    );
    assert_eq!(r.training_set.clusters[1], "tag-testbed");
}

#[test]
fn step_seeds_are_distinct_and_reproducible() {
    let mut seen = std::collections::HashSet::new();
    for step in 0..1000 {
        for worker in 0..4 {
            assert!(seen.insert(step_seed(7, step, worker)));
        }
    }
    assert_eq!(step_seed(7, 3, 1), step_seed(7, 3, 1));
    assert_ne!(step_seed(7, 3, 1), step_seed(8, 3, 1));
}

#[test]
fn a_failed_save_leaves_the_previous_checkpoint_latest() {
    let dir = common::scratch("train-ckpt");
    let c = Checkpoints::new(&dir);
    assert!(c.latest().unwrap().is_none());
    c.save(10, |d| {
        std::fs::write(d.join("state.json"), "10").unwrap();
        Ok(())
    })
    .unwrap();
    // A save interrupted half-way (the closure fails after writing one file) changes nothing.
    let e = c.save(20, |d| {
        std::fs::write(d.join("state.json"), "20").unwrap();
        Err(topoplace::Error::io(
            "killed",
            std::io::Error::other("killed"),
        ))
    });
    assert!(e.is_err());
    let (step, path) = c.latest().unwrap().unwrap();
    assert_eq!(step, 10);
    assert_eq!(
        std::fs::read_to_string(path.join("state.json")).unwrap(),
        "10"
    );
    // Later saves move `latest` and keep one older checkpoint.
    for s in [20, 30, 40] {
        c.save(s, |d| {
            std::fs::write(d.join("state.json"), s.to_string()).unwrap();
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(c.latest().unwrap().unwrap().0, 40);
    let mut left: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["latest", "step-30", "step-40"]);
}

/// A game file whose times, features or targets are not finite numbers is refused when read,
/// naming the file and the field: `train --samples` learnt a NaN loss and NaN weights from one.
#[test]
fn a_game_file_with_a_non_finite_value_is_refused_naming_the_field() {
    use topoplace::gnn::HeteroGraph;
    use topoplace::train::selfplay::{GameRecord, GameSetup, Sample};
    let dir = common::scratch("train-nan-game");
    let graph = HeteroGraph {
        op_features: vec![0.5; 8],
        dev_features: vec![0.5; 4],
        op_op: Default::default(),
        dev_dev: Default::default(),
        op_dev: Default::default(),
    };
    let game = GameRecord {
        setup: GameSetup {
            step: 0,
            worker: 0,
            seed: 1,
            model: "mlp".into(),
            cluster: ClusterSource::Random(1, TopologyDistribution::TAG),
        },
        dp_us: 10.0,
        best_us: 8.0,
        fits: true,
        slices: Vec::new(),
        samples: vec![Sample {
            graph,
            group: 0,
            target: vec![(0, 1.0)],
        }],
    };
    selfplay::save_game(&dir, &game).unwrap();
    assert_eq!(selfplay::load_game(&dir, 0, 0).unwrap(), Some(game.clone()));
    let mut nan_feature = game.clone();
    nan_feature.samples[0].graph.op_features[3] = f32::NAN;
    let mut inf_time = game.clone();
    inf_time.best_us = f64::INFINITY;
    let mut nan_target = game;
    nan_target.samples[0].target[0].1 = f32::NAN;
    for (bad, field) in [
        (nan_feature, "samples[0].graph.op_features[3]"),
        (inf_time, "best_us"),
        (nan_target, "samples[0].target[0]"),
    ] {
        selfplay::save_game(&dir, &bad).unwrap();
        let e = selfplay::load_game(&dir, 0, 0).unwrap_err().to_string();
        assert!(
            e.contains("game-000000-000.msgpack.gz") && e.contains(field),
            "{field}: {e}"
        );
    }
}
