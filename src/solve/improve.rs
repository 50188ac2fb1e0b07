//! Local search on the warm start: move one node (with its co-location set) to another device
//! while that shortens the schedule, timed twice: with the node order kept, and with the moved
//! nodes hoisted to the earliest place their inputs allow (a small node that would otherwise
//! queue behind everything its new device started before it). Beyond QuickP and MOIRAI, which start HiGHS from nothing:
//! a better incumbent gives branch-and-bound a tighter cut-off at once, and on instances the
//! solver cannot close in its time limit it is what the MILP placer returns.

use std::time::Instant;

use super::instance::Instance;
use super::schedule::{Channels, Plan, Task, in_edges, semi_active, topo_rank};

/// Most node × device moves × tasks the search may time (a few tenths of a second): it stops
/// early on large instances, where the MILP is coarsened anyway.
const WORK_LIMIT: f64 = 5e7;

/// Passes over the nodes at most.
const PASSES: usize = 4;

/// `plan` improved by single-set moves, each timed with its node order kept or hoisted and every
/// transfer queued just before its consumer; only admissible schedules (memory, co-location) are taken.
/// Stops at `deadline` (part of the solver's time limit) with the best found.
pub(crate) fn improve(inst: &Instance, channels: Channels, plan: Plan, deadline: Instant) -> Plan {
    improve_from(inst, channels, plan, None, deadline)
}

/// [`improve`] starting from `order` (a linear extension that times to `plan`); `None`: `plan`'s
/// own start order.
pub(crate) fn improve_from(
    inst: &Instance,
    channels: Channels,
    plan: Plan,
    order: Option<Vec<Task>>,
    deadline: Instant,
) -> Plan {
    let tasks = (inst.len() + inst.edges.len()) as f64;
    let per_pass = inst.len() as f64 * inst.devices() as f64 * tasks;
    let passes = PASSES.min((WORK_LIMIT / per_pass.max(1.0)) as usize);
    let leader = inst.colocation_leader();
    let ins = in_edges(inst);
    let rank = topo_rank(inst);
    let mut order = order.unwrap_or_else(|| sequence(&plan, &ins, &rank));
    let mut best = plan;
    for _ in 0..passes {
        let mut improved = false;
        for i in (0..inst.len()).filter(|&i| leader[i] == i) {
            if Instant::now() >= deadline {
                return best;
            }
            // The hoisted order depends on the moved set, not on its new device: found once per
            // set (and after a move is taken), and `None` where it is the order kept.
            let hoist_new = |order: &Vec<Task>| {
                Some(hoist(inst, &ins, order, i, &leader)).filter(|h| h != order)
            };
            let mut hoisted = hoist_new(&order);
            for d in 0..inst.devices() {
                if d == best.device[i] {
                    continue;
                }
                let mut device = best.device.clone();
                for j in (0..inst.len()).filter(|&j| leader[j] == i) {
                    device[j] = d;
                }
                let mut taken = false;
                for tried in std::iter::once(&order).chain(hoisted.as_ref()) {
                    let moved = semi_active(inst, channels, &device, tried);
                    if moved.makespan < best.makespan * (1.0 - 1e-9) && moved.admissible(inst) {
                        best = moved;
                        taken = true;
                    }
                }
                if taken {
                    order = sequence(&best, &ins, &rank);
                    hoisted = hoist_new(&order);
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
    best
}

/// The nodes in `plan`'s start order, each preceded by the transfers of its inputs (ignored
/// where an edge stays on one device).
pub(crate) fn sequence(plan: &Plan, ins: &[Vec<usize>], rank: &[usize]) -> Vec<Task> {
    let mut nodes: Vec<usize> = (0..plan.start.len()).collect();
    // Start times order a consumer after its producer; equal starts (zero-time producers) are
    // broken by topological rank, so the order stays a linear extension.
    nodes.sort_by(|&a, &b| {
        plan.start[a]
            .total_cmp(&plan.start[b])
            .then(rank[a].cmp(&rank[b]))
    });
    let mut out = Vec::with_capacity(nodes.len() * 2);
    for i in nodes {
        out.extend(ins[i].iter().map(|&e| Task::Transfer(e)));
        out.push(Task::Node(i));
    }
    out
}

/// `order` with the nodes of `leader`'s set (and their input transfers) moved to just after the
/// last task their inputs come from: still a linear extension, with the set as early as it can be.
fn hoist(
    inst: &Instance,
    ins: &[Vec<usize>],
    order: &[Task],
    set_leader: usize,
    leader: &[usize],
) -> Vec<Task> {
    let mut out: Vec<Task> = order.to_vec();
    let members: Vec<usize> = order
        .iter()
        .filter_map(|&t| match t {
            Task::Node(j) if leader[j] == set_leader => Some(j),
            _ => None,
        })
        .collect();
    for j in members {
        let own = |t: &Task| match *t {
            Task::Node(k) => k == j,
            Task::Transfer(e) => inst.edges[e].dst == j,
        };
        out.retain(|t| !own(t));
        let after = out
            .iter()
            .rposition(
                |&t| matches!(t, Task::Node(k) if ins[j].iter().any(|&e| inst.edges[e].src == k)),
            )
            .map_or(0, |at| at + 1);
        let moved = ins[j]
            .iter()
            .map(|&e| Task::Transfer(e))
            .chain([Task::Node(j)]);
        out.splice(after..after, moved);
    }
    out
}
