//! What `topoplace simulate` prints: the iteration time against DP-NCCL, where the time goes,
//! and memory per GPU; plus the names used in traces.

use serde::Serialize;

use super::Evaluation;
use super::sim_report::{DeviceGroupFeedback, DeviceReport, OomReport, OpGroupFeedback};
use crate::cluster::Cluster;
use crate::compile::{Compiled, TaskRole};
use crate::graph::Graph;
use crate::render::{Table, bytes, millis};
use crate::sim::ExecGraph;

/// The JSON keys of `simulate --json` are these field names.
#[derive(Debug, Clone, Serialize)]
pub struct SimulationSummary {
    /// The model graph's name.
    pub model: String,
    /// Samples per iteration the model graph was profiled at.
    pub batch_size: u32,
    /// The cluster's name.
    pub cluster: String,
    /// The strategy's name as given on the command line.
    pub strategy: String,
    /// Tasks in the compiled execution graph (compute, transfers, sync work).
    pub tasks: usize,
    /// Simulated iteration time, µs.
    pub iteration_us: f64,
    /// The same model under DP-NCCL on the same cluster.
    pub dp_iteration_us: f64,
    /// `dp_iteration_us / iteration_us`: above 1 is faster than DP-NCCL.
    pub speedup_over_dp: f64,
    /// Busy time of the busiest GPU's compute stream, µs: a lower bound on the iteration.
    pub max_device_busy_us: f64,
    /// Share of the iteration the busiest GPU does not compute: communication, waiting for
    /// inputs, and waiting for its host to issue the next kernel.
    pub exposed_share: f64,
    /// Total time of gradient aggregation work (AllReduce, PS push/AddN/pull) on any resource, µs.
    pub sync_busy_us: f64,
    /// GPUs whose peak memory exceeded their capacity; empty when the strategy fits.
    pub oom: Vec<OomReport>,
    /// Busy share and peak memory of every GPU.
    pub devices: Vec<DeviceReport>,
    /// Runtime feedback per op group (TAG Table 1).
    pub op_groups: Vec<OpGroupFeedback>,
    /// Runtime feedback per device group (TAG Table 1).
    pub device_groups: Vec<DeviceGroupFeedback>,
}

impl SimulationSummary {
    /// Summarise `run` of the strategy named `strategy`, compared with `dp`, the same model
    /// evaluated under DP-NCCL on the same cluster.
    pub fn new(
        graph: &Graph,
        cluster: &Cluster,
        strategy: &str,
        run: &Evaluation,
        dp: &Evaluation,
    ) -> SimulationSummary {
        let r = &run.report;
        SimulationSummary {
            model: graph.name.clone(),
            batch_size: graph.batch_size,
            cluster: cluster.name.clone(),
            strategy: strategy.to_string(),
            tasks: r.tasks,
            iteration_us: r.iteration_us,
            dp_iteration_us: dp.report.iteration_us,
            speedup_over_dp: crate::units::speedup(dp.report.iteration_us, r.iteration_us),
            max_device_busy_us: r.max_device_busy_us,
            exposed_share: 1.0 - 1.0 / crate::units::speedup(r.iteration_us, r.max_device_busy_us),
            sync_busy_us: r.sync_busy_us,
            oom: r.oom.clone(),
            devices: r.devices.clone(),
            op_groups: r.op_groups.clone(),
            device_groups: r.device_groups.clone(),
        }
    }

    /// The human-readable report `topoplace simulate` prints: iteration time, busiest GPU, sync
    /// work, memory verdict and a per-GPU table.
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "{} (batch {}) on {} with strategy {}: {} tasks\n",
            self.model, self.batch_size, self.cluster, self.strategy, self.tasks
        );
        out += &format!(
            "iteration     {}  (DP-NCCL {}, speed-up {:.3}x)\n",
            millis(self.iteration_us),
            millis(self.dp_iteration_us),
            self.speedup_over_dp
        );
        out += &format!(
            "busiest GPU   {} computing; {:.1}% of the iteration it waits on communication, inputs or its host\n",
            millis(self.max_device_busy_us),
            100.0 * self.exposed_share
        );
        out += &format!(
            "sync work     {} (AllReduce, PS push/AddN/pull)\n",
            millis(self.sync_busy_us)
        );
        if self.oom.is_empty() {
            out += "memory        fits on every GPU\n";
        }
        for o in &self.oom {
            out += &format!(
                "OOM           {} needs {} of {} ({} too much)\n",
                o.name,
                bytes(o.peak_bytes),
                bytes(o.capacity_bytes),
                bytes(o.excess_bytes)
            );
        }
        out += "\n";
        // "peak memory" is what nvidia-smi would show (the framework's context and allocator
        // reserve included), "tensors" what `torch.cuda.max_memory_allocated` would.
        let mut t = Table::new(["gpu", "busy", "peak memory", "tensors", "memory"]);
        for d in &self.devices {
            t.row([
                d.name.clone(),
                format!("{:.1}%", 100.0 * d.busy_share),
                bytes(d.peak_memory_bytes),
                bytes(d.peak_allocated_bytes),
                bytes(d.memory_bytes),
            ]);
        }
        out + &t.render()
    }
}

/// A GPU's or a link's name for trace tracks.
pub fn resource_name(cluster: &Cluster, exec: &ExecGraph, resource: u32) -> String {
    let r = resource as usize;
    if r < exec.devices() {
        format!(
            "{} {}",
            cluster.devices[r].name, cluster.devices[r].gpu.name
        )
    } else {
        cluster.link_name(r - exec.devices())
    }
}

/// "conv1/Conv2D", "conv1/Conv2D [transfer]", … for trace events.
/// A pipeline's tasks are named after the micro-batch copy they run ("conv1/Conv2D#mb3").
pub fn task_name(graph: &Graph, compiled: &Compiled, task: u32) -> String {
    let label = compiled.exec.label(task) as usize;
    let op = match &compiled.pipeline {
        Some(p) => &p.graph.op(label).name,
        None => &graph.op(label).name,
    };
    match compiled.roles[task as usize] {
        TaskRole::Op => op.clone(),
        TaskRole::Transfer => format!("{op} [transfer]"),
        TaskRole::Concat => format!("{op} [concat]"),
        TaskRole::AddN => format!("{op} [addn]"),
        TaskRole::AllReduce => format!("{op} [allreduce]"),
        TaskRole::Interference => format!("{op} [allreduce interference]"),
        TaskRole::Hold => format!("{op} [reduced]"),
        TaskRole::Pull => format!("{op} [pull]"),
        TaskRole::Gate => format!("{op} [schedule gate]"),
    }
}
