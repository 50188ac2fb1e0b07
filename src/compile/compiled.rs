//! What the compiler produces: the execution graph and what each of its tasks stands for.

use std::sync::Arc;

use super::device_classes::DeviceClasses;
use super::task_role::TaskRole;
use crate::graph::{Graph, OpIdx};
use crate::sim::{ExecGraph, SimResult, TaskId};

/// The compiled graph and what each task stands for.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub exec: ExecGraph,
    /// Role of every task.
    pub roles: Vec<TaskRole>,
    /// First compute task of each original op; its replicas follow contiguously, one per device
    /// of `op_devices[op]`.
    pub op_first_task: Vec<TaskId>,
    /// Devices running each original op, in replica order.
    pub op_devices: Vec<Arc<[u32]>>,
    /// Batch share of each replica (1 for whole-batch copies).
    pub op_shares: Vec<Arc<[f64]>>,
    /// Set when only one device per class was compiled ([`super::device_classes`]): `op_devices`
    /// holds the representatives, and a simulation's result needs [`DeviceClasses::expand`].
    pub classes: Option<DeviceClasses>,
    /// Set when alike links were merged ([`crate::sim::ExecGraph::merge_alike_links`]): the
    /// link standing for each link in the simulation.
    pub link_stand_in: Option<Vec<u32>>,
    /// Set for a pipeline ([`super::pipeline`]): the per-op fields above and the task labels
    /// are the expanded graph's ops.
    pub pipeline: Option<PipelineOps>,
}

/// A pipeline's expanded graph (one copy of each batch-dependent op per micro-batch) and the
/// original op of each of its ops.
#[derive(Debug, Clone)]
pub struct PipelineOps {
    pub graph: Arc<Graph>,
    pub origin: Arc<[OpIdx]>,
}

impl Compiled {
    /// A simulation of this graph made one of every replica and link: each device and link gets
    /// the busy time, memory and verdict of the one that stood for it.
    pub(crate) fn expand(&self, result: &mut SimResult) {
        if let Some(classes) = &self.classes {
            classes.expand(result);
        }
        if let Some(stand_in) = &self.link_stand_in {
            let devices = self.exec.devices();
            for (l, &s) in stand_in.iter().enumerate() {
                result.busy[devices + l] = result.busy[devices + s as usize];
            }
        }
    }

    /// Each device's busy µs in a simulation of this graph (its representative's where one
    /// stood for its class): [`Self::expand`]'s busy times alone, without copying the result.
    pub(crate) fn device_busy(&self, result: &SimResult) -> Vec<f64> {
        let mut busy = result.busy[..self.exec.devices()].to_vec();
        if let Some(classes) = &self.classes {
            classes.copy_from_representatives(&mut busy);
        }
        busy
    }

    /// The original graph's op a task label stands for.
    pub fn op_of_label(&self, label: u32) -> OpIdx {
        match &self.pipeline {
            Some(p) => p.origin[label as usize],
            None => label as OpIdx,
        }
    }

    /// The compute tasks (replicas) of an original op.
    pub fn tasks_of_op(&self, op: OpIdx) -> std::ops::Range<TaskId> {
        let first = self.op_first_task[op];
        first..first + self.op_devices[op].len() as TaskId
    }
}
