//! The JSON form of a strategy: per group its op ids, devices and option, so a person can read
//! and edit it; reading checks every field and names the one at fault.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::pipeline::MAX_OP_COPIES;
use super::{
    AllReducePacking, BatchSplit, GroupDecision, Pipeline, ReplicationOption, Schedule, Strategy,
};
use crate::error::{Error, InputError, Result};
use crate::graph::{Graph, Phase};
use crate::io::write_atomic;

/// The JSON layout of a strategy file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyFile {
    /// Always `"topoplace-strategy"`; loading refuses any other value.
    #[serde(default = "default_format")]
    pub format: String,
    /// The model the strategy was made for: `simulate` and `sfb` refuse the file for another one.
    #[serde(default)]
    pub model: String,
    /// The cluster the strategy was made for, checked as `model` is.
    #[serde(default)]
    pub cluster: String,
    /// How replicas of batch-split groups share the batch, unless a group says otherwise.
    #[serde(default)]
    pub batch_split: BatchSplit,
    /// How the gradients of all-reduce groups are packed into AllReduces.
    #[serde(default)]
    pub allreduce: AllReducePacking,
    /// Written by older versions: apply sufficient factor broadcasting where TAG's ILP says it
    /// pays, deciding the ops when the file is loaded ([`LoadedStrategy::sfb_requested`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sfb: bool,
    /// Ids of the ops the SFB ILP duplicated (see [`Strategy::sfb_duplicated`]).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "non_empty"
    )]
    pub sfb_duplicated: Vec<u64>,
    /// Execution priorities (lower first), one per op in the graph file's op order: a list
    /// scheduler's planned start times (FastT's order enforcement). Empty: run in arrival order.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "non_empty"
    )]
    pub priority: Vec<f64>,
    /// Every op group with its ops, devices and option; a group's index is its id.
    pub groups: Vec<GroupRecord>,
    /// The groups as pipeline stages (absent: no pipeline; files before pipelines have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineRecord>,
}

/// A list that is given only when it holds something: the writer leaves an empty one out, so `[]`
/// in a file was written by hand, and would read as "no priorities" (or "nothing duplicated")
/// where the key says otherwise.
fn non_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let list = Vec::<T>::deserialize(deserializer)?;
    if list.is_empty() {
        return Err(serde::de::Error::custom(
            "an empty list: leave the key out instead",
        ));
    }
    Ok(list)
}

/// A pipeline: stages as lists of group indices (into `groups`), in chain order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineRecord {
    pub stages: Vec<Vec<usize>>,
    pub micro_batches: u32,
    pub schedule: Schedule,
}

pub(crate) const STRATEGY_FORMAT: &str = "topoplace-strategy";

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
    /// This group's batch shares where they differ from the file's `batch_split`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_split: Option<BatchSplit>,
}

