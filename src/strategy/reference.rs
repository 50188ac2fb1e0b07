//! The reference strategies every placement is measured against (TAG §5.2).

use serde::{Deserialize, Serialize};

use super::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption, Strategy};
use crate::cluster::Cluster;
use crate::graph::Graph;

/// The reference strategies every placement is measured against (TAG §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reference {
    /// Everything on the fastest GPU (highest FP32 peak; ties: more memory, lower index).
    Single,
    /// DP-NCCL: every op replicated on every GPU, even batch split, all gradients in one packed
    /// ring AllReduce after the backward pass (see [`AllReducePacking::Packed`]).
    Dp,
    /// DP-NCCL-P: as DP, with batch shares proportional to each GPU's speed.
    DpP,
}

impl Reference {
    /// The reference named `name` (`single`, `dp`/`dp-nccl`, `dp-p`/`dp-nccl-p`), or `None`.
    pub fn parse(name: &str) -> Option<Reference> {
        match name {
            "single" => Some(Reference::Single),
            "dp" | "dp-nccl" => Some(Reference::Dp),
            "dp-p" | "dp-nccl-p" => Some(Reference::DpP),
            _ => None,
        }
    }

    /// The reference as a strategy for graph `g` on `cluster`: one all-reduce group of every op,
    /// gradients in one packed AllReduce.
    pub fn strategy(self, g: &Graph, cluster: &Cluster) -> Strategy {
        let all: Vec<usize> = (0..cluster.devices.len()).collect();
        let (devices, batch_split) = match self {
            Reference::Single => (vec![fastest_device(cluster)], BatchSplit::Even),
            Reference::Dp => (all, BatchSplit::Even),
            Reference::DpP => (all, BatchSplit::Proportional),
        };
        let mut strategy = Strategy::uniform(
            g.len(),
            GroupDecision {
                devices,
                option: ReplicationOption::AllReduce,
            },
            batch_split,
        );
        strategy.allreduce = AllReducePacking::Packed;
        strategy
    }
}

/// The GPU with the highest FP32 peak; ties go to more memory, then the lower index.
pub(crate) fn fastest_device(cluster: &Cluster) -> usize {
    let mut best = 0;
    for (i, d) in cluster.devices.iter().enumerate() {
        let b = &cluster.devices[best].gpu;
        let key = (d.gpu.fp32_tflops, d.gpu.memory_gib);
        if key.0 > b.fp32_tflops || (key.0 == b.fp32_tflops && key.1 > b.memory_gib) {
            best = i;
        }
    }
    best
}
