//! TAG §5's experiments as commands, at a scale a test affords: their tables agree with the
//! searches they summarise, stay within what the search guarantees, and repeat exactly.

mod common;
use common::scratch;

use std::path::{Path, PathBuf};
use std::process::Output;

use topoplace::cluster::load_cluster;
use topoplace::cluster::{TopologyDistribution, random_cluster_within};
use topoplace::cost::CostModel;
use topoplace::experiment::{
    Setup, bootstrap_mean_ci, search_efficiency, search_once, unseen_topologies,
};
use topoplace::zoo;

fn topoplace(args: &[&str]) -> Output {
    common::binary().args(args).output().unwrap()
}

fn small_policy_file(dir: &Path) -> PathBuf {
    let path = dir.join("p.gnn");
    common::small_policy(7).save(&path).unwrap();
    path
}

fn csv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(String::from).collect())
        .collect()
}

#[test]
fn search_efficiency_rows_are_the_searches_they_summarise() {
    let policy = common::small_policy(7);
    let cluster = load_cluster(format!(
        "{}/configs/tag-testbed.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mlp = zoo::build("mlp", &zoo::ZooOptions::default()).unwrap();
    let setup = Setup {
        models: vec![("mlp".into(), mlp.clone())],
        cluster: &cluster,
        policy: &policy,
        budget: 24,
        uniform_budget: None,
        groups: 4,
        seeds: 2,
        topologies: 3,
        topology_seed: 2_000_000,
        distribution: TopologyDistribution::TAG,
        cost: CostModel::default(),
        one_gpu_seed: true,
        headroom: false,
    };
    let out = search_efficiency(&setup).unwrap();
    let rows: Vec<Vec<&str>> = out
        .csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0][1], rows[1][1]), ("uniform", "policy"));
    for (row, policy) in rows.iter().zip([None, Some(&policy)]) {
        let runs: Vec<_> = (0..2)
            .map(|seed| {
                search_once(&mlp, &cluster, &CostModel::default(), policy, 24, 4, seed).unwrap()
            })
            .collect();
        let mean = (runs[0].speedup + runs[1].speedup) / 2.0;
        let shown: f64 = row[5].parse().unwrap();
        assert!((shown - mean).abs() < 1e-6, "{shown} vs {mean}");
        assert!(mean >= 0.0, "the search starts from DP-NCCL");
        for r in &runs {
            assert!(r.best_at <= 24);
            assert!(r.beat_dp_at.is_none_or(|i| i <= 24));
        }
    }
    assert!(out.svg.starts_with("<svg") && out.svg.contains("<rect"));
    assert!(
        out.table
            .render_markdown()
            .starts_with("| model | priors |")
    );

    // With the headroom row: the teacher's coordinate descent, never below the start.
    let with_teacher = search_efficiency(&Setup {
        headroom: true,
        models: setup.models.clone(),
        cost: setup.cost.clone(),
        ..setup
    })
    .unwrap();
    let teacher: Vec<&str> = with_teacher
        .csv
        .lines()
        .nth(3)
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(teacher[1], "teacher");
    let shown: f64 = teacher[5].parse().unwrap();
    let direct =
        topoplace::experiment::teacher_speedup(&mlp, &cluster, &CostModel::default(), 4, 0, 1)
            .unwrap();
    assert!(
        (shown - direct).abs() < 1e-6 && direct >= 0.0,
        "{shown} vs {direct}"
    );
    assert!(with_teacher.svg.contains("teacher"));

    let unseen_tag = unseen_topologies(&setup).unwrap();
    let row: Vec<&str> = unseen_tag.csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[1], "3");
    let (mean, min, max): (f64, f64, f64) = (
        row[2].parse().unwrap(),
        row[3].parse().unwrap(),
        row[4].parse().unwrap(),
    );
    assert!(min >= 0.0 && min <= mean && mean <= max, "{row:?}");
    let better: usize = row[7].parse().unwrap();
    let worse: usize = row[8].parse().unwrap();
    assert!(better + worse <= 3);
    // The searches one by one: the means and the paired difference are theirs.
    let per_instance = unseen_tag.per_instance.as_deref().unwrap();
    let searches: Vec<Vec<f64>> = per_instance
        .lines()
        .skip(1)
        .map(|l| l.split(',').skip(1).map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(searches.len(), 3);
    assert_eq!(searches[0][0], 2_000_000.0);
    let column_mean = |c: usize| searches.iter().map(|r| r[c]).sum::<f64>() / 3.0;
    assert!((column_mean(1) - mean).abs() < 1e-6);
    let uniform_mean: f64 = row[6].parse().unwrap();
    assert!((column_mean(2) - uniform_mean).abs() < 1e-6);
    let (difference, low, high): (f64, f64, f64) = (
        row[9].parse().unwrap(),
        row[10].parse().unwrap(),
        row[11].parse().unwrap(),
    );
    assert!((difference - (mean - uniform_mean)).abs() < 1e-5, "{row:?}");
    assert!(
        low <= difference + 1e-9 && difference <= high + 1e-9,
        "{row:?}"
    );

    // Other bandwidth ranges: the rows are the searches on those topologies.
    let wide = TopologyDistribution {
        intra_gbps: [300, 400],
        inter_gbps: [90, 100],
        ..TopologyDistribution::TAG
    };
    let unseen = unseen_topologies(&Setup {
        distribution: wide,
        models: setup.models.clone(),
        cost: setup.cost.clone(),
        ..setup
    })
    .unwrap();
    let row: Vec<&str> = unseen.csv.lines().nth(1).unwrap().split(',').collect();
    let uniform: Vec<f64> = (0..3)
        .map(|i| {
            let seed = 2_000_000 + i;
            let c = random_cluster_within(seed, wide);
            search_once(&mlp, &c, &CostModel::default(), None, 24, 4, seed)
                .unwrap()
                .speedup
        })
        .collect();
    let shown: f64 = row[6].parse().unwrap();
    let mean = uniform.iter().sum::<f64>() / 3.0;
    assert!((shown - mean).abs() < 1e-6, "{shown} vs {mean}");

    // The uniform priors' own budget: their column is the searches at that budget, the
    // policy's stays at the setup's.
    let at_8 = unseen_topologies(&Setup {
        uniform_budget: Some(8),
        models: setup.models.clone(),
        cost: setup.cost.clone(),
        ..setup
    })
    .unwrap();
    let at_8: Vec<&str> = at_8.csv.lines().nth(1).unwrap().split(',').collect();
    let at_24: Vec<&str> = unseen_tag.csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(at_8[2], at_24[2], "the policy's column is unchanged");
    let uniform_8: f64 = (0..3)
        .map(|i| {
            let seed = 2_000_000 + i;
            let c = random_cluster_within(seed, TopologyDistribution::TAG);
            search_once(&mlp, &c, &CostModel::default(), None, 8, 4, seed)
                .unwrap()
                .speedup
        })
        .sum::<f64>()
        / 3.0;
    let shown: f64 = at_8[6].parse().unwrap();
    assert!((shown - uniform_8).abs() < 1e-6, "{shown} vs {uniform_8}");
}

