//! A deployment strategy (TAG §4.2): ops are partitioned into op groups, and each group gets a
//! non-empty set of devices and one of four replication options. The JSON form lists, per group,
//! its op ids, devices and option, so a person can read and edit it.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, InputError, Result, write_atomic};
use crate::graph::{Graph, OpIdx};

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
    pub const ALL: [ReplicationOption; 4] = [
        ReplicationOption::AllReduce,
        ReplicationOption::Ps,
        ReplicationOption::Duplicate,
        ReplicationOption::ModelParallel,
    ];

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
    pub option: ReplicationOption,
}

/// A complete strategy: every op in exactly one group, every group decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    /// Op group of each op (index = op index in the graph).
    op_group: Vec<u32>,
    decisions: Vec<GroupDecision>,
    pub batch_split: BatchSplit,
    pub allreduce: AllReducePacking,
    /// Ops that TAG's SFB ILP ([`crate::sfb`]) chose to duplicate for a replicated gradient,
    /// sorted: the compiler runs them whole on every device of their group, broadcasting their
    /// inputs (the sufficient factors) instead of synchronising the gradient. Empty: no SFB.
    pub sfb_duplicated: Vec<OpIdx>,
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
            allreduce: AllReducePacking::default(),
            sfb_duplicated: Vec::new(),
        })
    }

    /// Model parallelism by op: op `i` runs whole on device `op_device[i]`, one group per device
    /// used (numbered in order of first use). `source` names the origin in errors.
    pub fn from_op_devices(
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
            allreduce: AllReducePacking::default(),
            sfb_duplicated: Vec::new(),
        }
    }

    pub fn group_of(&self, op: OpIdx) -> usize {
        self.op_group[op] as usize
    }

    pub fn op_groups(&self) -> &[u32] {
        &self.op_group
    }

    pub fn decision(&self, group: usize) -> &GroupDecision {
        &self.decisions[group]
    }

    pub fn decisions(&self) -> &[GroupDecision] {
        &self.decisions
    }

    pub fn group_count(&self) -> usize {
        self.decisions.len()
    }

    /// Ops of every group, in op order.
    pub fn members(&self) -> Vec<Vec<OpIdx>> {
        let mut members = vec![Vec::new(); self.decisions.len()];
        for (op, &g) in self.op_group.iter().enumerate() {
            members[g as usize].push(op);
        }
        members
    }
}

/// The JSON layout of a strategy file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyFile {
    #[serde(default = "default_format")]
    pub format: String,
    /// The model the strategy was made for (informational).
    #[serde(default)]
    pub model: String,
    /// The cluster the strategy was made for (informational).
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub batch_split: BatchSplit,
    #[serde(default)]
    pub allreduce: AllReducePacking,
    /// Written by older versions: apply sufficient factor broadcasting where TAG's ILP says it
    /// pays, deciding the ops when the file is loaded ([`LoadedStrategy::sfb_requested`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sfb: bool,
    /// Ids of the ops the SFB ILP duplicated (see [`Strategy::sfb_duplicated`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sfb_duplicated: Vec<u64>,
    /// Execution priorities (lower first), one per op in the graph file's op order: a list
    /// scheduler's planned start times (FastT's order enforcement). Empty: run in arrival order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority: Vec<f64>,
    pub groups: Vec<GroupRecord>,
}

pub const STRATEGY_FORMAT: &str = "topoplace-strategy";

fn default_format() -> String {
    STRATEGY_FORMAT.to_string()
}

/// One group: the ids of its ops (as in the graph file), its devices and its option.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupRecord {
    pub ops: Vec<u64>,
    pub devices: Vec<usize>,
    pub option: ReplicationOption,
}

impl StrategyFile {
    /// The file of `s`, with its execution priorities if it has any (one per op).
    pub fn from_strategy(
        s: &Strategy,
        priority: Option<&[f64]>,
        g: &Graph,
        cluster: &str,
    ) -> StrategyFile {
        let groups = s
            .members()
            .into_iter()
            .zip(&s.decisions)
            .map(|(ops, d)| GroupRecord {
                ops: ops.iter().map(|&i| g.op(i).id).collect(),
                devices: d.devices.clone(),
                option: d.option,
            })
            .collect();
        StrategyFile {
            format: default_format(),
            model: g.name.clone(),
            cluster: cluster.to_string(),
            batch_split: s.batch_split,
            allreduce: s.allreduce,
            sfb: false,
            sfb_duplicated: s.sfb_duplicated.iter().map(|&i| g.op(i).id).collect(),
            priority: priority.map(<[f64]>::to_vec).unwrap_or_default(),
            groups,
        }
    }

