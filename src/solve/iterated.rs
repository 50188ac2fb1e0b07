//! Iterated local search on the warm start: kick the best schedule found so far (move a few
//! random nodes to other devices, or swap two neighbours of the node order that no edge orders),
//! descend again with [`super::improve`], keep the result when it is no worse. A descent stops
//! in the first local optimum its single moves reach; on instances with many small nodes and
//! costly transfers (a 34-node MLP on two GPUs: 132 µs after the descent) the kicks find
//! schedules the single moves cannot reach. Every random choice comes from the solve's seed,
//! and the rounds are counted, not timed, so a run is reproducible (the deadline only caps it).

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::improve::{improve_from, sequence};
use super::instance::Instance;
use super::schedule::{Channels, Plan, Task, in_edges, semi_active, topo_rank};

/// Nodes × devices × tasks a round's descent may cost, per second of the search's share: half
/// of what one core of the development machine runs (8e7 on a 34-node and on a 107-node
/// instance alike), so that the rounds, not the deadline, end the search on a slower machine.
const WORK_PER_SECOND: f64 = 4e7;

/// The rounds [`iterated`] runs when given `seconds` of the time limit: counted, so that the
/// same seed and limit give the same schedule on any machine that finishes them in time.
pub(crate) fn rounds_for(inst: &Instance, seconds: f64) -> usize {
    let tasks = (inst.len() + inst.edges.len()) as f64;
    let per_round = (inst.len() as f64 * inst.devices() as f64 * tasks).max(1.0);
    (seconds.max(0.0) * WORK_PER_SECOND / per_round) as usize
}

/// `plan` improved by `rounds` kicks and descents, or fewer when `deadline` comes first.
pub(crate) fn iterated(
    inst: &Instance,
    channels: Channels,
    plan: Plan,
    seed: u64,
    rounds: usize,
    deadline: Instant,
) -> Plan {
    let leader = inst.colocation_leader();
    let leaders: Vec<usize> = (0..inst.len()).filter(|&i| leader[i] == i).collect();
    if leaders.is_empty() || inst.devices() < 2 {
        return plan;
    }
    let ins = in_edges(inst);
    let rank = topo_rank(inst);
    let reach = inst.reachability();
    let mut rng = StdRng::seed_from_u64(seed);
    let floor = lower_bound(inst) * (1.0 + 1e-9);
    let mut best = plan;
    for _ in 0..rounds {
        if Instant::now() >= deadline || (best.makespan <= floor && best.admissible(inst)) {
            break;
        }
        let mut device = best.device.clone();
        let mut order = sequence(&best, &ins, &rank);
        if rng.random_bool(0.5) {
            let moves = rng.random_range(1..=3usize);
            for _ in 0..moves {
                let set = leaders[rng.random_range(0..leaders.len())];
                let to = rng.random_range(0..inst.devices());
                for j in (0..inst.len()).filter(|&j| leader[j] == set) {
                    device[j] = to;
                }
            }
        } else {
            swap_neighbours(&mut order, &reach, &mut rng);
        }
        let kicked = semi_active(inst, channels, &device, &order);
        if !kicked.admissible(inst) {
            continue;
        }
        let local = improve_from(inst, channels, kicked, Some(order), deadline);
        if local.makespan <= best.makespan * (1.0 + 1e-12) && local.admissible(inst) {
            best = local;
        }
    }
    best
}

/// No schedule is shorter: the critical path at the fastest times with free transfers, and all
/// the work at its fastest spread evenly over the devices. Where the incumbent reaches it (a
/// CNN's backward chain with its weight gradients beside it) there is nothing left to find.
fn lower_bound(inst: &Instance) -> f64 {
    let work: f64 = (0..inst.len()).map(|i| inst.fastest(i)).sum();
    inst.critical_path().max(work / inst.devices() as f64)
}

/// Swap two nodes next to each other in the node order (their input transfers travel with them)
/// when no path orders them.
fn swap_neighbours(order: &mut Vec<Task>, reach: &[Vec<bool>], rng: &mut StdRng) {
    let nodes: Vec<(usize, usize)> = order
        .iter()
        .enumerate()
        .filter_map(|(at, t)| match *t {
            Task::Node(i) => Some((at, i)),
            Task::Transfer(_) => None,
        })
        .collect();
    if nodes.len() < 2 {
        return;
    }
    let k = rng.random_range(0..nodes.len() - 1);
    let ((_, a), (b_at, b)) = (nodes[k], nodes[k + 1]);
    if reach[a][b] || reach[b][a] {
        return;
    }
    // a's block is its input transfers and a itself; b's likewise. Move b's block before a's.
    let a_start = if k == 0 { 0 } else { nodes[k - 1].0 + 1 };
    let b_block: Vec<Task> = order.drain(nodes[k].0 + 1..=b_at).collect();
    order.splice(a_start..a_start, b_block);
}
