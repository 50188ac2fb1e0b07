//! Exhaustive search for tiny instances, the reference the MILPs are tested against: every
//! placement (honouring memory and co-location) times every sequence of the extended task graph
//! (nodes, plus transfers when channels are congested), each timed by the same rule as
//! everything else ([`Timer`]). Every semi-active schedule is some sequence's timing, and an
//! optimal schedule can always be made semi-active, so the minimum found is the optimum.
//! Branch and bound on the running makespan keeps 7 nodes × 3 devices to a fraction of a second.

use super::instance::Instance;
use super::schedule::{Channels, Plan, Task, Timer, in_edges};

/// The optimal plan, or `None` when no placement is admissible.
pub(crate) fn optimum(inst: &Instance, channels: Channels) -> Option<Plan> {
    let n = inst.len();
    let d = inst.devices();
    let ins = in_edges(inst);
    let mut best: Option<Plan> = None;
    let mut device = vec![0usize; n];
    loop {
        let probe = Plan {
            device: device.clone(),
            start: vec![0.0; n],
            transfer_start: vec![None; inst.edges.len()],
            makespan: 0.0,
        };
        if probe.admissible(inst) {
            let timer = Timer::new(inst, channels, device.clone(), &ins);
            let tasks = tasks_of(inst, &timer);
            let done = vec![false; tasks.len()];
            search(inst, &tasks, timer, done, &mut best);
        }
        // Next placement (odometer over devices).
        let mut k = 0;
        loop {
            if k == n {
                return best;
            }
            device[k] += 1;
            if device[k] < d {
                break;
            }
            device[k] = 0;
            k += 1;
        }
    }
}

/// The tasks of the extended graph for this placement.
fn tasks_of(inst: &Instance, timer: &Timer) -> Vec<Task> {
    let mut tasks: Vec<Task> = (0..inst.len()).map(Task::Node).collect();
    tasks.extend(
        (0..inst.edges.len())
            .filter(|&e| timer.is_transfer_task(e))
            .map(Task::Transfer),
    );
    tasks
}

/// Whether every predecessor of `task` has run.
fn available(inst: &Instance, timer: &Timer, task: Task) -> bool {
    match task {
        Task::Node(i) => inst.edges.iter().enumerate().all(|(e, edge)| {
            edge.dst != i
                || if timer.is_transfer_task(e) {
                    !timer.arrival[e].is_nan()
                } else {
                    !timer.finish[edge.src].is_nan()
                }
        }),
        Task::Transfer(e) => !timer.finish[inst.edges[e].src].is_nan(),
    }
}

fn search(inst: &Instance, tasks: &[Task], timer: Timer, done: Vec<bool>, best: &mut Option<Plan>) {
    if best
        .as_ref()
        .is_some_and(|b| timer.makespan >= b.makespan - 1e-9)
    {
        return;
    }
    if done.iter().all(|&x| x) {
        *best = Some(timer.into_plan());
        return;
    }
    for (k, &task) in tasks.iter().enumerate() {
        if done[k] || !available(inst, &timer, task) {
            continue;
        }
        let mut next = timer.clone();
        next.run(task);
        let mut next_done = done.clone();
        next_done[k] = true;
        search(inst, tasks, next, next_done, best);
    }
}