impl StrategyFile {
    /// The file of `s`, with its execution priorities if it has any (one per op).
    pub fn from_strategy(
        s: &Strategy,
        priority: Option<&[f64]>,
        g: &Graph,
        cluster: &str,
    ) -> StrategyFile {
        let members = s.members();
        // A group left without ops (a placer moved its last op elsewhere) is left out, since a
        // file's group must hold one; the others are renumbered, pipeline stages with them.
        let stages = s.pipeline.as_ref().map(|p| p.stage_groups());
        let mut renumbered = vec![None; members.len()];
        for (new, k) in (0..members.len())
            .filter(|&k| !members[k].is_empty())
            .enumerate()
        {
            renumbered[k] = Some(new);
        }
        let stages = stages.map(|stages| {
            stages
                .into_iter()
                .map(|stage| stage.iter().filter_map(|&k| renumbered[k]).collect())
                .collect::<Vec<Vec<usize>>>()
        });
        let groups = members
            .into_iter()
            .zip(s.decisions())
            .enumerate()
            .filter(|(_, (ops, _))| !ops.is_empty())
            .map(|(k, (ops, d))| GroupRecord {
                ops: ops.iter().map(|&i| g.op(i).id).collect(),
                devices: d.devices.clone(),
                option: d.option,
                batch_split: Some(s.split_of(k)).filter(|&x| x != s.batch_split),
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
            pipeline: s
                .pipeline
                .as_ref()
                .zip(stages)
                .map(|(p, stages)| PipelineRecord {
                    stages,
                    micro_batches: p.micro_batches,
                    schedule: p.schedule,
                }),
        }
    }

    /// Resolve op ids against `g` and check the strategy covers every op exactly once.
    pub(crate) fn into_strategy(
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
            if group.ops.is_empty() {
                return Err(InputError::new(
                    source,
                    format!("groups[{k}].ops"),
                    "is empty: every group holds at least one op (leave the group out)",
                ));
            }
            for (j, id) in group.ops.iter().enumerate() {
                let field = format!("groups[{k}].ops[{j}]");
                let &op = index.get(id).ok_or_else(|| {
                    InputError::new(
                        source,
                        &field,
                        format!(
                            "no op has id {id} (a strategy holds for the graph it was made on: \
                             was it made under another --framework, --seq or --optimizer?)"
                        ),
                    )
                })?;
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
        let own_splits: Vec<(usize, BatchSplit)> = self
            .groups
            .iter()
            .enumerate()
            .filter_map(|(k, r)| Some((k, r.batch_split?)))
            .collect();
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
        if self.allreduce == AllReducePacking::Buckets(0) {
            return Err(InputError::new(
                source,
                "allreduce",
                "buckets of 0 bytes hold no gradient; give a positive size",
            ));
        }
        strategy.allreduce = self.allreduce;
        for (k, split) in own_splits {
            strategy.set_split(k, split);
        }
        strategy.sfb_duplicated = sfb_ops(&self.sfb_duplicated, &index, &strategy, g, source)?;
        let stages = self.pipeline.as_ref().map(|p| p.stages.clone());
        strategy.pipeline = self
            .pipeline
            .map(|p| {
                let groups = strategy.group_count();
                Pipeline::new(
                    source,
                    &p.stages,
                    p.micro_batches,
                    p.schedule,
                    groups,
                    g.batch_size,
                )
            })
            .transpose()?;
        if let (Some(p), Some(stages)) = (&strategy.pipeline, &stages) {
            check_copies(p.micro_batches, g.len(), source)?;
            check_chain_order(p, stages, &strategy, g, source)?;
        }
        Ok(strategy)
    }
}

/// The ops of `sfb_duplicated`, sorted. Each must be one SFB can duplicate
/// ([`sfb_candidates`]), and listed once: the compiler would apply any op as it is, replicating
/// an optimizer update or an input without a word.
fn sfb_ops(
    ids: &[u64],
    index: &HashMap<u64, usize>,
    strategy: &Strategy,
    g: &Graph,
    source: &str,
) -> Result<Vec<usize>, InputError> {
    let candidates = sfb_candidates(g, strategy);
    let mut listed: HashMap<usize, usize> = HashMap::with_capacity(ids.len());
    for (j, id) in ids.iter().enumerate() {
        let field = format!("sfb_duplicated[{j}]");
        let &op = index
            .get(id)
            .ok_or_else(|| InputError::new(source, &field, format!("no op has id {id}")))?;
        if let Some(first) = listed.insert(op, j) {
            return Err(InputError::new(
                source,
                field,
                format!("op {id} is listed twice (also sfb_duplicated[{first}])"),
            ));
        }
        if candidates[op] {
            continue;
        }
        let o = g.op(op);
        let group = strategy.group_of(op);
        let why = if matches!(o.phase, Phase::Input | Phase::Optimizer) {
            format!("is an {} op", o.phase.name())
        } else if !strategy.decision(group).synchronises_gradients() {
            format!(
                "is in group {group}, which is not replicated (all-reduce or ps on two or more \
                 GPUs): it has no gradient synchronisation to replace"
            )
        } else {
            "neither produces a gradient nor feeds one inside its group".to_string()
        };
        return Err(InputError::new(
            source,
            field,
            format!(
                "op {id} \"{}\" {why}; SFB duplicates a replicated group's gradient producers \
                 and the ops they are computed from in the group",
                o.name
            ),
        ));
    }
    let mut ops: Vec<usize> = listed.into_keys().collect();
    ops.sort_unstable();
    Ok(ops)
}

/// The ops SFB's ILP may duplicate under `strategy` (`crate::sfb`'s candidates at any depth):
/// each gradient producer of a replicated group, and its ancestors inside that group through
/// ops that are neither inputs nor optimizer updates.
fn sfb_candidates(g: &Graph, strategy: &Strategy) -> Vec<bool> {
    let mut can = vec![false; g.len()];
    let mut stack: Vec<usize> = Vec::new();
    for link in g.gradients() {
        if strategy
            .decision(strategy.group_of(link.grad))
            .synchronises_gradients()
            && !can[link.grad]
        {
            can[link.grad] = true;
            stack.push(link.grad);
        }
    }
    while let Some(v) = stack.pop() {
        for u in g.predecessors(v) {
            let inside = strategy.group_of(u) == strategy.group_of(v)
                && !matches!(g.op(u).phase, Phase::Input | Phase::Optimizer);
            if inside && !can[u] {
                can[u] = true;
                stack.push(u);
            }
        }
    }
    can
}

/// Stages are listed in chain order: forward activations flow from a stage to itself or a later
/// one, and a backward op runs no earlier in the chain than the activations it reads (as the
/// pipeline planner cuts them). A stage list that breaks this (reversed, or ops of a layer
/// scattered over the stages) would run a micro-batch's forward pass back and forth along the
/// chain, which no schedule of the kind named pipelines.
/// Refuses `micro_batches` copies of a graph of `ops` ops past [`MAX_OP_COPIES`].
fn check_copies(micro_batches: u32, ops: usize, source: &str) -> Result<(), InputError> {
    let copies = ops as u64 * u64::from(micro_batches);
    if copies > MAX_OP_COPIES {
        return Err(InputError::new(
            source,
            "pipeline.micro_batches",
            format!(
                "{micro_batches} micro-batches of a graph of {ops} ops is {copies} op copies, \
                 more than the {MAX_OP_COPIES} a step is simulated with; use fewer micro-batches"
            ),
        ));
    }
    Ok(())
}

fn check_chain_order(
    p: &Pipeline,
    stages: &[Vec<usize>],
    strategy: &Strategy,
    g: &Graph,
    source: &str,
) -> Result<(), InputError> {
    let stage = |op: usize| p.stage_of(strategy.group_of(op));
    for e in g.edges() {
        let (a, b) = (g.op(e.src), g.op(e.dst));
        let activation = match b.phase {
            Phase::Forward => matches!(a.phase, Phase::Input | Phase::Forward),
            Phase::Backward => a.phase == Phase::Forward && a.scales_with_batch(),
            _ => false,
        };
        let (from, to) = (stage(e.src), stage(e.dst));
        if !activation || from <= to {
            continue;
        }
        let group = strategy.group_of(e.dst);
        let j = stages[to].iter().position(|&k| k == group).unwrap_or(0);
        return Err(InputError::new(
            source,
            format!("pipeline.stages[{to}][{j}]"),
            format!(
                "group {group} runs {} op {} \"{}\", which reads op {} \"{}\" of a later \
                 stage ({from}): stages are listed in chain order, and activations flow to the \
                 same stage or a later one",
                b.phase.name(),
                b.id,
                b.name,
                a.id,
                a.name
            ),
        ));
    }
    Ok(())
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

/// serde's words for a malformed packing (`{"buckets": 100, "x": 1}` read "expected value at
/// line 7 column 16") replaced by the three forms a packing takes.
fn packing_said(mut e: InputError) -> InputError {
    let packing = e.field == "allreduce" || e.field.ends_with(".allreduce");
    if packing && e.message.starts_with("expected value") {
        e.message = "must be \"per-tensor\", \"packed\" or {\"buckets\": BYTES}, nothing else \
                     in that object"
            .to_string();
    }
    e
}

/// Parse the JSON text of a strategy file (`source` names it in errors) against graph `g` on a
/// cluster of `devices` GPUs, checking every field.
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
    let file: StrategyFile = crate::io::parse_json(text, source).map_err(packing_said)?;
    // Both would be one decision made twice: the file's list, or TAG's ILP on loading.
    if file.sfb && !file.sfb_duplicated.is_empty() {
        return Err(InputError::new(
            source,
            "sfb",
            "is true, asking for SFB's ops to be decided when the file is read, but \
             sfb_duplicated already lists them: keep one of the two",
        ));
    }
    let sfb_requested = file.sfb;
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

/// Read and parse the strategy file at `path` ([`parse_strategy`]).
pub fn load_strategy(path: &Path, g: &Graph, devices: usize) -> Result<LoadedStrategy> {
    let source = path.display().to_string();
    let text = crate::io::read_text_file(path)?;
    Ok(parse_strategy(&text, &source, g, devices)?)
}

/// Write `s` as a strategy file at `path`, with op ids from `g`, the cluster's name and any
/// per-op execution priorities.
pub fn save_strategy(
    s: &Strategy,
    priority: Option<&[f64]>,
    g: &Graph,
    cluster: &str,
    path: &Path,
) -> Result<()> {
    write_atomic(path, strategy_text(s, priority, g, cluster)?.as_bytes())
}

/// The text [`save_strategy`] writes.
pub fn strategy_text(
    s: &Strategy,
    priority: Option<&[f64]>,
    g: &Graph,
    cluster: &str,
) -> Result<String> {
    let file = StrategyFile::from_strategy(s, priority, g, cluster);
    serde_json::to_string_pretty(&file).map_err(|e| Error::serialise("strategy", e))
}