    /// Resolve op ids against `g` and check the strategy covers every op exactly once.
    pub fn into_strategy(
        self,
        source: &str,
        g: &Graph,
        devices: usize,
    ) -> Result<Strategy, InputError> {
        if self.format != STRATEGY_FORMAT {
            return Err(InputError::new(
                source,
                "format",
                format!("expected \"{STRATEGY_FORMAT}\", found \"{}\"", self.format),
            ));
        }
        let index: HashMap<u64, usize> = g
            .ops()
            .iter()
            .enumerate()
            .map(|(i, op)| (op.id, i))
            .collect();
        let mut op_group = vec![u32::MAX; g.len()];
        for (k, group) in self.groups.iter().enumerate() {
            for (j, id) in group.ops.iter().enumerate() {
                let field = format!("groups[{k}].ops[{j}]");
                let &op = index
                    .get(id)
                    .ok_or_else(|| InputError::new(source, &field, format!("no op has id {id}")))?;
                if op_group[op] != u32::MAX {
                    return Err(InputError::new(
                        source,
                        field,
                        format!("op {id} is already in group {}", op_group[op]),
                    ));
                }
                op_group[op] = k as u32;
            }
        }
        if let Some(missing) = op_group.iter().position(|&x| x == u32::MAX) {
            return Err(InputError::new(
                source,
                "groups",
                format!(
                    "op {} \"{}\" is in no group",
                    g.op(missing).id,
                    g.op(missing).name
                ),
            ));
        }
        let decisions = self
            .groups
            .into_iter()
            .map(|r| GroupDecision {
                devices: r.devices,
                option: r.option,
            })
            .collect();
        let mut strategy = Strategy::new(
            source,
            op_group,
            decisions,
            self.batch_split,
            g.len(),
            devices,
        )?;
        strategy.allreduce = self.allreduce;
        strategy.sfb_duplicated = self
            .sfb_duplicated
            .iter()
            .enumerate()
            .map(|(j, id)| {
                index.get(id).copied().ok_or_else(|| {
                    InputError::new(
                        source,
                        format!("sfb_duplicated[{j}]"),
                        format!("no op has id {id}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        strategy.sfb_duplicated.sort_unstable();
        strategy.sfb_duplicated.dedup();
        Ok(strategy)
    }
}

/// A strategy read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedStrategy {
    pub strategy: Strategy,
    /// The file asks for SFB the way older versions wrote it (`"sfb": true`) without naming the
    /// duplicated ops: the caller decides them with [`crate::sfb::duplicated_ops`].
    pub sfb_requested: bool,
    /// The model and cluster the file says it is for.
    pub model: String,
    pub cluster: String,
    /// Execution priorities, one per op, if the file gives them.
    pub priority: Option<Vec<f64>>,
}

pub fn parse_strategy(
    text: &str,
    source: &str,
    g: &Graph,
    devices: usize,
) -> Result<LoadedStrategy, InputError> {
    if !text.trim_start().starts_with('{') {
        return Err(InputError::new(
            source,
            "",
            "a strategy file holds one JSON object (\"format\": \"topoplace-strategy\", ...)",
        ));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let file: StrategyFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        InputError::new(
            source,
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })?;
    let sfb_requested = file.sfb && file.sfb_duplicated.is_empty();
    let (model, cluster) = (file.model.clone(), file.cluster.clone());
    let priority = checked_priority(&file.priority, source, g)?;
    Ok(LoadedStrategy {
        strategy: file.into_strategy(source, g, devices)?,
        sfb_requested,
        model,
        cluster,
        priority,
    })
}

/// A file's priorities: none, or one finite number per op of `g`.
fn checked_priority(
    priority: &[f64],
    source: &str,
    g: &Graph,
) -> Result<Option<Vec<f64>>, InputError> {
    if priority.is_empty() {
        return Ok(None);
    }
    if priority.len() != g.len() {
        return Err(InputError::new(
            source,
            "priority",
            format!(
                "has {} entries, the graph has {} ops",
                priority.len(),
                g.len()
            ),
        ));
    }
    if let Some(i) = priority.iter().position(|x| !x.is_finite()) {
        return Err(InputError::new(
            source,
            format!("priority[{i}]"),
            "must be a finite number",
        ));
    }
    Ok(Some(priority.to_vec()))
}

pub fn load_strategy(path: &Path, g: &Graph, devices: usize) -> Result<LoadedStrategy> {
    let source = path.display().to_string();
    let text = crate::error::read_text_file(path)?;
    Ok(parse_strategy(&text, &source, g, devices)?)
}

pub fn save_strategy(
    s: &Strategy,
    priority: Option<&[f64]>,
    g: &Graph,
    cluster: &str,
    path: &Path,
) -> Result<()> {
    let file = StrategyFile::from_strategy(s, priority, g, cluster);
    let text = serde_json::to_string_pretty(&file).map_err(|e| Error::serialise("strategy", e))?;
    write_atomic(path, text.as_bytes())
}

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
    pub fn parse(name: &str) -> Option<Reference> {
        match name {
            "single" => Some(Reference::Single),
            "dp" | "dp-nccl" => Some(Reference::Dp),
            "dp-p" | "dp-nccl-p" => Some(Reference::DpP),
            _ => None,
        }
    }

    pub fn strategy(self, g: &Graph, cluster: &crate::cluster::Cluster) -> Strategy {
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
pub fn fastest_device(cluster: &crate::cluster::Cluster) -> usize {
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
