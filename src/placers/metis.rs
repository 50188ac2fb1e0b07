//! METIS baseline (as in QuickP's comparison): k-way partition with k = number of GPUs, parts
//! balanced by compute time and cut bytes minimised; each part runs whole on one GPU, the
//! heaviest part on the fastest GPU.

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::group::{metis::metis, op_weights, reference_gpu};
use crate::problem::Problem;
use crate::strategy::{BatchSplit, GroupDecision, ReplicationOption, Strategy};

pub(crate) struct Metis;

impl Placer for Metis {
    fn name(&self) -> &'static str {
        "metis"
    }

    fn place(&self, p: &Problem, budget: &Budget) -> Result<Placement> {
        let n = p.cluster.devices.len();
        let weights = op_weights(p.graph, reference_gpu(p.graph), p.cost);
        let grouping = metis(p.graph, &weights, n.min(p.graph.len()).max(1), budget.seed)?;
        let devices = devices_by_speed(p);
        let mut parts: Vec<usize> = (0..grouping.num_groups()).collect();
        parts.sort_by(|&a, &b| {
            let w = |g: usize| grouping.groups[g].compute_us;
            w(b).total_cmp(&w(a)).then(a.cmp(&b))
        });
        let mut decisions = vec![
            GroupDecision {
                devices: vec![0],
                option: ReplicationOption::ModelParallel,
            };
            grouping.num_groups()
        ];
        for (rank, &part) in parts.iter().enumerate() {
            decisions[part].devices = vec![devices[rank % n]];
        }
        let strategy = Strategy::new(
            "metis",
            grouping.op_group.clone(),
            decisions,
            BatchSplit::Even,
            p.graph.len(),
            n,
        )?;
        Ok(Placement::plain(
            strategy,
            "metis: k-way (k = GPUs), heaviest part on the fastest GPU",
        ))
    }
}

/// Device indices, fastest FP32 peak first (ties: more memory, lower index).
pub(crate) fn devices_by_speed(p: &Problem) -> Vec<usize> {
    let mut d: Vec<usize> = (0..p.cluster.devices.len()).collect();
    d.sort_by(|&a, &b| {
        let key = |x: usize| {
            let g = &p.cluster.devices[x].gpu;
            (g.fp32_tflops, g.memory_gib)
        };
        let (ka, kb) = (key(a), key(b));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(a.cmp(&b))
    });
    d
}
