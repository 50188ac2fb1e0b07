//! Symmetry breaking between interchangeable GPUs. Two devices are interchangeable when swapping
//! them maps the instance onto itself: equal compute times for every node, equal capacity, and
//! routes (latency and bandwidth) that the swap permutes into themselves. Without a rule, every
//! placement appears once per relabelling of such devices and the MILP's branch and bound proves
//! the same subtree again and again (2! on two identical GPUs, 4! on four).
//!
//! The rule is the classic one for identical machines: within a run of consecutive
//! interchangeable devices, devices are used in the order of the first node each holds, so node i
//! may sit on device k only if device k − 1 holds a node before i:
//! `x[i][k] ≤ Σ_{j<i} x[j][k−1]` (and node 0 never on k). Any solution can be relabelled into
//! this form without changing its schedule ([`canonical_devices`]), so the optimum is kept.

use super::instance::Instance;
use crate::milp::{Milp, Var};

/// `k` for every device that is interchangeable with device `k − 1`.
pub(crate) fn interchangeable_with_previous(inst: &Instance) -> Vec<usize> {
    (1..inst.devices())
        .filter(|&k| swap_is_symmetry(inst, k - 1, k))
        .collect()
}

fn swap_is_symmetry(inst: &Instance, a: usize, b: usize) -> bool {
    let swap = |d: usize| match d {
        d if d == a => b,
        d if d == b => a,
        d => d,
    };
    let same_compute = inst.nodes.iter().all(|n| n.compute[a] == n.compute[b]);
    let d = inst.devices();
    let routes_kept = (0..d).all(|k| {
        (0..d).all(|l| {
            k == l
                || (inst.latency[k][l] == inst.latency[swap(k)][swap(l)]
                    && inst.bandwidth[k][l] == inst.bandwidth[swap(k)][swap(l)])
        })
    });
    same_compute && inst.capacity[a] == inst.capacity[b] && routes_kept
}

/// The rule as implications: `(i, k, earlier)` says leader i may sit on device k only if one of
/// the `earlier` leaders sits on k − 1 (none: never). Co-located nodes follow their leader.
pub(crate) fn rule(inst: &Instance, leader: &[usize]) -> Vec<(usize, usize, Vec<usize>)> {
    let leaders: Vec<usize> = (0..inst.len()).filter(|&i| leader[i] == i).collect();
    interchangeable_with_previous(inst)
        .into_iter()
        .flat_map(|k| {
            let leaders = &leaders;
            leaders
                .iter()
                .enumerate()
                .map(move |(at, &i)| (i, k, leaders[..at].to_vec()))
        })
        .collect()
}

/// The rows of the rule over the placement columns `x`: `x[i][k] − Σ_{j<i} x[j][k−1] ≤ 0`.
pub(crate) fn symmetry_rows(m: &mut Milp, inst: &Instance, x: &[Vec<Var>], leader: &[usize]) {
    for (i, k, earlier) in rule(inst, leader) {
        let mut terms = vec![(x[i][k], 1.0)];
        terms.extend(earlier.iter().map(|&j| (x[j][k - 1], -1.0)));
        m.le(&terms, 0.0);
    }
}

/// `device` relabelled into the rule's form: within each run of interchangeable devices, devices
/// ordered by the first node they hold (unused ones last). The schedule is unchanged because each
/// relabelling is a symmetry of the instance.
pub(crate) fn canonical_devices(inst: &Instance, device: &[usize]) -> Vec<usize> {
    let mut label: Vec<usize> = (0..inst.devices()).collect();
    for run in runs(inst) {
        let first_node = |k: usize| device.iter().position(|&d| d == k).unwrap_or(usize::MAX);
        let mut by_first = run.clone();
        by_first.sort_by_key(|&k| (first_node(k), k));
        for (slot, &k) in run.iter().zip(&by_first) {
            label[k] = *slot;
        }
    }
    device.iter().map(|&d| label[d]).collect()
}

/// Maximal runs of consecutive devices, each interchangeable with the one before it.
fn runs(inst: &Instance) -> Vec<Vec<usize>> {
    let linked = interchangeable_with_previous(inst);
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for k in 0..inst.devices() {
        match runs.last_mut() {
            Some(run) if linked.contains(&k) => run.push(k),
            _ => runs.push(vec![k]),
        }
    }
    runs.retain(|r| r.len() > 1);
    runs
}
