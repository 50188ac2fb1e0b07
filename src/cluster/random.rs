//! Random device topologies with TAG's distribution (§5.2), used to train the GNN on many
//! clusters:
//! - machines: uniform in [1, 6];
//! - GPUs per machine: uniform in [1, 8], all of one type per machine;
//! - GPU type: uniform over 3 types. TAG does not name them; we use its testbed's three families
//!   as catalog entries: V100-SXM2-16GB, GTX-1080Ti and P100-16GB ([`GpuMix::Wide`] adds the
//!   T4, A100 and H100; [`GpuMix::Today`] draws from today's A100s, H100 and a consumer card
//!   only, the mix of [`TopologyDistribution::TODAY`]);
//! - intra-machine bandwidth: uniform in [64, 160] Gbps ("absence or presence of NVLink");
//! - inter-machine (NIC) bandwidth: uniform in [20, 50] Gbps, drawn per machine.
//!
//! Bandwidths are rounded to 0.01 Gbps so the generated TOML stays readable; latencies take the
//! config defaults. The same seed always gives the same cluster (StdRng seeded from the u64).
//!
//! [`random_cluster_within`] draws the same way with other bandwidth ranges and GPU types
//! ([`TopologyDistribution`]), and optionally with NVLink machines: TAG wires every machine with
//! one intra-machine figure ("absence or presence of NVLink" as a bandwidth), but an NVLink
//! machine also lets a GPU talk to several peers at once, which is what makes AllReduce inside
//! it cheap. With `nvlink`, a machine whose GPU type has NVLink (the catalog's V100-SXM2, A100,
//! H100) is wired with it in half the draws: its fabric is the type's own (a V100's hybrid cube
//! mesh, an A100's or H100's NVSwitch) and its pair bandwidth is drawn from [`NVLINK_PAIR_GBPS`]
//! (mesh: one or two 25 GB/s bricks per pair, as DGX-1 wires them) or is the type's whole NVLink
//! bandwidth (NVSwitch).
//! Why: TAG's ranges leave out its own testbed (NVLink at 400 Gbps, a 100 Gbps switch) and its
//! cloud (10 Gbps between machines); TAG covered them by training on the testbed itself. A
//! training set can instead widen the ranges and keep every named cluster unseen.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::config::{ClusterFile, FASTEST_LINK, MachineEntry, Quantity, build};
use super::{Cluster, Interconnect, find_gpu};

/// The three GPU types TAG's random topologies draw from (its testbed's families).
pub const RANDOM_GPU_TYPES: [&str; 3] = ["V100-SXM2-16GB", "GTX-1080Ti", "P100-16GB"];
/// TAG's three and the newer types users run today: the T4 of inference-and-training clouds,
/// the A100 and the H100 (the catalog's entries).
pub(crate) const WIDE_GPU_TYPES: [&str; 6] = [
    "V100-SXM2-16GB",
    "GTX-1080Ti",
    "P100-16GB",
    "T4",
    "A100-40GB",
    "H100-SXM-80GB",
];

/// The GPU types of today's training clusters in the catalog: the H100 SXM, the A100 in its
/// three forms (SXM 80 GB and 40 GB, PCIe 40 GB) and a consumer Ampere card (RTX 3070, 8 GB).
/// Every one has bfloat16 and TF32, so a cluster of them trains in any precision. The L40S and
/// consumer Ada cards are not in the catalog: their kernel efficiencies have no published
/// measurement in the fidelity suite to be fitted to.
pub(crate) const TODAY_GPU_TYPES: [&str; 5] = [
    "H100-SXM-80GB",
    "A100-80GB",
    "A100-40GB",
    "A100-PCIe-40GB",
    "RTX-3070",
];

/// The GPU types a random topology draws a machine's type from (uniformly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuMix {
    /// TAG's three ([`RANDOM_GPU_TYPES`]).
    #[default]
    Tag,
    /// TAG's three and T4, A100, H100 ([`WIDE_GPU_TYPES`]).
    Wide,
    /// Today's Ampere and Hopper GPUs ([`TODAY_GPU_TYPES`]).
    Today,
}

impl GpuMix {
    /// Catalog names of the GPU types this mix draws from.
    pub fn types(self) -> &'static [&'static str] {
        match self {
            GpuMix::Tag => &RANDOM_GPU_TYPES,
            GpuMix::Wide => &WIDE_GPU_TYPES,
            GpuMix::Today => &TODAY_GPU_TYPES,
        }
    }

    /// The name used in recipes and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            GpuMix::Tag => "tag",
            GpuMix::Wide => "wide",
            GpuMix::Today => "today",
        }
    }
}

