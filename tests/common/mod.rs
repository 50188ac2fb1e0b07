//! Helpers shared by the integration tests. Each test binary uses some of them.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use topoplace::cluster::{Cluster, load_cluster};
use topoplace::evaluate::{Placement, evaluate};
use topoplace::gnn::{GnnConfig, GnnPolicy};
use topoplace::graph::Graph;
use topoplace::mcts::{PACKINGS, Shares, actions, build_strategy};
use topoplace::problem::Problem;
use topoplace::zoo::{ZooOptions, build};

/// An untrained policy small enough for tests (width 16, 2 heads, TAG's 4 layers).
pub fn small_policy(seed: u64) -> GnnPolicy {
    let config = GnnConfig {
        width: 16,
        heads: 2,
        layers: 4,
    };
    GnnPolicy::init(config, seed).unwrap()
}

/// A fresh, empty directory for one test (unique per test binary run), removed when the test
/// passes and kept for a look when it fails.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("topoplace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

/// The directory of [`scratch`].
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;

    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The `topoplace` binary, run from the repository root.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_topoplace"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// TAG's testbed (`configs/tag-testbed.toml`).
pub fn testbed() -> Cluster {
    shipped_cluster("tag-testbed")
}

/// A cluster shipped in `configs/`, by name.
pub fn shipped_cluster(name: &str) -> Cluster {
    load_cluster(format!(
        "{}/configs/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A zoo model rebuilt at `batch`.
pub fn zoo_model(name: &str, batch: u32) -> Graph {
    let opts = ZooOptions {
        batch_size: Some(batch),
        ..Default::default()
    };
    build(name, &opts).unwrap()
}

/// Every committed torch export whose model the zoo also builds (same model, batch and lengths),
/// with that zoo name.
pub const TORCH_ZOO_TWINS: [(&str, &str); 9] = [
    ("datasets/torch/vgg19_b96.json.gz", "vgg19"),
    ("datasets/torch/resnet101_b96.json.gz", "resnet101"),
    ("datasets/torch/inception_v3_b96.json.gz", "inception-v3"),
    ("datasets/torch/alexnet_b128.json.gz", "alexnet"),
    ("datasets/torch/vgg16_b96.json.gz", "vgg16"),
    ("datasets/torch/bert_large_b16_s128.json.gz", "bert-large"),
    ("datasets/torch/bert_small_b96_s128.json.gz", "bert-small"),
    ("datasets/torch/transformer_b480_s32.json.gz", "transformer"),
    ("datasets/torch/gpt2_b8_s1024.json.gz", "gpt"),
];

/// A JSON array of numbers (a command's `--json` output) as f64s.
pub fn f64s(array: &serde_json::Value) -> Vec<f64> {
    let items = array.as_array().expect("a JSON array");
    items
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// The tests of one binary run side by side on a machine of two cores: every command they run
/// holds this lock shared, and a test that times a command holds it alone ([`run_timed_alone`]),
/// so the wall time it measures is the command's and not its neighbours' load (`place --time 3`
/// ended at 3.1 s alone and at 4.4 s beside other tests' searches).
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Run `topoplace` with `args` from the repository root; its output, whatever its exit.
pub fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    let _shared = MACHINE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    binary().args(args).output().unwrap()
}

/// Run `topoplace` with `args` once no other test's command runs (and none starts until it
/// ends); its output, whatever its exit, and its wall time in seconds.
pub fn run_timed_alone<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (std::process::Output, f64) {
    let _alone = MACHINE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let started = std::time::Instant::now();
    let out = binary().args(args).output().unwrap();
    (out, started.elapsed().as_secs_f64())
}

/// The output of a finished command that must have succeeded (its stderr in the failure).
pub fn succeeded(out: std::process::Output) -> std::process::Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Run `topoplace` with `args`, which must succeed; its output.
pub fn run_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    succeeded(run(args))
}

/// Run `topoplace` with `args`, which must succeed and print JSON; the parsed JSON.
pub fn run_json<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> serde_json::Value {
    json_of(succeeded(run(args)))
}

/// The JSON a finished command that must have succeeded printed.
pub fn json_of(out: std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&succeeded(out).stdout).expect("--json prints JSON")
}

/// The fastest fitting time of the uniform choices `[a; groups]` for each action `a` in `acts`
/// (each under both packings), by simulating them one by one.
pub fn best_uniform_choice(p: &Problem, op_group: &[u32], acts: &[u16]) -> f64 {
    let all = actions(p.cluster);
    let groups = op_group.iter().map(|&g| g as usize + 1).max().unwrap();
    let mut best = f64::INFINITY;
    for &a in acts {
        for packing in PACKINGS {
            let choice = vec![a; groups];
            let devices = p.cluster.devices.len();
            let s =
                build_strategy(op_group, &all, &choice, packing, Shares::EVEN, devices).unwrap();
            let e = evaluate(p, &Placement::plain(s, "")).unwrap();
            if e.result.oom.is_empty() {
                best = best.min(e.report.iteration_us);
            }
        }
    }
    best
}

/// The action replicating with `option` (its name) over exactly `devices`.
pub fn action_over(c: &Cluster, option: &str, devices: &[usize]) -> u16 {
    let at = actions(c)
        .iter()
        .position(|a| a.option.name() == option && a.devices == devices);
    at.unwrap() as u16
}
