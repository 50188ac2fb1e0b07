//! Self-play training: training targets are the search's visit distributions, a run killed
//! between checkpoints resumes to exactly the uninterrupted run, and sharded self-play plus
//! `train --samples` equals in-process training.

mod common;
use common::binary as topoplace;
use common::scratch;

use std::path::{Path, PathBuf};
use std::process::Output;

use topoplace::cost::CostModel;
use topoplace::mcts::{Mcts, MctsConfig, metis_groups};
use topoplace::problem::Problem;
use topoplace::train::Recipe;
use topoplace::train::imitation;
use topoplace::train::selfplay::{self, ClusterSource, Models};
use topoplace::zoo;

fn run(args: &[&str]) -> Output {
    let out = topoplace().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "topoplace {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `topoplace train --config config --out out` with `extra` arguments, however it ends.
fn train(config: &str, out: &Path, extra: &[&str]) -> Output {
    topoplace()
        .args(["train", "--config", config, "--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// `topoplace train --resume` of the run in `out`, to its end.
fn resume(config: &str, out: &Path) {
    run(&[
        "train",
        "--config",
        config,
        "--out",
        out.to_str().unwrap(),
        "--resume",
    ]);
}

/// `topoplace train` from start to end into `out`.
fn train_uninterrupted(config: &str, out: &Path) {
    run(&["train", "--config", config, "--out", out.to_str().unwrap()]);
}

fn testbed_path() -> String {
    format!("{}/configs/tag-testbed.toml", env!("CARGO_MANIFEST_DIR"))
}

/// A recipe small enough for a test: the MLP on TAG's testbed and on random topologies, short
/// searches, tiny batches.
fn tiny_recipe(dir: &Path, steps: u64, generation: u64, evaluate_every: u64) -> PathBuf {
    let text = format!(
        "name = \"tiny\"\nseed = 3\nsteps = {steps}\n\
         [training_set]\nmodels = [\"mlp\"]\ntopologies = 50\nclusters = [\"{}\"]\n\
         [search]\nbudget = 24\ngroups = 4\nmin_visits = 4\ngames_per_step = 2\ngeneration = {generation}\n\
         [model]\nwidth = 16\nheads = 2\n\
         [optimizer]\nlearning_rate = 0.01\nbatch = 6\nreplay = 60\n\
         [evaluation]\nevery = {evaluate_every}\ntopologies = 2\n\
         [checkpoint]\nevery = 2\n",
        testbed_path()
    );
    let path = dir.join("tiny.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// TAG's target: at each vertex with enough visits, `π = N / ΣN`. The root has seen every
/// iteration plus the start's one visit, and every target is a distribution over the actions
/// of the group at the vertex's depth.
#[test]
fn targets_are_the_visit_distributions_of_well_visited_vertices() {
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
    // As self-play searches (`train::search_config`): TAG's tree, without the device-group seeds.
    let config = MctsConfig {
        iterations: 80,
        sfb_check: false,
        seed_device_groups: false,
        ..MctsConfig::default()
    };
    let mut mcts = Mcts::new(p, op_group.clone(), config)
        .unwrap()
        .with_policy(&policy)
        .unwrap();
    let actions = mcts.actions().len();
    let (found, targets) = mcts.run_with_targets(5, |_| {}).unwrap();
    assert_eq!(found.iterations, 80);
    let root = &targets[0];
    assert_eq!(root.group, 0);
    let root_visits: u32 = root.visits.iter().map(|v| v.1).sum();
    assert_eq!(root_visits, 81, "80 iterations and the start's visit");
    assert!(
        targets.len() > 1,
        "a 80-iteration search has a second vertex with 5 visits"
    );
    for t in &targets {
        let n: u32 = t.visits.iter().map(|v| v.1).sum();
        assert!(n >= 5, "a target with {n} visits");
        assert!(t.group < 4);
        assert_eq!(t.graph.ops(), 4);
        assert!(
            t.visits
                .iter()
                .all(|&(a, n)| (a as usize) < actions && n > 0)
        );
        let pi = t.distribution();
        let sum: f32 = pi.iter().map(|x| x.1).sum();
        assert!((sum - 1.0).abs() < 1e-5, "π sums to {sum}");
        for (&(a, n_a), &(b, p)) in t.visits.iter().zip(&pi) {
            assert_eq!(a, b);
            assert!((p - n_a as f32 / n as f32).abs() < 1e-6);
        }
        // The next-group flag of the GNN input marks the target's group.
        let next = 11; // raw 3, option one-hot 4, share, makespan, idle, decided, next
        let ops = t.graph.ops();
        for o in 0..ops {
            let flag = t.graph.op_features[o * topoplace::gnn::features::OP_FEATURES + next];
            assert_eq!(
                flag == 1.0,
                o == t.group,
                "op group {o}, target group {}",
                t.group
            );
        }
    }
}

/// Games are drawn from the training set by step and worker alone, and a game file round-trips.
#[test]
fn games_are_drawn_by_seed_and_round_trip_through_files() {
    let dir = scratch("games");
    let recipe = Recipe::load(&tiny_recipe(&dir, 4, 2, 0)).unwrap();
    let a = selfplay::draw(&recipe, 3, 1);
    assert_eq!(a, selfplay::draw(&recipe, 3, 1));
    let draws: Vec<_> = (0..40).map(|s| selfplay::draw(&recipe, s, 0)).collect();
    assert!(
        draws
            .iter()
            .any(|d| matches!(d.cluster, ClusterSource::Random(..)))
    );
    assert!(
        draws
            .iter()
            .any(|d| matches!(d.cluster, ClusterSource::Config(_)))
    );
    assert!(draws.windows(2).any(|w| w[0].seed != w[1].seed));
    for d in &draws {
        if let ClusterSource::Random(seed, _) = d.cluster {
            assert!(seed < 50, "topology seed {seed} outside the training set");
        }
    }
    let models = Models::load(&recipe.training_set, &recipe.training_set.models).unwrap();
    let policy = common::small_policy(recipe.seed);
    let game = selfplay::play(&recipe, &a, &models, &policy).unwrap();
    assert!(!game.samples.is_empty());
    assert!(
        game.fits && game.best_us <= game.dp_us,
        "the search starts from DP-NCCL"
    );
    selfplay::save_game(&dir, &game).unwrap();
    assert_eq!(
        selfplay::load_game(&dir, 3, 1).unwrap().as_ref(),
        Some(&game)
    );
    assert_eq!(selfplay::load_game(&dir, 3, 0).unwrap(), None);
    // Playing the same game again gives the same targets.
    assert_eq!(selfplay::play(&recipe, &a, &models, &policy).unwrap(), game);
    // A corrupt file is an error naming it.
    std::fs::write(selfplay::game_path(&dir, 5, 0), b"not gzip").unwrap();
    let e = selfplay::load_game(&dir, 5, 0).unwrap_err().to_string();
    assert!(e.contains("game-000005-000"), "{e}");
}

/// Kill a run (abort, as `kill -9` would) after step 5, between the checkpoints of steps 4 and
/// 6; resuming from step 4 repeats the uninterrupted run exactly: same metrics, same weights.
#[test]
fn a_killed_run_resumes_to_the_uninterrupted_run() {
    let dir = scratch("resume");
    let recipe = tiny_recipe(&dir, 7, 3, 3);
    let (whole, killed) = (dir.join("whole"), dir.join("killed"));
    let config = recipe.to_str().unwrap();
    train_uninterrupted(config, &whole);

    let out = train(config, &killed, &["--abort-after-step", "5"]);
    assert!(!out.status.success(), "the run was meant to die");
    let latest = std::fs::read_to_string(killed.join("checkpoints/latest")).unwrap();
    assert_eq!(latest.trim(), "step-4");
    let rows = String::from_utf8(read(&killed.join("metrics.csv"))).unwrap();
    assert_eq!(
        rows.lines().count(),
        1 + 5,
        "metrics up to the step it died after"
    );

    // A second start without --resume refuses to overwrite the run.
    let again = train(config, &killed, &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));

    resume(config, &killed);
    let metrics = read(&whole.join("metrics.csv"));
    assert_eq!(
        String::from_utf8_lossy(&metrics),
        String::from_utf8_lossy(&read(&killed.join("metrics.csv")))
    );
    assert!(read(&whole.join("policy.gnn")) == read(&killed.join("policy.gnn")));
    let text = String::from_utf8(metrics).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 7);
    // Evaluations at steps 3, 6 and the last, 7; uniform priors score the same each time.
    let evaluated: Vec<&str> = rows
        .iter()
        .filter(|r| !r[6].is_empty())
        .map(|r| r[0])
        .collect();
    assert_eq!(evaluated, ["3", "6", "7"]);
    assert!(
        rows.iter()
            .all(|r| r[2].parse::<f64>().unwrap().is_finite())
    );
    let svg = String::from_utf8(read(&whole.join("loss.svg"))).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

/// Self-play in two shards per generation, then `train --samples`, gives the same weights and
/// metrics as training in one process with the same seeds.
#[test]
fn sharded_selfplay_equals_in_process_training() {
    let dir = scratch("shards");
    let recipe = tiny_recipe(&dir, 4, 2, 0);
    let config = recipe.to_str().unwrap();
    let (whole, sharded, samples) = (dir.join("whole"), dir.join("sharded"), dir.join("samples"));
    let (sharded_s, samples_s) = (sharded.to_str().unwrap(), samples.to_str().unwrap());
    train_uninterrupted(config, &whole);

    for generation in 0..2 {
        for shard in ["0", "1"] {
            let out = run(&[
                "selfplay", "--config", config, "--run", sharded_s, "--shard", shard, "--of", "2",
                "--out", samples_s, "--json",
            ]);
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(report["generation"], generation);
            assert_eq!(report["games"], 2, "2 steps × 2 games, half per shard");
        }
        let mut args = vec![
            "train",
            "--config",
            config,
            "--out",
            sharded_s,
            "--samples",
            samples_s,
        ];
        if generation > 0 {
            args.push("--resume");
        }
        let out = run(&[args.as_slice(), &["--json"]].concat());
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["step"], 2 * (generation + 1));
        let waiting = if generation == 0 {
            serde_json::json!(1)
        } else {
            serde_json::Value::Null
        };
        assert_eq!(report["waiting_for_generation"], waiting);
    }
    // Shards of a run that has checkpoints are played with the run's own recipe: another one
    // (here a different seed) would feed games the run never asked for.
    let other = std::fs::read_to_string(&recipe)
        .unwrap()
        .replacen("seed = ", "seed = 1", 1);
    let other_recipe = dir.join("other.toml");
    std::fs::write(&other_recipe, other).unwrap();
    let out = topoplace()
        .args([
            "selfplay",
            "--config",
            other_recipe.to_str().unwrap(),
            "--run",
            sharded_s,
            "--shard",
            "0",
            "--of",
            "2",
            "--out",
            samples_s,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("seed"), "{stderr}");
    // Nor does a fresh run of the other recipe train on this run's games: their names match its
    // steps and workers, but not its draws.
    let foreign = dir.join("foreign");
    let out = topoplace()
        .args(["train", "--config", other_recipe.to_str().unwrap()])
        .args(["--out", foreign.to_str().unwrap(), "--samples", samples_s])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("played for another run"), "{stderr}");
    assert!(read(&whole.join("policy.gnn")) == read(&sharded.join("policy.gnn")));
    assert_eq!(
        read(&whole.join("metrics.csv")),
        read(&sharded.join("metrics.csv"))
    );
    for step in 0..4 {
        for worker in 0..2 {
            let name = selfplay::game_path(Path::new(""), step, worker);
            assert!(
                read(&whole.join("games").join(&name)) == read(&samples.join(&name)),
                "{}",
                name.display()
            );
        }
    }
}

#[test]
fn bad_shards_and_recipes_are_named_errors() {
    let dir = scratch("bad");
    let recipe = tiny_recipe(&dir, 4, 2, 0);
    let out = topoplace()
        .args([
            "selfplay",
            "--config",
            recipe.to_str().unwrap(),
            "--shard",
            "2",
            "--of",
            "2",
        ])
        .args(["--out", dir.join("s").to_str().unwrap()])
        .output()
        .unwrap();
    // A usage error: clap's exit status.
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--shard"));

    let text = std::fs::read_to_string(&recipe)
        .unwrap()
        .replace("generation = 2", "generation = 0");
    let e = Recipe::parse(&text, "r.toml").unwrap_err().to_string();
    assert!(
        e.contains("r.toml") && e.contains("search.generation"),
        "{e}"
    );
}

/// The warm start's teacher ends at a coordinate-wise optimum in the tree's own terms: its root
/// decision is the fastest of every action given to all op groups (brute force), and no single
/// later group's decision can be changed to a faster strategy.
#[test]
fn the_teacher_is_a_coordinate_wise_optimum_of_the_trees_strategies() {
    let g = zoo::build("mlp", &zoo::ZooOptions::default()).unwrap();
    let c = topoplace::cluster::random_cluster(7);
    let cost = CostModel::default();
    let p = Problem {
        graph: &g,
        cluster: &c,
        cost: &cost,
    };
    let op_group = metis_groups(&p, 4, 0).unwrap();
    let config = MctsConfig {
        sfb_check: false,
        ..MctsConfig::default()
    };
    let mcts = Mcts::new(p, op_group, config).unwrap();
    let (groups, actions) = (mcts.groups(), mcts.actions().len() as u16);
    assert!(
        groups >= 3 && actions >= 8,
        "{groups} groups, {actions} actions"
    );
    let (path, best) = imitation::descend(&mcts, 50).unwrap();
    assert_eq!(path.len(), groups);
    assert_eq!(mcts.choice_time(&path).unwrap(), best);

    let root_times: Vec<f64> = (0..actions)
        .map(|a| mcts.choice_time(&vec![a; groups]).unwrap())
        .collect();
    let fastest_root = root_times.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(root_times[path[0] as usize], fastest_root);
    assert!(
        root_times[..path[0] as usize]
            .iter()
            .all(|&t| t > fastest_root)
    );
    assert!(
        best <= fastest_root && best <= root_times[0],
        "never worse than DP"
    );
    for group in 1..groups {
        for a in 0..actions {
            let mut changed = path.clone();
            changed[group] = a;
            let t = mcts.choice_time(&changed).unwrap();
            assert!(t >= best, "group {group} → action {a}: {t} < {best}");
        }
    }
}

fn with_warm_start(recipe: &Path, games: u64, steps: u64) {
    let mut text = std::fs::read_to_string(recipe).unwrap();
    text.push_str(&format!("[warm_start]\ngames = {games}\nsteps = {steps}\n"));
    std::fs::write(recipe, text).unwrap();
}

/// A teacher game has one target per op group, in depth order: one-hot on the teacher's
/// decision, from the GNN input of the vertex the search would reach by those decisions.
#[test]
fn teacher_games_have_a_one_hot_target_at_every_depth() {
    let dir = scratch("teacher");
    let path = tiny_recipe(&dir, 2, 1, 0);
    with_warm_start(&path, 3, 5);
    let recipe = Recipe::load(&path).unwrap();
    let models = Models::load(&recipe.training_set, &recipe.all_models()).unwrap();
    let policy = common::small_policy(recipe.seed);
    let setup = imitation::draw(&recipe, 1);
    assert_eq!(setup, imitation::draw(&recipe, 1));
    assert_ne!(
        setup.seed,
        selfplay::draw(&recipe, 1, 0).seed,
        "its own seed stream"
    );
    let game = imitation::play(&recipe, &setup, &models, &policy, 1).unwrap();
    assert!(game.fits && game.best_us <= game.dp_us);
    assert_eq!(game.samples.len(), 4, "the tiny recipe's 4 op groups");
    for (depth, s) in game.samples.iter().enumerate() {
        assert_eq!(s.group as usize, depth);
        assert_eq!(s.target.len(), 1);
        assert_eq!(s.target[0].1, 1.0);
        assert!((s.target[0].0 as usize) < game.slices.len());
    }
    assert_eq!(
        imitation::play(&recipe, &setup, &models, &policy, 1).unwrap(),
        game
    );
}

/// With a warm start the run first imitates the teacher (the loss falls), checkpoints at step
/// 0, and a run killed after it resumes without redoing it, to exactly the uninterrupted run.
/// Shards cannot play generation 0 before `train` has done the warm start.
#[test]
fn warm_start_imitates_the_teacher_and_resumes() {
    let dir = scratch("warm");
    let recipe = tiny_recipe(&dir, 3, 3, 0);
    with_warm_start(&recipe, 3, 40);
    let config = recipe.to_str().unwrap();
    let (whole, killed) = (dir.join("whole"), dir.join("killed"));

    let shard = topoplace()
        .args(["selfplay", "--config", config, "--run"])
        .args([killed.to_str().unwrap(), "--shard", "0", "--of", "1"])
        .args(["--out", dir.join("s").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!shard.status.success());
    assert!(String::from_utf8_lossy(&shard.stderr).contains("warm start"));

    train_uninterrupted(config, &whole);
    let state: serde_json::Value =
        serde_json::from_slice(&read(&whole.join("checkpoints/step-3/state.json"))).unwrap();
    let warm = &state["warm_start"];
    assert_eq!(warm["games"], 3);
    let losses = common::f64s(&warm["losses"]);
    assert_eq!(losses.len(), 40);
    let first: f64 = losses[..5].iter().sum();
    let last: f64 = losses[35..].iter().sum();
    assert!(last < first * 0.7, "imitation loss {first} → {last}");

    let out = train(config, &killed, &["--abort-after-step", "1"]);
    assert!(!out.status.success(), "the run was meant to die");
    let latest = std::fs::read_to_string(killed.join("checkpoints/latest")).unwrap();
    assert_eq!(latest.trim(), "step-0", "the warm start's checkpoint");
    let teacher = killed.join("teacher");
    let before = std::fs::metadata(selfplay::game_path(&teacher, 0, 0))
        .unwrap()
        .modified()
        .unwrap();
    resume(config, &killed);
    let after = std::fs::metadata(selfplay::game_path(&teacher, 0, 0))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "the teacher's games are not played again");
    assert!(read(&whole.join("policy.gnn")) == read(&killed.join("policy.gnn")));
    assert_eq!(
        read(&whole.join("metrics.csv")),
        read(&killed.join("metrics.csv"))
    );
}

/// A held-out model is removed from the teacher's models too, so the policy trained without it
/// never saw it, not even in the warm start.
#[test]
fn a_held_out_model_is_out_of_the_teacher_too() {
    let text = "name = \"r\"\n[training_set]\nmodels = [\"mlp\", \"vgg19\"]\n\
                [warm_start]\nmodels = [\"vgg19\"]\n";
    let recipe = Recipe::parse(text, "r.toml").unwrap();
    assert!((0..20).all(|i| imitation::draw(&recipe, i).model == "vgg19"));
    let held = recipe.without_model("vgg19");
    assert_eq!(held.training_set.models, ["mlp"]);
    assert!((0..20).all(|i| imitation::draw(&held, i).model == "mlp"));
    assert!((0..20).all(|i| selfplay::draw(&held, i, 0).model == "mlp"));
}

/// A checkpoint carries its files' checksums and the run's recipe: a corrupt file, or a recipe
/// edited in anything but `steps`, is refused on --resume with the file or the keys named;
/// raising `steps` resumes.
#[test]
fn resume_refuses_corrupt_checkpoints_and_edited_recipes() {
    let dir = scratch("resume-checks");
    let recipe = tiny_recipe(&dir, 2, 2, 0);
    let out = dir.join("run");
    train_uninterrupted(recipe.to_str().unwrap(), &out);
    let step = out.join("checkpoints/step-2");
    assert!(step.join("MANIFEST").exists() && step.join("recipe.toml").exists());

    let text = std::fs::read_to_string(&recipe).unwrap();
    let edited = dir.join("edited.toml");
    std::fs::write(
        &edited,
        text.replace("seed = 3", "seed = 4")
            .replace("budget = 24", "budget = 25")
            .replace("steps = 2", "steps = 4"),
    )
    .unwrap();
    let refused = train(edited.to_str().unwrap(), &out, &["--resume"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("seed") && stderr.contains("search.budget") && !stderr.contains("steps,"),
        "{stderr}"
    );

    let longer = dir.join("longer.toml");
    std::fs::write(&longer, text.replace("steps = 2", "steps = 3")).unwrap();
    let state = step.join("state.json");
    let mut bytes = read(&state);
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    std::fs::write(&state, &bytes).unwrap();
    let refused = train(longer.to_str().unwrap(), &out, &["--resume"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("state.json") && stderr.contains("checksum"),
        "{stderr}"
    );
    bytes[last] ^= 1;
    std::fs::write(&state, &bytes).unwrap();
    resume(longer.to_str().unwrap(), &out);
    assert!(out.join("checkpoints/step-3").exists());

    // `steps` lowered below the step reached: the run is complete, said so, not "step 3/1".
    let shorter = dir.join("shorter.toml");
    std::fs::write(&shorter, text.replace("steps = 2", "steps = 1")).unwrap();
    let refused = train(shorter.to_str().unwrap(), &out, &["--resume"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("already at step 3") && stderr.contains("`steps` = 1"),
        "{stderr}"
    );
    assert!(!out.join("checkpoints/step-4").exists());
}

/// Expert iteration's teacher share: self-play batches that draw half their targets from the
/// warm start's teacher games train other weights than replay-only batches, and a run killed
/// after its first step reads the teacher's games back and resumes to exactly the uninterrupted
/// run. A share without a warm start is refused naming the key.
#[test]
fn teacher_share_mixes_the_teachers_targets_and_resumes() {
    let dir = scratch("teacher-share");
    let plain = tiny_recipe(&dir, 2, 1, 0);
    with_warm_start(&plain, 2, 5);
    let mixed = dir.join("mixed.toml");
    let text = std::fs::read_to_string(&plain)
        .unwrap()
        .replace("replay = 60\n", "replay = 60\nteacher_share = 0.5\n");
    std::fs::write(&mixed, text).unwrap();
    let (config, base) = (mixed.to_str().unwrap(), plain.to_str().unwrap());
    let (whole, killed, replay_only) = (dir.join("whole"), dir.join("killed"), dir.join("plain"));
    train_uninterrupted(config, &whole);
    train_uninterrupted(base, &replay_only);
    assert!(read(&whole.join("policy.gnn")) != read(&replay_only.join("policy.gnn")));
    let out = train(config, &killed, &["--abort-after-step", "1"]);
    assert!(!out.status.success(), "the run was meant to die");
    resume(config, &killed);
    assert!(read(&whole.join("policy.gnn")) == read(&killed.join("policy.gnn")));
    assert_eq!(
        read(&whole.join("metrics.csv")),
        read(&killed.join("metrics.csv"))
    );
    let no_warm = "name = \"x\"\n[training_set]\nmodels = [\"mlp\"]\n\
                   [optimizer]\nteacher_share = 0.25\n";
    let err = Recipe::parse(no_warm, "r.toml").unwrap_err().to_string();
    assert!(err.contains("optimizer.teacher_share"), "{err}");
    let too_much = format!("{no_warm}[warm_start]\n").replace("0.25", "1.0");
    let err = Recipe::parse(&too_much, "r.toml").unwrap_err().to_string();
    assert!(err.contains("optimizer.teacher_share"), "{err}");
}

/// Two runs on one `--out` would interleave their checkpoints: while one holds the directory, a
/// second is refused at once, naming the lock, and leaves no checkpoint behind.
#[test]
fn a_second_run_on_a_held_directory_is_refused() {
    let dir = scratch("locked-run");
    let recipe = tiny_recipe(&dir, 2, 2, 0);
    let out = dir.join("run");
    std::fs::create_dir_all(&out).unwrap();
    let held = std::fs::File::create(out.join(".lock")).unwrap();
    held.lock().unwrap();
    let second = train(recipe.to_str().unwrap(), &out, &[]);
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(".lock") && stderr.contains("another training run"),
        "{stderr}"
    );
    assert!(!out.join("checkpoints").exists());
    held.unlock().unwrap();
    let after = train(recipe.to_str().unwrap(), &out, &[]);
    assert!(
        after.status.success(),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
}
