//! `SimReport`: what a simulated iteration tells the user and the search — iteration time,
//! busy/idle shares per GPU and link, peak memory and OOM, and TAG Table 1's runtime feedback per
//! op group (makespan, idle time before output transfer) and per device group (peak memory, idle
//! share).

use serde::Serialize;

use crate::cluster::Cluster;
use crate::compile::{Compiled, TaskRole};
use crate::sim::{SimResult, TaskKind};
use crate::strategy::Strategy;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceReport {
    pub index: usize,
    pub name: String,
    /// Share of the iteration the compute stream was busy.
    pub busy_share: f64,
    /// What the GPU needs at the peak: the tensors plus the framework runtime's context and
    /// allocator reserve (`nvidia-smi`'s figure; the tensors alone under `tf1`).
    pub peak_memory_bytes: f64,
    /// The tensors alone at the peak (`torch.cuda.max_memory_allocated`).
    pub peak_allocated_bytes: f64,
    pub memory_bytes: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkReport {
    pub index: usize,
    pub name: String,
    pub busy_share: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OomReport {
    pub device: usize,
    pub name: String,
    pub peak_bytes: f64,
    pub capacity_bytes: f64,
    pub excess_bytes: f64,
}

/// TAG Table 1, op-group runtime feedback.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct OpGroupFeedback {
    /// From the first start to the last end of the group's compute tasks, µs.
    pub makespan_us: f64,
    /// Mean wait between a group op's end and the start of the transfer of its output, µs.
    pub idle_before_transfer_us: f64,
}

/// TAG Table 1, device-group runtime feedback.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct DeviceGroupFeedback {
    /// Highest peak memory among the group's GPUs, as a share of one GPU's memory.
    pub peak_memory_share: f64,
    /// Mean idle share of the group's GPUs.
    pub idle_share: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimReport {
    pub iteration_us: f64,
    /// The longest busy time of any GPU: the iteration can't be shorter.
    pub max_device_busy_us: f64,
    /// Total time of gradient aggregation work (AllReduce, PS pushes, AddN, pulls) on any
    /// resource; a measure of how much synchronisation the strategy costs.
    pub sync_busy_us: f64,
    pub devices: Vec<DeviceReport>,
    pub links: Vec<LinkReport>,
    pub oom: Vec<OomReport>,
    pub op_groups: Vec<OpGroupFeedback>,
    pub device_groups: Vec<DeviceGroupFeedback>,
    pub tasks: usize,
}

impl SimReport {
    pub(crate) fn new(
        cluster: &Cluster,
        strategy: &Strategy,
        compiled: &Compiled,
        result: &SimResult,
    ) -> SimReport {
        let exec = &compiled.exec;
        let span = result.makespan.max(f64::MIN_POSITIVE);
        let devices: Vec<DeviceReport> = cluster
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| DeviceReport {
                index: i,
                name: d.name.clone(),
                busy_share: result.busy[i] / span,
                peak_memory_bytes: result.peak_memory[i],
                peak_allocated_bytes: result.peak_allocated[i],
                memory_bytes: exec.capacity()[i],
            })
            .collect();
        let links = (0..exec.links())
            .map(|l| LinkReport {
                index: l,
                name: cluster.link_name(l),
                busy_share: result.busy[exec.devices() + l] / span,
            })
            .collect();
        let oom = result
            .oom
            .iter()
            .map(|o| OomReport {
                device: o.device,
                name: cluster.devices[o.device].name.clone(),
                peak_bytes: o.peak_bytes,
                capacity_bytes: o.capacity_bytes,
                excess_bytes: o.excess_bytes(),
            })
            .collect();
        let sync_busy_us = crate::units::total(
            (0..exec.len() as u32)
                .filter(|&t| {
                    matches!(
                        compiled.roles[t as usize],
                        TaskRole::AllReduce | TaskRole::AddN | TaskRole::Pull
                    ) || is_push(compiled, t)
                })
                .map(|t| exec.duration(t)),
        );
        SimReport {
            iteration_us: result.makespan,
            max_device_busy_us: result.busy[..exec.devices()]
                .iter()
                .copied()
                .fold(0.0, f64::max),
            sync_busy_us,
            op_groups: op_group_feedback(strategy, compiled, result),
            device_groups: device_group_feedback(cluster, &devices),
            devices,
            links,
            oom,
            tasks: exec.len(),
        }
    }

    pub fn is_oom(&self) -> bool {
        !self.oom.is_empty()
    }
}

/// A transfer feeding a parameter server's AddN.
fn is_push(compiled: &Compiled, t: u32) -> bool {
    compiled.roles[t as usize] == TaskRole::Transfer
        && compiled
            .exec
            .successors(t)
            .iter()
            .any(|&s| compiled.roles[s as usize] == TaskRole::AddN)
}

fn op_group_feedback(
    strategy: &Strategy,
    compiled: &Compiled,
    result: &SimResult,
) -> Vec<OpGroupFeedback> {
    op_group_feedback_by(
        strategy.group_count(),
        |op| strategy.group_of(op),
        compiled,
        result,
    )
}

/// TAG Table 1's op-group feedback for any partition of the ops (`group_of` maps an op index to
/// one of `groups` groups): the GNN needs it per METIS op group, while a searched strategy merges
/// op groups with the same decision into one strategy group.
pub(crate) fn op_group_feedback_by(
    groups: usize,
    group_of: impl Fn(usize) -> usize,
    compiled: &Compiled,
    result: &SimResult,
) -> Vec<OpGroupFeedback> {
    let exec = &compiled.exec;
    let mut first = vec![f64::INFINITY; groups];
    let mut last = vec![0.0f64; groups];
    let mut wait = vec![0.0f64; groups];
    let mut waits = vec![0usize; groups];
    for t in 0..exec.len() as u32 {
        let group = group_of(compiled.op_of_label(exec.label(t)));
        let (start, end) = (result.start[t as usize], result.end[t as usize]);
        match compiled.roles[t as usize] {
            TaskRole::Op => {
                first[group] = first[group].min(start);
                last[group] = last[group].max(end);
            }
            TaskRole::Transfer if exec.kind(t) == TaskKind::Transfer => {
                let ready = exec
                    .predecessors(t)
                    .iter()
                    .map(|&p| result.end[p as usize])
                    .fold(0.0, f64::max);
                wait[group] += start - ready;
                waits[group] += 1;
            }
            _ => {}
        }
    }
    (0..groups)
        .map(|g| OpGroupFeedback {
            makespan_us: if first[g].is_finite() {
                last[g] - first[g]
            } else {
                0.0
            },
            idle_before_transfer_us: if waits[g] > 0 {
                wait[g] / waits[g] as f64
            } else {
                0.0
            },
        })
        .collect()
}

fn device_group_feedback(cluster: &Cluster, devices: &[DeviceReport]) -> Vec<DeviceGroupFeedback> {
    cluster
        .groups
        .iter()
        .map(|g| {
            let members: Vec<&DeviceReport> = g.devices.iter().map(|&d| &devices[d]).collect();
            let n = members.len().max(1) as f64;
            DeviceGroupFeedback {
                peak_memory_share: members
                    .iter()
                    .map(|d| d.peak_memory_bytes / d.memory_bytes)
                    .fold(0.0, f64::max),
                idle_share: members.iter().map(|d| 1.0 - d.busy_share).sum::<f64>() / n,
            }
        })
        .collect()
}
