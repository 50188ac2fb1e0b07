//! The simulator run that checks a MILP against its own cost assumptions ("model alignment").
//!
//! The plan becomes an [`ExecGraph`] the discrete-event simulator runs unchanged: a compute task
//! per node on its device, a transfer task per crossing edge, and — so that the simulator runs
//! the MILP's order rather than its own — each device's and each channel's tasks chained in the
//! plan's order. The network is configured per formulation:
//!
//! - QuickP ([`Channels::Unlimited`]): every transfer gets a private channel, so none waits for
//!   another (QuickP models no congestion);
//! - MOIRAI ([`Channels::PerPair`]): one channel per ordered device pair, FIFO, as MOIRAI's
//!   communication tasks select a channel and never overlap on it.
//!
//! Memory is not part of the timing (capacities are set to infinity here); the MILPs constrain it
//! separately. The whole-strategy simulation of the same placement through the compiler is what
//! `solve` reports as the simulated time; it may differ (the compiler sends a tensor to a device
//! once, and the simulator's priority order does not idle a device waiting for the planned op).

use super::instance::Instance;
use super::schedule::{Channels, Plan, Task};
use crate::sim::{ExecGraph, Order, Simulator, TaskId, TaskKind, TaskSpec};

/// The simulator's makespan of `plan` under `channels`.
pub(crate) fn simulated_makespan(inst: &Instance, plan: &Plan, channels: Channels) -> f64 {
    let mut g = exec_graph(inst, plan, channels);
    Simulator::new()
        .run(&mut g, Order::Priority)
        .map(|r| r.makespan)
        .unwrap_or(f64::NAN)
}

fn exec_graph(inst: &Instance, plan: &Plan, channels: Channels) -> ExecGraph {
    let d = inst.devices();
    let channel_count = match channels {
        Channels::Unlimited => inst.edges.len(),
        Channels::PerPair => d * d,
    };
    let mut g = ExecGraph::new(vec![f64::INFINITY; d], channel_count);
    let sequence = plan.sequence(inst);
    let mut node_task = vec![TaskId::MAX; inst.len()];
    let mut edge_task = vec![None; inst.edges.len()];
    // Last task on each resource, to chain the plan's order.
    let mut last: Vec<Option<TaskId>> = vec![None; d + channel_count];
    for (priority, &task) in sequence.iter().enumerate() {
        let (resource, duration, kind, device) = match task {
            Task::Node(i) => {
                let dev = plan.device[i];
                (dev, inst.nodes[i].compute[dev], TaskKind::Compute, dev)
            }
            Task::Transfer(e) => {
                let edge = inst.edges[e];
                let (k, l) = (plan.device[edge.src], plan.device[edge.dst]);
                let ch = match channels {
                    Channels::Unlimited => e,
                    Channels::PerPair => k * d + l,
                };
                (d + ch, inst.comm(e, k, l), TaskKind::Transfer, l)
            }
        };
        let id = g.add_task(TaskSpec {
            kind,
            duration,
            resources: &[resource as u32],
            out_device: device as u32,
            out_bytes: 0.0,
            priority: priority as f64,
            label: 0,
        });
        if let Some(prev) = last[resource] {
            g.add_dep(prev, id);
        }
        last[resource] = Some(id);
        match task {
            Task::Node(i) => node_task[i] = id,
            Task::Transfer(e) => edge_task[e] = Some(id),
        }
    }
    for (e, edge) in inst.edges.iter().enumerate() {
        match edge_task[e] {
            Some(t) => {
                g.add_dep(node_task[edge.src], t);
                g.add_dep(t, node_task[edge.dst]);
            }
            None => g.add_dep(node_task[edge.src], node_task[edge.dst]),
        }
    }
    g
}
