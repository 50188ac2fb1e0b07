//! The candidates: unit orders (fastest and slowest first, prefixes, wrapped round their first
//! unit), the best estimates of each schedule, folded twins, a plan under the other schedule.

use super::chunks::Chunks;
use super::plan::{Plan, Unit, balanced};
use crate::cluster::{Cluster, GpuSpec};
use crate::cost::RuntimeMemory;
use crate::strategy::Schedule;

/// Most stages: the prefixes of the unit orders stop here, so planning stays cheap on clusters of
/// hundreds of machines (a deeper pipeline's bubble and per-stage launches outweigh its GPUs).
pub(crate) const MAX_STAGES: usize = 16;

/// Candidates simulated, best estimates first.
pub(crate) const SIMULATED: usize = 8;

/// The [`SIMULATED`] best estimates (`plans` sorted, kept so), half of each schedule where
/// both have that many: the estimates rank plans of one schedule better than across the two.
pub(super) fn best_of_each_schedule(plans: Vec<Plan>) -> Vec<Plan> {
    let per_schedule = SIMULATED / Schedule::ALL.len();
    let mut kept = vec![false; plans.len()];
    for schedule in Schedule::ALL {
        let of_schedule = (0..plans.len()).filter(|&i| plans[i].schedule == schedule);
        for i in of_schedule.take(per_schedule) {
            kept[i] = true;
        }
    }
    let mut room = SIMULATED.saturating_sub(kept.iter().filter(|&&k| k).count());
    for k in kept.iter_mut().filter(|k| !**k) {
        if room == 0 {
            break;
        }
        *k = true;
        room -= 1;
    }
    plans
        .into_iter()
        .zip(kept)
        .filter_map(|(plan, keep)| keep.then_some(plan))
        .collect()
}

/// `plans`, each wrapped one followed by its folded twin: the same cut, its first and last
/// stages both on the whole device group instead of a half each (a V-shaped pipeline). The
/// estimate cannot rank the two (it sees each stage alone, while the twin's end stages share
/// their GPUs and fill each other's bubbles), so both are simulated.
pub(super) fn with_folded_twins(plans: Vec<Plan>) -> Vec<Plan> {
    let mut out = Vec::with_capacity(2 * plans.len());
    for plan in plans {
        let twin = folded(&plan);
        out.push(plan);
        out.extend(twin);
    }
    out
}

/// The folded twin of a wrapped plan (see [`with_folded_twins`]); `None` for any other plan.
fn folded(plan: &Plan) -> Option<Plan> {
    let last = plan.units.len() - 1;
    let (devices, label) = plan.units[0].whole.clone()?;
    let end = |which: &str| Unit {
        devices: devices.clone(),
        label: format!("{label} ({which} stage)"),
        whole: None,
        ..plan.units[0].clone()
    };
    let mut units = plan.units.clone();
    units[0] = end("first");
    units[last] = end("last");
    Some(Plan {
        units,
        unfolded: Some(plan.units.clone()),
        ..plan.clone()
    })
}

/// `plan` under the other schedule: the same units (unfolded, cut afresh for that schedule,
/// folded again if it was). The estimates rank the schedules of one plan poorly against each
/// other (bert-large at batch 32 on TAG's cloud: its best plan, both V100 machines with the
/// first folded round both ends at 4 micro-batches, was simulated under 1F1B, 158.88 ms with
/// its best packing, but not under GPipe, 147.27 ms).
pub(super) fn other_schedule(plan: &Plan, chunks: &Chunks, cluster: &Cluster) -> Option<Plan> {
    let units = plan.unfolded.as_ref().unwrap_or(&plan.units);
    let schedule = Schedule::ALL.into_iter().find(|&s| s != plan.schedule)?;
    let near = balanced(chunks, units, plan.micro_batches, schedule, cluster)?;
    match plan.unfolded {
        Some(_) => folded(&near),
        None => Some(near),
    }
}

/// The GPU types of `units`, each once.
pub(super) fn gpu_types(units: &[Unit]) -> Vec<&GpuSpec> {
    let mut types: Vec<&GpuSpec> = Vec::new();
    for u in units {
        if !types.iter().any(|t| t.name == u.gpu.name) {
            types.push(&u.gpu);
        }
    }
    types
}

/// The device groups, or the GPUs of the only one; each unit's memory is what its smallest GPU
/// holds of tensors once `runtime` has taken its share.
pub(super) fn units(cluster: &Cluster, runtime: &RuntimeMemory) -> Vec<Unit> {
    let of = |devices: Vec<usize>, label: String| {
        let first = &cluster.devices[devices[0]];
        let memory_bytes = devices
            .iter()
            .map(|&d| runtime.tensor_capacity(cluster.devices[d].memory_bytes))
            .fold(f64::INFINITY, f64::min);
        Unit {
            gpu: first.gpu,
            memory_bytes,
            devices,
            label,
            whole: None,
        }
    };
    if cluster.groups.len() >= 2 {
        cluster
            .groups
            .iter()
            .map(|g| of(g.devices.clone(), g.name.clone()))
            .collect()
    } else {
        cluster
            .devices
            .iter()
            .map(|d| of(vec![d.index], d.name.clone()))
            .collect()
    }
}

/// Unit orders: fastest first and slowest first (by the group's total FP32), every prefix of
/// at least two units; and each prefix wrapped round its first unit (its first half runs the
/// first stage, its second half the last), so that a weight tied between the model's ends (an
/// embedding and the output layer) is shared inside one machine rather than across the slowest
/// link.
pub(super) fn orders(units: &[Unit]) -> Vec<Vec<Unit>> {
    let speed = |u: &Unit| u.gpu.fp32_tflops * u.devices.len() as f64;
    let mut fast_first = units.to_vec();
    fast_first.sort_by(|a, b| speed(b).total_cmp(&speed(a)));
    let mut slow_first = fast_first.clone();
    slow_first.reverse();
    let mut out = Vec::new();
    for order in [fast_first, slow_first] {
        for p in 2..=order.len().min(MAX_STAGES) {
            let prefix = order[..p].to_vec();
            let wrapped = wrapped(&prefix);
            for o in std::iter::once(prefix).chain(wrapped) {
                if !out.iter().any(|x: &Vec<Unit>| same_units(x, &o)) {
                    out.push(o);
                }
            }
        }
    }
    out
}

/// `order` with its first unit split in halves, the first half first and the second last.
fn wrapped(order: &[Unit]) -> Option<Vec<Unit>> {
    let first = &order[0];
    let half = first.devices.len() / 2;
    if half == 0 {
        return None;
    }
    let part = |devices: &[usize], which: &str| Unit {
        devices: devices.to_vec(),
        label: format!("{} ({which} half)", first.label),
        whole: Some((first.devices.clone(), first.label.clone())),
        ..first.clone()
    };
    let mut out = vec![part(&first.devices[..half], "first")];
    out.extend(order[1..].iter().cloned());
    out.push(part(&first.devices[half..], "second"));
    Some(out)
}

pub(super) fn same_units(a: &[Unit], b: &[Unit]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.devices == y.devices)
}