impl std::str::FromStr for GpuMix {
    type Err = String;

    /// A mix by its name (`tag`, `wide`, `today`); the error lists them.
    fn from_str(name: &str) -> Result<GpuMix, String> {
        [GpuMix::Tag, GpuMix::Wide, GpuMix::Today]
            .into_iter()
            .find(|m| m.name() == name.trim())
            .ok_or_else(|| format!("\"{name}\": expected one of tag, wide, today"))
    }
}
/// Pair bandwidth of an NVLink-mesh machine (`nvlink`), Gbps: one to two V100 bricks.
pub(crate) const NVLINK_PAIR_GBPS: [u32; 2] = [200, 400];

/// Machines per random cluster, inclusive.
pub(crate) const MACHINES: (u32, u32) = (1, 6);
/// GPUs per machine, inclusive.
pub(crate) const GPUS_PER_MACHINE: (u32, u32) = (1, 8);
/// What a random topology draws from: bandwidth ranges (whole Gbps, inclusive) and GPU types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyDistribution {
    /// Inside a machine (one per machine).
    pub intra_gbps: [u32; 2],
    /// A machine's NIC (one per machine).
    pub inter_gbps: [u32; 2],
    /// The GPU types (absent in files written before it existed: TAG's).
    #[serde(default)]
    pub gpus: GpuMix,
    /// Wire half the machines whose GPU type has NVLink with it (absent in older files: TAG's
    /// one-figure PCIe wiring for every machine).
    #[serde(default)]
    pub nvlink: bool,
}

impl TopologyDistribution {
    /// TAG §5.2's ranges.
    pub const TAG: TopologyDistribution = TopologyDistribution {
        intra_gbps: [64, 160],
        inter_gbps: [20, 50],
        gpus: GpuMix::Tag,
        nvlink: false,
    };

    /// Today's training clusters: [`GpuMix::Today`]'s GPUs, NVLink (NVSwitch at the type's
    /// whole NVLink bandwidth) in half the machines whose GPUs have it, PCIe machines at 128–256
    /// Gbps per GPU (PCIe 3.0 to 4.0 ×16), and 100–400 Gbps NICs (EDR to NDR InfiniBand,
    /// 100–400 GbE).
    pub const TODAY: TopologyDistribution = TopologyDistribution {
        intra_gbps: [128, 256],
        inter_gbps: [100, 400],
        gpus: GpuMix::Today,
        nvlink: true,
    };

    /// The distribution named `name`: `tag` ([`Self::TAG`]) or `today` ([`Self::TODAY`]).
    pub fn named(name: &str) -> Option<TopologyDistribution> {
        match name.trim() {
            "tag" => Some(Self::TAG),
            "today" => Some(Self::TODAY),
            _ => None,
        }
    }

    /// The name of seed `seed`'s topology: `random-<seed>` for TAG's distribution, the ranges
    /// (and `-wide` for the wide GPU mix, `-nvlink` for NVLink machines) appended otherwise (two
    /// distributions never share a name).
    pub(crate) fn cluster_name(&self, seed: u64) -> String {
        let gpus = match self.gpus {
            GpuMix::Tag => "",
            GpuMix::Wide => "-wide",
            GpuMix::Today => "-today",
        };
        let mix = format!("{gpus}{}", if self.nvlink { "-nvlink" } else { "" });
        if (self.intra_gbps, self.inter_gbps) == (Self::TAG.intra_gbps, Self::TAG.inter_gbps) {
            format!("random-{seed}{mix}")
        } else {
            let ([a, b], [c, d]) = (self.intra_gbps, self.inter_gbps);
            format!("random-{seed}-intra{a}-{b}-inter{c}-{d}{mix}")
        }
    }

    /// The field and the reason when these ranges cannot be drawn from (a zero bandwidth, a
    /// reversed range, a bandwidth the cluster loader refuses).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        [
            ("intra_gbps", self.intra_gbps),
            ("inter_gbps", self.inter_gbps),
        ]
        .into_iter()
        .find_map(|(field, range)| gbps_range_problem(range).map(|why| (field, why)))
    }
}

/// The fastest link a random topology may draw, whole Gbps: the cluster loader's 1 PB/s, so that
/// every drawn cluster loads (its slowest, 1 Mbps, is below the smallest whole Gbps).
pub const MAX_LINK_GBPS: u32 = (FASTEST_LINK / crate::units::GBPS) as u32;

