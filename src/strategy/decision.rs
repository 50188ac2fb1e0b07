//! What a strategy decides: each op group's devices and replication option (TAG §4.2), the
//! batch shares of its replicas and how AllReduce gradients are packed.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::error::InputError;
use crate::graph::OpIdx;

use super::pipeline::Pipeline;

/// How an op group uses the devices it is given (TAG §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicationOption {
    /// Replicas on every device, batch split, gradients synchronised by ring AllReduce.
    AllReduce,
    /// Replicas on every device, batch split, gradients pushed to a parameter server (chosen
    /// round-robin among the devices), summed and applied there, parameters pulled back.
    Ps,
    /// A full copy on every device with the whole batch and broadcast inputs; no gradient sync.
    Duplicate,
    /// The group's ops divided among the devices, each op on one device with the whole batch.
    ModelParallel,
}

impl ReplicationOption {
    /// Every option, in the order the search's actions and the GNN's one-hot use.
    pub const ALL: [ReplicationOption; 4] = [
        ReplicationOption::AllReduce,
        ReplicationOption::Ps,
        ReplicationOption::Duplicate,
        ReplicationOption::ModelParallel,
    ];

    /// The option's kebab-case name, as strategy files spell it (`all-reduce`, `ps`, …).
    pub fn name(self) -> &'static str {
        match self {
            ReplicationOption::AllReduce => "all-reduce",
            ReplicationOption::Ps => "ps",
            ReplicationOption::Duplicate => "duplicate",
            ReplicationOption::ModelParallel => "model-parallel",
        }
    }

    /// Whether replicas split the batch between them.
    pub fn splits_batch(self) -> bool {
        matches!(self, ReplicationOption::AllReduce | ReplicationOption::Ps)
    }
}

/// How replicas of a batch-split group share the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchSplit {
    /// Equal shares (TAG).
    #[default]
    Even,
    /// Shares proportional to each device's speed (DP-NCCL-P; beyond TAG for other options).
    Proportional,
}

impl BatchSplit {
    /// Each of `devices`' share of the batch (summing to one), in their order.
    pub(crate) fn shares(self, cluster: &Cluster, devices: &[usize]) -> Vec<f64> {
        match self {
            BatchSplit::Even => vec![1.0 / devices.len() as f64; devices.len()],
            BatchSplit::Proportional => {
                let speed: Vec<f64> = devices
                    .iter()
                    .map(|&d| cluster.devices[d].gpu.fp32_tflops)
                    .collect();
                let total: f64 = speed.iter().sum();
                speed.iter().map(|s| s / total).collect()
            }
        }
    }

    pub(crate) fn other(self) -> BatchSplit {
        match self {
            BatchSplit::Even => BatchSplit::Proportional,
            BatchSplit::Proportional => BatchSplit::Even,
        }
    }
}

/// How gradients of AllReduce groups are synchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AllReducePacking {
    /// One AllReduce per gradient as soon as its replicas are done, overlapping the rest of the
    /// backward pass (TAG's per-group strategies).
    #[default]
    PerTensor,
    /// All of a group's gradients packed into one AllReduce once every replica has produced all
    /// of them: TensorFlow's NCCL all-reduce with one pack, which TAG's DP-NCCL baseline is —
    /// "parameter synchronization happens after the slowest devices are ready" (§5.3), with no
    /// overlap with the backward pass (the optimisation it credits Horovod with).
    Packed,
    /// Gradients fused into buckets of consecutive gradients (in the order the backward pass
    /// produces them) of at most this many bytes, one AllReduce per bucket once its gradients
    /// are ready: Horovod's tensor fusion (64 MiB buffer, [`HOROVOD_FUSION_BYTES`]) with fixed
    /// buckets, as PyTorch DDP forms them, rather than Horovod's time-cycle batching.
    Buckets(u64),
}

/// Horovod's default tensor-fusion buffer.
pub const HOROVOD_FUSION_BYTES: u64 = 64 * 1024 * 1024;

/// The decision for one op group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDecision {
    /// Devices (cluster device indices), sorted, no duplicates, at least one.
    pub devices: Vec<usize>,
    /// How the group uses those devices.
    pub option: ReplicationOption,
}

