//! Random device topologies with TAG's distribution (§5.2), used to train the GNN on many
//! clusters:
//! - machines: uniform in [1, 6];
//! - GPUs per machine: uniform in [1, 8], all of one type per machine;
//! - GPU type: uniform over 3 types. TAG does not name them; we use its testbed's three families
//!   as catalog entries: V100-SXM2-16GB, GTX-1080Ti and P100-16GB;
//! - intra-machine bandwidth: uniform in [64, 160] Gbps ("absence or presence of NVLink");
//! - inter-machine (NIC) bandwidth: uniform in [20, 50] Gbps, drawn per machine.
//!
//! Bandwidths are rounded to 0.01 Gbps so the generated TOML stays readable; latencies take the
//! config defaults. The same seed always gives the same cluster (StdRng seeded from the u64).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::Cluster;
use super::config::{ClusterFile, MachineEntry, Quantity, build};

/// The three GPU types TAG's random topologies draw from (its testbed's families).
pub const RANDOM_GPU_TYPES: [&str; 3] = ["V100-SXM2-16GB", "GTX-1080Ti", "P100-16GB"];
/// Machines per random cluster, inclusive.
pub const MACHINES: (u32, u32) = (1, 6);
/// GPUs per machine, inclusive.
pub const GPUS_PER_MACHINE: (u32, u32) = (1, 8);
/// Intra-machine bandwidth in Gbps, inclusive.
pub const INTRA_GBPS: (f64, f64) = (64.0, 160.0);
/// Inter-machine bandwidth in Gbps, inclusive.
pub const INTER_GBPS: (f64, f64) = (20.0, 50.0);

/// A random cluster named `random-<seed>`.
pub fn random_cluster(seed: u64) -> Cluster {
    let name = format!("random-{seed}");
    build(&random_file(seed), &name).expect("generated clusters are valid by construction")
}

/// The TOML text of [`random_cluster`]`(seed)`.
pub fn random_cluster_toml(seed: u64) -> String {
    random_cluster(seed).to_toml()
}

fn random_file(seed: u64) -> ClusterFile {
    let mut rng = StdRng::seed_from_u64(seed);
    let machines = rng.random_range(MACHINES.0..=MACHINES.1);
    let machines = (0..machines)
        .map(|m| MachineEntry {
            name: format!("m{m}"),
            server: None,
            gpu: RANDOM_GPU_TYPES[rng.random_range(0..RANDOM_GPU_TYPES.len())].to_string(),
            gpus: i64::from(rng.random_range(GPUS_PER_MACHINE.0..=GPUS_PER_MACHINE.1)),
            intra_bandwidth: gbps(&mut rng, INTRA_GBPS),
            intra_latency: None,
            nic: gbps(&mut rng, INTER_GBPS),
            count: None,
            memory: None,
        })
        .collect();
    ClusterFile {
        name: format!("random-{seed}"),
        description: format!("random topology, TAG §5.2 distribution, seed {seed}"),
        inter_latency: None,
        machines,
        bandwidth_matrix: None,
    }
}

/// A bandwidth drawn uniformly in `range` Gbps, rounded to 0.01 Gbps (rounding keeps it inside
/// the range because both ends are whole numbers).
fn gbps(rng: &mut StdRng, range: (f64, f64)) -> Quantity {
    let x: f64 = rng.random_range(range.0..=range.1);
    Quantity::Text(format!("{} Gbps", (x * 100.0).round() / 100.0))
}