#[test]
fn experiment_commands_write_tables_and_repeat_exactly() {
    let dir = scratch("cli");
    let policy = small_policy_file(&dir);
    let policy = policy.to_str().unwrap();
    let common = [
        "--policy", policy, "--models", "mlp", "--budget", "16", "--groups", "4",
    ];
    // Each experiment takes only the flags it reads.
    for (name, own) in [
        ("search-efficiency", ["--seeds", "1"]),
        ("unseen-topologies", ["--topologies", "2"]),
        ("overhead", ["--topologies", "2"]),
    ] {
        let mut tables = Vec::new();
        for run in ["a", "b"] {
            let out_dir = dir.join(run);
            let out = topoplace(
                &[
                    &["experiment", name, "--out", out_dir.to_str().unwrap()],
                    &common[..],
                    &own[..],
                ]
                .concat(),
            );
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            for ext in ["csv", "md", "svg"] {
                assert!(
                    out_dir.join(format!("{name}.{ext}")).exists(),
                    "{name}.{ext}"
                );
            }
            let per_instance = out_dir.join(format!("{name}-per-instance.csv"));
            assert_eq!(per_instance.exists(), name == "unseen-topologies");
            tables.push(csv(&out_dir.join(format!("{name}.csv"))));
        }
        if name != "overhead" {
            // Everything but wall-clock seconds (search-efficiency's last column).
            let timeless = |t: &Vec<Vec<String>>| -> Vec<Vec<String>> {
                t.iter()
                    .map(|r| r.to_vec())
                    .map(|mut r| {
                        if name == "search-efficiency" {
                            r.pop();
                        }
                        r
                    })
                    .collect()
            };
            assert_eq!(
                timeless(&tables[0]),
                timeless(&tables[1]),
                "{name} repeats exactly"
            );
        } else {
            assert_eq!(tables[0].len(), 2);
            assert!(tables[0][1][2].parse::<f64>().unwrap() > 0.0);
        }
    }
    let bad = topoplace(&["experiment", "nonsense", "--out", dir.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let missing = topoplace(&[
        "experiment",
        "overhead",
        "--out",
        dir.to_str().unwrap(),
        "--policy",
        "/nonexistent.gnn",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent.gnn"));
}

/// `holdout-models`: one short training run per held-out model, each without it.
#[test]
fn holdout_models_trains_without_each_model() {
    let dir = scratch("holdout");
    let policy = small_policy_file(&dir);
    let recipe = dir.join("r.toml");
    std::fs::write(
        &recipe,
        "name = \"h\"\nsteps = 2\n[training_set]\nmodels = [\"mlp\", \"alexnet\"]\ntopologies = 20\n\
         [search]\nbudget = 16\ngroups = 4\nmin_visits = 4\ngames_per_step = 1\ngeneration = 2\n\
         [model]\nwidth = 16\nheads = 2\n[optimizer]\nbatch = 4\n[evaluation]\nevery = 0\n",
    )
    .unwrap();
    let out = topoplace(&[
        "experiment",
        "holdout-models",
        "--out",
        dir.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--models",
        "mlp,alexnet",
        "--budget",
        "16",
        "--groups",
        "4",
        "--recipe",
        recipe.to_str().unwrap(),
        "--json",
    ]);
    let rows = common::json_of(out);
    assert_eq!(rows.as_array().unwrap().len(), 2);
    for row in rows.as_array().unwrap() {
        let number = |key: &str| {
            let v = &row[key];
            v.as_f64()
                .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
                .unwrap_or_else(|| panic!("{key} in {row}"))
        };
        assert_eq!(number("seeds"), 3.0, "{row}");
        // The time ratio is the held-out policy's time over the full one's.
        let ratio = (1.0 + number("trained_with")) / (1.0 + number("held_out"));
        assert!((number("time_ratio") - ratio).abs() < 1e-3, "{row}");
    }
    for (model, other) in [("mlp", "alexnet"), ("alexnet", "mlp")] {
        let run = dir.join(format!("holdout-{model}"));
        let games: Vec<String> = std::fs::read_dir(run.join("games"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                let game: topoplace::train::selfplay::GameRecord =
                    topoplace::train::selfplay::decode(&bytes, &p).unwrap();
                game.setup.model
            })
            .collect();
        assert_eq!(games.len(), 2);
        assert!(
            games.iter().all(|m| m == other),
            "{model} held out: {games:?}"
        );
    }
}

#[test]
fn a_constant_sample_has_a_point_interval() {
    assert_eq!(bootstrap_mean_ci(&[0.25; 40], 500, 3), (0.25, 0.25));
    // One value has no spread to resample: no interval, not a point.
    let (low, high) = bootstrap_mean_ci(&[0.25], 500, 3);
    assert!(low.is_nan() && high.is_nan());
}

#[test]
fn the_interval_matches_the_normal_approximation_on_a_large_sample() {
    // Half zeros, half ones: mean 0.5, standard error 0.5 / √400 = 0.025, so the 95% interval
    // is 0.5 ± 1.96 · 0.025 = [0.451, 0.549].
    let xs: Vec<f64> = (0..400).map(|i| f64::from(i % 2)).collect();
    let (low, high) = bootstrap_mean_ci(&xs, 10_000, 0);
    assert!((low - 0.451).abs() < 0.006, "{low}");
    assert!((high - 0.549).abs() < 0.006, "{high}");
}

#[test]
fn the_interval_holds_the_mean_narrows_with_more_data_and_repeats_by_seed() {
    let skewed: Vec<f64> = (0..100).map(|i| f64::from(i % 10).powi(2) / 81.0).collect();
    let mean = skewed.iter().sum::<f64>() / 100.0;
    let (low, high) = bootstrap_mean_ci(&skewed, 4_000, 7);
    assert!(low < mean && mean < high, "{low} {mean} {high}");
    assert_eq!(bootstrap_mean_ci(&skewed, 4_000, 7), (low, high));
    // Four times the data, the same spread: half the width (standard error ∝ 1/√n).
    let more: Vec<f64> = skewed.iter().cycle().take(400).copied().collect();
    let (l4, h4) = bootstrap_mean_ci(&more, 4_000, 7);
    let ratio = (h4 - l4) / (high - low);
    assert!((0.4..0.6).contains(&ratio), "{ratio}");
}

/// `experiment`'s flags that cannot be run are refused at the flag, exit 2, before any search:
/// each of these failed late, wrapped, or ran and wrote NaN rows or seen topologies.
#[test]
fn unusable_experiment_flags_are_usage_errors_naming_the_flag() {
    let dir = scratch("experiment-flags");
    let out = dir.join("out").display().to_string();
    let at = |args: &[&str]| {
        let mut all = vec!["experiment"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--out", &out]);
        topoplace(&all)
    };
    for (args, flag, says) in [
        // bf16 on the cluster's V100s, and on the random topologies' pre-Ampere GPUs.
        (
            &[
                "search-efficiency",
                "--cluster",
                "tag-sfb",
                "--precision",
                "bf16",
            ][..],
            "--precision",
            "bfloat16",
        ),
        (
            &["unseen-topologies", "--precision", "bf16"],
            "--precision",
            "bfloat16",
        ),
        (
            &["layout-priors", "--precision", "bf16", "--no-instances"],
            "--precision",
            "bfloat16",
        ),
        // Seeds 2⁶⁴−1 and up wrapped to 0, the shipped policy's training seeds.
        (
            &[
                "unseen-topologies",
                "--topology-seed",
                "18446744073709551615",
                "--topologies",
                "2",
            ],
            "--topology-seed",
            "18446744073709551613",
        ),
        (&["holdout-models", "--steps", "0"], "--steps", "at least 1"),
        (&["layout-priors", "--models", "mlp"], "--models", "mlp"),
        // A flag another experiment reads was ignored, a corrupt or missing file included.
        (
            &["search-efficiency", "--layout-policy", "no-such.policy"],
            "--layout-policy",
            "only layout-priors",
        ),
        (
            &["unseen-topologies", "--recipe", "no-such.toml"],
            "--recipe",
            "only holdout-models",
        ),
        (
            &["search-efficiency", "--models", "mlp,mlp"],
            "--models",
            "named twice",
        ),
    ] {
        let run = at(args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(says),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("--model:"), "{args:?}: {stderr}");
    }
    assert!(!dir.join("out").exists(), "nothing written");
    // The largest seed that fits is taken (the check is on the sum, not the seed).
    let run = at(&[
        "unseen-topologies",
        "--topology-seed",
        "18446744073709551613",
        "--topologies",
        "2",
        "--precision",
        "bf16",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("--topology-seed"), "{stderr}");
}

/// `bench gnn --repeat` is bounded, and `bench scale` checks its flags and model itself, before
/// any child runs: a child's refusal came back nested, with exit 1.
#[test]
fn bench_flags_are_refused_at_the_flag() {
    for (args, flag) in [
        (
            &["bench", "gnn", "--models", "mlp", "--repeat", "99999999999"][..],
            "--repeat",
        ),
        (
            &[
                "bench", "scale", "--model", "mlp", "--gpus", "1", "--budget", "0",
            ],
            "--budget",
        ),
        (
            &["bench", "scale", "--model", "nope", "--gpus", "1"],
            "nope",
        ),
    ] {
        let run = topoplace(args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("GPUs: error"), "{args:?}: {stderr}");
    }
}