impl GroupDecision {
    /// Whether the group's replicas synchronise gradients (all-reduce or ps on two or more
    /// GPUs): what TAG's SFB may replace.
    pub fn synchronises_gradients(&self) -> bool {
        self.option.splits_batch() && self.devices.len() >= 2
    }
}

/// A complete strategy: every op in exactly one group, every group decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    /// Op group of each op (index = op index in the graph).
    op_group: Vec<u32>,
    decisions: Vec<GroupDecision>,
    /// Batch shares of every batch-split group but those in `group_splits`.
    pub batch_split: BatchSplit,
    /// Groups whose replicas share the batch the other way (sorted, each once): the search
    /// decides shares per group (a compute-heavy group replicated over mixed GPUs wants
    /// proportional shares where its neighbours may not).
    group_splits: Vec<usize>,
    /// How the gradients of the all-reduce groups are packed into AllReduces.
    pub allreduce: AllReducePacking,
    /// Ops that TAG's SFB ILP ([`crate::sfb`]) chose to duplicate for a replicated gradient,
    /// sorted: the compiler runs them whole on every device of their group, broadcasting their
    /// inputs (the sufficient factors) instead of synchronising the gradient. Empty: no SFB.
    pub sfb_duplicated: Vec<OpIdx>,
    /// The device of each op, for the ops of model-parallel groups (entries of other ops
    /// unused): decided above the compiler ([`crate::model_parallel`]); empty until then.
    pub model_parallel_devices: Arc<[u32]>,
    /// Stages, micro-batches and schedule when the groups run as a pipeline ([`Pipeline`]).
    pub pipeline: Option<Pipeline>,
}

impl Strategy {
    /// Check and build. `source` names the origin in errors; `devices` is the cluster's size.
    pub fn new(
        source: &str,
        op_group: Vec<u32>,
        decisions: Vec<GroupDecision>,
        batch_split: BatchSplit,
        ops: usize,
        devices: usize,
    ) -> Result<Strategy, InputError> {
        if op_group.len() != ops {
            return Err(InputError::new(
                source,
                "groups",
                format!("covers {} ops, the graph has {ops}", op_group.len()),
            ));
        }
        if let Some((op, &g)) = op_group
            .iter()
            .enumerate()
            .find(|&(_, &g)| g as usize >= decisions.len())
        {
            return Err(InputError::new(
                source,
                format!("op {op}"),
                format!(
                    "is in group {g}, but only {} groups are decided",
                    decisions.len()
                ),
            ));
        }
        for (g, d) in decisions.iter().enumerate() {
            let field = format!("groups[{g}].devices");
            if d.devices.is_empty() {
                return Err(InputError::new(source, field, "no devices"));
            }
            if let Some(&bad) = d.devices.iter().find(|&&x| x >= devices) {
                return Err(InputError::new(
                    source,
                    field,
                    format!("device {bad} does not exist (the cluster has {devices})"),
                ));
            }
            if d.devices.windows(2).any(|w| w[0] >= w[1]) {
                return Err(InputError::new(
                    source,
                    field,
                    "must be sorted without repeats",
                ));
            }
        }
        Ok(Strategy {
            op_group,
            decisions,
            batch_split,
            group_splits: Vec::new(),
            allreduce: AllReducePacking::default(),
            sfb_duplicated: Vec::new(),
            model_parallel_devices: Arc::from([]),
            pipeline: None,
        })
    }

    /// Model parallelism by op: op `i` runs whole on device `op_device[i]`, one group per device
    /// used (numbered in order of first use). `source` names the origin in errors.
    pub(crate) fn from_op_devices(
        source: &str,
        op_device: &[usize],
        devices: usize,
    ) -> Result<Strategy, InputError> {
        let mut group_of_device = vec![u32::MAX; devices];
        let mut decisions = Vec::new();
        let mut op_group = Vec::with_capacity(op_device.len());
        for (op, &d) in op_device.iter().enumerate() {
            let Some(group) = group_of_device.get_mut(d) else {
                return Err(InputError::new(
                    source,
                    format!("op {op}"),
                    format!("device {d} does not exist (the cluster has {devices})"),
                ));
            };
            if *group == u32::MAX {
                *group = decisions.len() as u32;
                decisions.push(GroupDecision {
                    devices: vec![d],
                    option: ReplicationOption::ModelParallel,
                });
            }
            op_group.push(*group);
        }
        Strategy::new(
            source,
            op_group,
            decisions,
            BatchSplit::Even,
            op_device.len(),
            devices,
        )
    }

