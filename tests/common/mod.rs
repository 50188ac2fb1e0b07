//! Helpers shared by the integration tests that need a GNN policy.

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
