//! Data parallelism as a practitioner runs it on a heterogeneous cluster — over the best subset
//! of device groups (or the single fastest GPU), with the better of even and speed-proportional
//! batch shares and the best of packed, 64 MiB-bucketed and per-tensor AllReduce. The
//! `dp-subset` placer returns it, and TAG's search starts from it, so the search never returns
//! anything slower.
//!
//! Up to [`ENUMERATE_UP_TO`] device groups every non-empty subset is a candidate; beyond, the
//! prefixes of the device groups sorted fastest first, and each machine on its own. Candidates
//! are tried in order of a lower bound on their iteration time (compute spread perfectly over the
//! subset's GPUs, and the AllReduce's bandwidth term, since a subset's collectives serialise on
//! its ports and NICs); the enumeration stops once the bound reaches the best time found, and a
//! variant's simulation is given up once past the best so far (often before it starts, at the
//! simulator's own makespan bound), so the answer is the exact best over the candidates with far
//! fewer simulations.

use rayon::prelude::*;

use crate::cluster::Cluster;
use crate::cluster::catalog::gpu_types;
use crate::error::Result;
use crate::evaluate::{Placement, beats, evaluate_within, limit_to_beat, until};
use crate::problem::Problem;
use crate::strategy::{
    AllReducePacking, BatchSplit, GroupDecision, HOROVOD_FUSION_BYTES, Reference,
    ReplicationOption, Strategy,
};

/// Every subset of device groups is a candidate up to this many device groups.
pub(crate) const ENUMERATE_UP_TO: usize = 10;

/// The packings tried for each subset.
pub const PACKINGS: [AllReducePacking; 3] = [
    AllReducePacking::Packed,
    AllReducePacking::Buckets(HOROVOD_FUSION_BYTES),
    AllReducePacking::PerTensor,
];

/// The best data-parallel strategy found and its simulated time.
#[derive(Debug, Clone)]
pub struct BestDataParallel {
    /// The winning data-parallel strategy: replicas, batch split and AllReduce packing.
    pub strategy: Strategy,
    /// Its simulated iteration time, µs.
    pub time_us: f64,
    /// Whether it fits in every device's memory (no out-of-memory in the simulation).
    pub fits: bool,
    /// What it is: the device groups, shares and packing.
    pub note: String,
    /// Simulations run.
    pub simulated: usize,
}

/// A candidate set of devices and the lower bound on its iteration time.
struct Candidate {
    devices: Vec<usize>,
    label: String,
    bound_us: f64,
}

/// The best of data parallelism over the candidate subsets (see the module docs).
pub fn best_data_parallel(p: &Problem) -> Result<BestDataParallel> {
    best_data_parallel_until(p, None)
}

/// [`best_data_parallel`] that tries no further subset once `deadline` has passed: the fastest
/// GPU alone is always scored, then subsets in the order of their bounds while time is left. On
/// a graph of 50,000 ops each simulation takes a third of a second, and the whole sweep took
/// seconds past `place --time`.
pub(crate) fn best_data_parallel_until(
    p: &Problem,
    deadline: Option<std::time::Instant>,
) -> Result<BestDataParallel> {
    let single = Reference::Single.strategy(p.graph, p.cluster);
    let note = "single fastest GPU".to_string();
    let mut best = score(p, single, note, f64::INFINITY)?.expect("no limit");
    let mut simulated = 1;
    let mut candidates = candidates(p);
    candidates.sort_by(|a, b| a.bound_us.total_cmp(&b.bound_us));
    for c in candidates {
        if best.fits && c.bound_us >= best.time_us {
            break;
        }
        if crate::interrupt::past(deadline) {
            break;
        }
        // Only a variant strictly faster than the best so far is kept: one past its time is
        // given up (often before simulating: the makespan bound, `sim::bound`).
        let limit_us = limit_to_beat(best.time_us, best.fits);
        let variants = variants(p.cluster, &c.devices);
        let scored: Vec<Result<Option<BestDataParallel>>> = variants
            .into_par_iter()
            .map(|(split, packing)| {
                let s = strategy(p, &c.devices, split, packing);
                let note = describe(&c.label, split, packing);
                // A round started just before the deadline is abandoned at it, not finished.
                until(deadline, || score(p, s, note, limit_us)).map(Option::flatten)
            })
            .collect();
        for s in scored {
            simulated += 1;
            if let Some(s) = s?.filter(|s| better(s, &best)) {
                best = s;
            }
        }
    }
    best.simulated = simulated;
    Ok(best)
}

fn better(a: &BestDataParallel, b: &BestDataParallel) -> bool {
    beats(a.time_us, a.fits, b.time_us, b.fits)
}

/// `s` simulated, or `None` once its iteration passes `limit_us`.
fn score(
    p: &Problem,
    s: Strategy,
    note: String,
    limit_us: f64,
) -> Result<Option<BestDataParallel>> {
    let placement = Placement::plain(s.clone(), "");
    let within = evaluate_within(p, &placement, limit_us)?;
    Ok(within.map(|e| BestDataParallel {
        strategy: s,
        time_us: e.report.iteration_us,
        fits: !e.report.is_oom(),
        note,
        simulated: 1,
    }))
}

fn describe(label: &str, split: BatchSplit, packing: AllReducePacking) -> String {
    let split = match split {
        BatchSplit::Even => "even shares",
        BatchSplit::Proportional => "speed-proportional shares",
    };
    let packing = match packing {
        AllReducePacking::Packed => "packed AllReduce".to_string(),
        AllReducePacking::PerTensor => "per-tensor AllReduce".to_string(),
        AllReducePacking::Buckets(b) => format!("{} MiB buckets", b >> 20),
    };
    format!("dp-subset: data parallel over {label}, {split}, {packing}")
}