    /// Every op in one group with one decision.
    pub fn uniform(ops: usize, decision: GroupDecision, batch_split: BatchSplit) -> Strategy {
        Strategy {
            op_group: vec![0; ops],
            decisions: vec![decision],
            batch_split,
            group_splits: Vec::new(),
            allreduce: AllReducePacking::default(),
            sfb_duplicated: Vec::new(),
            model_parallel_devices: Arc::from([]),
            pipeline: None,
        }
    }

    /// The same decisions over another graph's ops (`op_group` for each, groups unchanged) with
    /// `sfb_duplicated` ops: a pipeline's expansion, which is compiled without a pipeline.
    pub(crate) fn regrouped(&self, op_group: Vec<u32>, sfb_duplicated: Vec<OpIdx>) -> Strategy {
        Strategy {
            op_group,
            sfb_duplicated,
            pipeline: None,
            ..self.clone()
        }
    }

    /// How group `group`'s replicas share the batch.
    pub fn split_of(&self, group: usize) -> BatchSplit {
        if self.group_splits.binary_search(&group).is_ok() {
            self.batch_split.other()
        } else {
            self.batch_split
        }
    }

    /// Give group `group` (which must exist) the shares `split`.
    pub fn set_split(&mut self, group: usize, split: BatchSplit) {
        assert!(group < self.decisions.len(), "group {group} does not exist");
        match (
            self.group_splits.binary_search(&group),
            split == self.batch_split,
        ) {
            (Ok(at), true) => {
                self.group_splits.remove(at);
            }
            (Err(at), false) => self.group_splits.insert(at, group),
            _ => {}
        }
    }

    /// The smallest share of the batch any replica of a batch-split group gets, with its group:
    /// `None` when no group splits the batch over more than one device.
    pub(crate) fn thinnest_share(&self, cluster: &Cluster) -> Option<(usize, f64)> {
        self.decisions
            .iter()
            .enumerate()
            .filter(|(_, d)| d.option.splits_batch() && d.devices.len() > 1)
            .flat_map(|(g, d)| {
                let shares = self.split_of(g).shares(cluster, &d.devices);
                shares.into_iter().map(move |s| (g, s))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The group of op `op`.
    pub fn group_of(&self, op: OpIdx) -> usize {
        self.op_group[op] as usize
    }

    /// The group of every op, indexed by op.
    pub fn op_groups(&self) -> &[u32] {
        &self.op_group
    }

    /// The devices and option of group `group`.
    pub fn decision(&self, group: usize) -> &GroupDecision {
        &self.decisions[group]
    }

    /// The decision of every group, indexed by group.
    pub fn decisions(&self) -> &[GroupDecision] {
        &self.decisions
    }

    /// The fewest tasks compiling every replica makes of this strategy: each op once per GPU it
    /// is replicated on (once under model parallelism), and again for every micro-batch of a
    /// pipeline; the transfers and collectives come on top. What a trace can be refused by
    /// before the compilation that would hold them all.
    pub fn task_floor(&self) -> u64 {
        let per_group: Vec<u64> = self
            .decisions
            .iter()
            .map(|d| match d.option {
                ReplicationOption::ModelParallel => 1,
                _ => d.devices.len() as u64,
            })
            .collect();
        let copies = self
            .pipeline
            .as_ref()
            .map_or(1, |p| u64::from(p.micro_batches));
        let ops: u64 = self.op_group.iter().map(|&g| per_group[g as usize]).sum();
        ops.saturating_mul(copies)
    }

    pub(crate) fn group_count(&self) -> usize {
        self.decisions.len()
    }

    /// Ops of every group, in op order.
    pub(crate) fn members(&self) -> Vec<Vec<OpIdx>> {
        let mut members = vec![Vec::new(); self.decisions.len()];
        for (op, &g) in self.op_group.iter().enumerate() {
            members[g as usize].push(op);
        }
        members
    }
}
