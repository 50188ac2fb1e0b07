//! Layouts: where each op runs and on which batch share, from its group's decision (and the SFB
//! duplicates the strategy carries).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::graph::{Graph, Phase, Splittability};
use crate::strategy::{ReplicationOption, Strategy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum LayoutKind {
    Split,
    Partial,
    Full,
}

/// Where an op runs: `devices[i]` with batch share `shares[i]` (1 for `Full`). The ops of one
/// group share one layout ([`layouts`]), and the compiled graph keeps its device and share lists.
#[derive(Debug)]
pub(super) struct Layout {
    pub(super) kind: LayoutKind,
    pub(super) devices: Arc<[u32]>,
    pub(super) shares: Arc<[f64]>,
    /// Every device of the layout. Equal to `devices` except in a symmetric compilation
    /// ([`super::device_classes`]), where `devices` keeps one representative per device class and
    /// this is the whole ring a collective runs over.
    pub(super) all_devices: Arc<[u32]>,
    /// Prefix sums of `shares` (`starts[i]` = start of replica i's interval), so intervals and
    /// overlaps cost O(1) and O(log n) instead of O(n) on clusters of hundreds of GPUs.
    starts: Vec<f64>,
}

impl Layout {
    pub(super) fn new(kind: LayoutKind, devices: Vec<u32>, shares: Vec<f64>) -> Layout {
        let mut starts = Vec::with_capacity(shares.len() + 1);
        let mut sum = 0.0;
        starts.push(sum);
        for s in &shares {
            sum += s;
            starts.push(sum);
        }
        let devices: Arc<[u32]> = devices.into();
        Layout {
            kind,
            all_devices: Arc::clone(&devices),
            devices,
            shares: shares.into(),
            starts,
        }
    }

    /// The layout on the devices `keep` accepts (at least one), remembering all of them.
    pub(super) fn restricted(&self, keep: impl Fn(u32) -> bool) -> Layout {
        let (devices, shares): (Vec<u32>, Vec<f64>) = self
            .devices
            .iter()
            .zip(self.shares.iter())
            .filter(|(d, _)| keep(**d))
            .map(|(&d, &s)| (d, s))
            .unzip();
        Layout {
            all_devices: Arc::clone(&self.all_devices),
            ..Layout::new(self.kind, devices, shares)
        }
    }

    pub(super) fn full(devices: Vec<u32>) -> Layout {
        let shares = vec![1.0; devices.len()];
        Layout::new(LayoutKind::Full, devices, shares)
    }

    /// Replicas whose intervals may overlap `[lo, hi)`: from the last one starting at or before
    /// `lo` to the first starting at or after `hi`.
    pub(super) fn replicas_over(&self, lo: f64, hi: f64) -> std::ops::Range<usize> {
        let n = self.shares.len();
        let first = self.starts[..n]
            .partition_point(|&s| s <= lo)
            .saturating_sub(1);
        let last = self.starts[..n].partition_point(|&s| s < hi);
        first..last.max(first)
    }

    pub(super) fn position(&self, device: u32) -> Option<usize> {
        self.devices.iter().position(|&d| d == device)
    }

    /// Batch interval `[start, end)` of replica `i` as fractions of the batch.
    pub(super) fn interval(&self, i: usize) -> (f64, f64) {
        (self.starts[i], self.starts[i] + self.shares[i])
    }
}

/// The layout of every op, from its group's decision. Ops with the same layout share one: a
/// group's replicated ops, a group's copies, the ops on one device (BERT-large has thousands of
/// ops in a handful of layouts).
pub(super) fn layouts(graph: &Graph, cluster: &Cluster, strategy: &Strategy) -> Vec<Rc<Layout>> {
    let mp_device = &strategy.model_parallel_devices;
    assert!(
        mp_device.len() == graph.len()
            || strategy
                .decisions()
                .iter()
                .all(|d| d.option != ReplicationOption::ModelParallel),
        "a model-parallel group's ops are placed above the compiler (crate::model_parallel)"
    );
    let mut optimizer_turn = vec![0usize; strategy.group_count()];
    let mut of_group: HashMap<(usize, LayoutKind), Rc<Layout>> = HashMap::new();
    let mut on_device: HashMap<u32, Rc<Layout>> = HashMap::new();
    let mut single = |device: u32| {
        Rc::clone(
            on_device
                .entry(device)
                .or_insert_with(|| Rc::new(Layout::full(vec![device]))),
        )
    };
    let mut out = Vec::with_capacity(graph.len());
    for (op_idx, op) in graph.ops().iter().enumerate() {
        let group = strategy.group_of(op_idx);
        let decision = strategy.decision(group);
        let devices = || {
            decision
                .devices
                .iter()
                .map(|&d| d as u32)
                .collect::<Vec<u32>>()
        };
        let mut whole_group = |kind: LayoutKind| {
            Rc::clone(of_group.entry((group, kind)).or_insert_with(|| {
                let devices = devices();
                Rc::new(match kind {
                    LayoutKind::Full => Layout::full(devices),
                    _ => {
                        let shares = strategy.split_of(group).shares(cluster, &decision.devices);
                        Layout::new(kind, devices, shares)
                    }
                })
            }))
        };
        let layout = match decision.option {
            ReplicationOption::ModelParallel => single(mp_device[op_idx]),
            ReplicationOption::Duplicate => whole_group(LayoutKind::Full),
            ReplicationOption::AllReduce | ReplicationOption::Ps => {
                // A sum-split op's replicas hold partial sums even when its own work does not
                // scale with the batch (an add of partial gradients: tied weights, a pipeline's
                // gradient accumulation).
                let batched = match op.split {
                    Splittability::Sum => true,
                    Splittability::Concat => op.scales_with_batch(),
                    Splittability::None => false,
                };
                let replicas = decision.devices.len();
                if op.phase == Phase::Optimizer && decision.option == ReplicationOption::Ps {
                    // The parameter server of this update, round-robin over the group's devices.
                    let turn = optimizer_turn[group];
                    optimizer_turn[group] += 1;
                    single(decision.devices[turn % replicas] as u32)
                } else if batched && replicas > 1 {
                    whole_group(if op.split == Splittability::Sum {
                        LayoutKind::Partial
                    } else {
                        LayoutKind::Split
                    })
                } else {
                    whole_group(LayoutKind::Full)
                }
            }
        };
        out.push(layout);
    }
    // TAG's SFB (§4.2.3): the ops the SFB ILP duplicated for a replicated gradient run whole on
    // every device of their group, so their inputs (the sufficient factors) are broadcast and the
    // gradient needs no aggregation. The decision was made by `crate::sfb`; this only applies it.
    for &op in &strategy.sfb_duplicated {
        let group = strategy.group_of(op);
        let whole = of_group
            .entry((group, LayoutKind::Full))
            .or_insert_with(|| {
                let devices = strategy.decision(group).devices.iter();
                Rc::new(Layout::full(devices.map(|&x| x as u32).collect()))
            });
        out[op] = Rc::clone(whole);
    }
    out
}

pub(super) fn gradient_producers(graph: &Graph) -> Vec<bool> {
    let mut is = vec![false; graph.len()];
    for link in graph.gradients() {
        is[link.grad] = true;
    }
    is
}