/// Why a `[low, high]` range of whole Gbps cannot be drawn from, if it cannot: a zero low end,
/// a reversed range, or a high end above [`MAX_LINK_GBPS`].
pub fn gbps_range_problem([lo, hi]: [u32; 2]) -> Option<String> {
    if lo == 0 || lo > hi {
        Some(format!("[{lo}, {hi}]: needs 0 < low <= high (Gbps)"))
    } else if hi > MAX_LINK_GBPS {
        Some(format!(
            "[{lo}, {hi}]: {hi} Gbps is above 1 PB/s ({MAX_LINK_GBPS} Gbps), faster than any GPU link"
        ))
    } else {
        None
    }
}

/// A random cluster of TAG's distribution, named `random-<seed>`.
pub fn random_cluster(seed: u64) -> Cluster {
    random_cluster_within(seed, TopologyDistribution::TAG)
}

/// A random cluster drawn like [`random_cluster`] with `distribution`'s ranges and GPU types (valid ones: see
/// [`TopologyDistribution::problem`]). With TAG's ranges it is `random_cluster(seed)` exactly.
pub fn random_cluster_within(seed: u64, distribution: TopologyDistribution) -> Cluster {
    let name = distribution.cluster_name(seed);
    build(&random_file(seed, distribution, &name), &name)
        .expect("generated clusters are valid by construction")
}

fn random_file(seed: u64, distribution: TopologyDistribution, name: &str) -> ClusterFile {
    let mut rng = StdRng::seed_from_u64(seed);
    let types = distribution.gpus.types();
    let machines = rng.random_range(MACHINES.0..=MACHINES.1);
    let machines = (0..machines)
        .map(|m| {
            let gpu = types[rng.random_range(0..types.len())];
            let gpus = i64::from(rng.random_range(GPUS_PER_MACHINE.0..=GPUS_PER_MACHINE.1));
            let (interconnect, intra_bandwidth) = wiring(&mut rng, gpu, distribution);
            MachineEntry {
                name: format!("m{m}"),
                server: None,
                gpu: gpu.to_string(),
                gpus,
                intra_bandwidth,
                intra_latency: None,
                nic: gbps(&mut rng, distribution.inter_gbps),
                count: None,
                memory: None,
                interconnect: Some(interconnect),
                port_bandwidth: None,
            }
        })
        .collect();
    ClusterFile {
        name: name.to_string(),
        description: format!(
            "random topology, {} distribution with intra-machine {:?} and inter-machine \
             {:?} Gbps{}{}, seed {seed}",
            match distribution.gpus {
                GpuMix::Today => "today's",
                GpuMix::Tag | GpuMix::Wide => "TAG §5.2",
            },
            distribution.intra_gbps,
            distribution.inter_gbps,
            match distribution.gpus {
                GpuMix::Tag => String::new(),
                GpuMix::Wide | GpuMix::Today => format!(", GPU types {types:?}"),
            },
            if distribution.nvlink {
                ", NVLink in half the machines that have it"
            } else {
                ""
            }
        ),
        inter_latency: None,
        machines,
        bandwidth_matrix: None,
    }
}

/// A machine's fabric and pair bandwidth. TAG's: PCIe, one figure per GPU that each GPU's traffic
/// shares, drawn from the intra range. With `nvlink`, a GPU type that has NVLink gets it on a
/// coin flip (drawn only then, so TAG's draws are unchanged without it).
fn wiring(
    rng: &mut StdRng,
    gpu: &str,
    distribution: TopologyDistribution,
) -> (Interconnect, Quantity) {
    let spec = find_gpu(gpu).filter(|s| s.nvlink_gbs > 0.0);
    match spec {
        Some(spec) if distribution.nvlink && rng.random_bool(0.5) => {
            let fabric = Interconnect::default_for(spec);
            let pair = match fabric {
                Interconnect::Nvswitch => Quantity::Text(format!("{} GB/s", spec.nvlink_gbs)),
                _ => gbps(rng, NVLINK_PAIR_GBPS),
            };
            (fabric, pair)
        }
        _ => (Interconnect::Pcie, gbps(rng, distribution.intra_gbps)),
    }
}

/// A bandwidth drawn uniformly in `range` Gbps, rounded to 0.01 Gbps (rounding keeps it inside
/// the range because both ends are whole numbers).
fn gbps(rng: &mut StdRng, [lo, hi]: [u32; 2]) -> Quantity {
    let x: f64 = rng.random_range(f64::from(lo)..=f64::from(hi));
    Quantity::Text(format!("{} Gbps", (x * 100.0).round() / 100.0))
}