/// Every op replicated on `devices`, gradients by AllReduce.
fn strategy(
    p: &Problem,
    devices: &[usize],
    split: BatchSplit,
    packing: AllReducePacking,
) -> Strategy {
    let decision = GroupDecision {
        devices: devices.to_vec(),
        option: ReplicationOption::AllReduce,
    };
    let mut s = Strategy::uniform(p.graph.len(), decision, split);
    s.allreduce = packing;
    s
}

/// Shares × packings for a subset: proportional shares only where its GPUs differ.
pub(crate) fn variants(
    cluster: &Cluster,
    devices: &[usize],
) -> Vec<(BatchSplit, AllReducePacking)> {
    let mixed = devices
        .iter()
        .any(|&d| cluster.devices[d].gpu.name != cluster.devices[devices[0]].gpu.name);
    let splits: &[BatchSplit] = if mixed {
        &[BatchSplit::Even, BatchSplit::Proportional]
    } else {
        &[BatchSplit::Even]
    };
    splits
        .iter()
        .flat_map(|&s| PACKINGS.iter().map(move |&k| (s, k)))
        .collect()
}

/// The candidate subsets with their bounds.
fn candidates(p: &Problem) -> Vec<Candidate> {
    let c = p.cluster;
    let g = c.groups.len();
    let sets: Vec<Vec<usize>> = if g <= ENUMERATE_UP_TO {
        (1u32..(1 << g))
            .map(|mask| (0..g).filter(|&i| mask >> i & 1 == 1).collect())
            .collect()
    } else {
        let mut by_speed: Vec<usize> = (0..g).collect();
        by_speed.sort_by(|&a, &b| {
            let speed = |x: usize| c.groups[x].gpu.fp32_tflops * c.groups[x].devices.len() as f64;
            speed(b).total_cmp(&speed(a))
        });
        let mut sets: Vec<Vec<usize>> = (1..=g).map(|k| by_speed[..k].to_vec()).collect();
        sets.extend(c.machines.iter().map(|m| m.groups.clone()));
        sets.iter_mut().for_each(|s| s.sort_unstable());
        sets.sort();
        sets.dedup();
        sets
    };
    let work = Work::of(p);
    sets.into_iter()
        .map(|set| {
            let mut devices: Vec<usize> = set
                .iter()
                .flat_map(|&i| c.groups[i].devices.iter().copied())
                .collect();
            devices.sort_unstable();
            let names: Vec<&str> = set.iter().map(|&i| c.groups[i].name.as_str()).collect();
            Candidate {
                bound_us: work.bound_us(p, &devices),
                label: format!("{} ({} GPUs)", names.join("+"), devices.len()),
                devices,
            }
        })
        .collect()
}

/// What every data-parallel candidate has to do: per GPU type, the batch-proportional and the
/// fixed part of one replica's compute, and the bytes of gradients to synchronise.
struct Work {
    gradient_bytes: f64,
    /// (fixed, proportional) compute of one replica per device group, computed once: every
    /// candidate subset reuses it.
    compute: Vec<(f64, f64)>,
}

impl Work {
    fn of(p: &Problem) -> Work {
        let g = p.graph;
        Work {
            gradient_bytes: g
                .gradients()
                .iter()
                .map(|l| g.op(l.grad).output_bytes)
                .sum(),
            compute: {
                let (types, type_of) = gpu_types(p.cluster.groups.iter().map(|g| &g.gpu));
                let per_type: Vec<(f64, f64)> =
                    types.iter().map(|gpu| split_compute(p, gpu)).collect();
                type_of.iter().map(|&t| per_type[t]).collect()
            },
        }
    }

    /// A lower bound on data parallelism over `devices`: the proportional part of the compute
    /// spread perfectly over the GPUs, every replica's fixed part, and the AllReduce's bandwidth
    /// term over the slowest ring hop (every bucket's collective holds the same ring).
    fn bound_us(&self, p: &Problem, devices: &[usize]) -> f64 {
        let mut rate = 0.0;
        let mut fixed: f64 = 0.0;
        for &d in devices {
            let (f, v) = self.compute[p.cluster.devices[d].group];
            rate += 1.0 / v.max(1e-9);
            fixed = fixed.max(f);
        }
        let compute = (1.0 / rate).max(fixed);
        if devices.len() < 2 {
            return compute;
        }
        let ring: Vec<u32> = devices.iter().map(|&d| d as u32).collect();
        let plan = crate::compile::ring_plan(p.cluster, &ring);
        let n = devices.len() as f64;
        let comm = 2.0 * (n - 1.0) / n * self.gradient_bytes
            / (plan.bandwidth * p.cost.comm.nccl_efficiency);
        compute.max(comm)
    }
}

/// One replica's compute on `gpu` at the full batch, split into the part that does not shrink
/// with the batch share (launch overheads, batch-independent ops) and the part that does.
fn split_compute(p: &Problem, gpu: &crate::cluster::GpuSpec) -> (f64, f64) {
    let launch = p.cost.efficiency(gpu).launch_us;
    let (mut fixed, mut variable) = (0.0, 0.0);
    for op in p.graph.ops() {
        let t = p.cost.compute_time_us(op, gpu, 1.0);
        if op.scales_with_batch() {
            let f = launch.min(t);
            fixed += f;
            variable += t - f;
        } else {
            fixed += t;
        }
    }
    (fixed, variable)
}
