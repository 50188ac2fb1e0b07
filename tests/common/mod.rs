//! Helpers shared by the integration tests. Each test binary uses some of them.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use topoplace::cluster::{Cluster, load_cluster};
use topoplace::gnn::{GnnConfig, GnnPolicy};

/// An untrained policy small enough for tests (width 16, 2 heads, TAG's 4 layers).
pub fn small_policy(seed: u64) -> GnnPolicy {
    let config = GnnConfig {
        width: 16,
        heads: 2,
        layers: 4,
    };
    GnnPolicy::init(config, seed).unwrap()
}

/// A fresh, empty directory for one test (unique per test binary run).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoplace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `topoplace` binary, run from the repository root.
pub fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_topoplace"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// TAG's testbed (`configs/tag-testbed.toml`).
pub fn testbed() -> Cluster {
    load_cluster(format!(
        "{}/configs/tag-testbed.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}
