//! The list-scheduling machinery shared by HEFT and Baechi's m-* placers: per-op compute times on
//! every GPU, transfer times from the route table, a per-device timeline (with optional insertion
//! into idle gaps), and a memory estimate per device.
//!
//! Every op goes on exactly one GPU with the whole batch. The resulting strategy has one
//! model-parallel group per used GPU, and the schedule's start times become the execution order
//! (task priorities), so the simulator runs each GPU's ops in the order the scheduler planned.
//!
//! Memory is estimated conservatively — an op costs its resident bytes plus its output plus every
//! input it receives from another GPU, as if nothing were ever freed — so when a scheduler claims
//! a placement fits, the simulator's reference-counted peak cannot exceed it.

use std::collections::HashMap;
use std::time::Instant;

use super::Problem;
use super::{Budget, Placement};
use crate::cluster::Cluster;
use crate::cluster::catalog::gpu_types;
use crate::error::{Result, SearchError};
use crate::graph::{OpIdx, Phase};
use crate::strategy::Strategy;

/// Times and sizes a list scheduler needs, computed once per problem.
pub(crate) struct Costs<'a> {
    /// The cluster, for its routes.
    pub cluster: &'a Cluster,
    /// Compute times, µs at the full batch, per op and GPU type ([`Costs::compute`]).
    compute: ComputeTable,
    /// Bytes an op leaves on its own device: resident state plus its output.
    pub own_bytes: Vec<f64>,
    pub capacity: Vec<f64>,
    pub devices: usize,
    /// Past this the schedule gives up ([`Schedule::candidates`] fails): on a thousand GPUs one
    /// list schedule takes tens of seconds, and `place --time` must hold.
    deadline: Option<Instant>,
    /// The distinct (latency µs, bandwidth bytes/µs) of ordered pairs of distinct GPUs, each with
    /// how many pairs have it: a transfer costs `latency + bytes / bandwidth`, so the mean and the
    /// worst over all n(n − 1) pairs need only these few classes, not a pass over a million pairs
    /// per edge on 1,024 GPUs.
    pair_classes: Vec<PairClass>,
}

/// Ordered GPU pairs with one latency and bandwidth.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PairClass {
    latency_us: f64,
    bandwidth: f64,
    pairs: usize,
}

impl PairClass {
    fn transfer_us(&self, bytes: f64) -> f64 {
        self.latency_us + bytes / self.bandwidth
    }
}

/// Compute times per op and GPU type: the devices of one type run an op alike, and a table per
/// device (ops × GPUs) took 1.6 GB and seconds to fill for 200,000 ops on 1,024 GPUs, past
/// `place --time`.
struct ComputeTable {
    /// `times[op * types + t]`, µs at the full batch.
    times: Vec<f64>,
    /// Each device's type.
    type_of: Vec<usize>,
    /// How many GPU types there are.
    types: usize,
}

impl ComputeTable {
    fn new(p: &Problem) -> ComputeTable {
        let (gpus, type_of) = gpu_types(p.cluster.devices.iter().map(|d| &d.gpu));
        let times = (p.graph.ops().iter())
            .flat_map(|op| gpus.iter().map(|g| p.cost.compute_time_us(op, g, 1.0)))
            .collect();
        ComputeTable {
            times,
            type_of,
            types: gpus.len(),
        }
    }

    fn row(&self, op: OpIdx) -> &[f64] {
        &self.times[op * self.types..(op + 1) * self.types]
    }

    fn at(&self, op: OpIdx, device: usize) -> f64 {
        self.row(op)[self.type_of[device]]
    }
}

/// The classes of ordered pairs of distinct GPUs of `cluster`, in order of first appearance.
fn pair_classes(cluster: &Cluster) -> Vec<PairClass> {
    let n = cluster.devices.len();
    let mut index: HashMap<(u64, u64), usize> = HashMap::new();
    let mut classes: Vec<PairClass> = Vec::new();
    for a in 0..n {
        for b in (0..n).filter(|&b| b != a) {
            let (latency_us, bandwidth) = (cluster.latency(a, b), cluster.bandwidth(a, b));
            let key = (latency_us.to_bits(), bandwidth.to_bits());
            let at = *index.entry(key).or_insert_with(|| {
                classes.push(PairClass {
                    latency_us,
                    bandwidth,
                    pairs: 0,
                });
                classes.len() - 1
            });
            classes[at].pairs += 1;
        }
    }
    classes
}

impl<'a> Costs<'a> {
    /// The costs of `p`, for a schedule that must end by `budget.deadline`.
    pub(crate) fn new(p: &Problem<'a>, budget: &Budget) -> Costs<'a> {
        let devices = p.cluster.devices.len();
        let compute = ComputeTable::new(p);
        let own_bytes = p
            .graph
            .ops()
            .iter()
            .map(|op| {
                // A parameter's output is the resident variable itself (as the compiler counts).
                let out = if op.phase == Phase::Parameter {
                    0.0
                } else {
                    op.output_bytes
                };
                op.resident_bytes + out
            })
            .collect();
        Costs {
            cluster: p.cluster,
            compute,
            own_bytes,
            capacity: (p.cluster.devices.iter())
                .map(|d| p.cost.runtime.tensor_capacity(d.memory_bytes))
                .collect(),
            devices,
            deadline: budget.deadline,
            pair_classes: pair_classes(p.cluster),
        }
    }

    /// `op`'s compute time on `device`, µs at the full batch.
    pub(crate) fn compute(&self, op: OpIdx, device: usize) -> f64 {
        self.compute.at(op, device)
    }

    /// `op`'s longest compute time over the GPUs.
    pub(crate) fn max_compute(&self, op: OpIdx) -> f64 {
        self.compute.row(op).iter().copied().fold(0.0, f64::max)
    }

    /// Compute time averaged over the GPUs (HEFT's w̄).
    pub(crate) fn mean_compute(&self, op: OpIdx) -> f64 {
        // Summed device by device, in order, as the per-device table was: the same ranks to
        // the last bit.
        let total: f64 = (0..self.devices).map(|d| self.compute(op, d)).sum();
        total / self.devices as f64
    }

    /// Transfer time of `bytes` averaged over ordered pairs of distinct GPUs (HEFT's c̄).
    pub(crate) fn mean_transfer(&self, bytes: f64) -> f64 {
        let n = self.devices;
        if n < 2 {
            return 0.0;
        }
        let total: f64 = (self.pair_classes.iter())
            .map(|c| c.pairs as f64 * c.transfer_us(bytes))
            .sum();
        total / (n * (n - 1)) as f64
    }

    /// Transfer time of `bytes` over the slowest ordered pair of distinct GPUs (FastT's c_ij).
    pub(crate) fn max_transfer(&self, bytes: f64) -> f64 {
        (self.pair_classes.iter())
            .map(|c| c.transfer_us(bytes))
            .fold(0.0, f64::max)
    }
}

/// A schedule under construction: where each op runs, when, and memory used so far.
pub struct Schedule<'a> {
    pub p: Problem<'a>,
    pub costs: &'a Costs<'a>,
    pub device: Vec<Option<usize>>,
    pub start: Vec<f64>,
    pub finish: Vec<f64>,
    /// Busy intervals per device, sorted by start.
    busy: Vec<Vec<(f64, f64)>>,
    pub memory: Vec<f64>,
    /// When each link (by cluster index) is next free.
    link_free: Vec<f64>,
    /// When op `u`'s tensor arrived on device `d` (for tensors sent there).
    arrived: HashMap<(OpIdx, usize), f64>,
    /// False once some op had to go on a GPU without room for it.
    pub fits: bool,
}

impl<'a> Schedule<'a> {
    pub(crate) fn new(p: Problem<'a>, costs: &'a Costs) -> Schedule<'a> {
        let n = p.graph.len();
        Schedule {
            p,
            costs,
            device: vec![None; n],
            start: vec![0.0; n],
            finish: vec![0.0; n],
            busy: vec![Vec::new(); costs.devices],
            memory: vec![0.0; costs.devices],
            link_free: vec![0.0; p.cluster.links.len()],
            arrived: HashMap::new(),
            fits: true,
        }
    }

    /// When all of `op`'s inputs can be on device `d` (its predecessors must be scheduled).
    pub(crate) fn data_ready(&self, op: OpIdx, d: usize) -> f64 {
        self.transfers(op, d).0
    }

    /// The inputs of `op` on `d`: when the last arrives, and the transfers that would carry them
    /// as (producer, start, arrival). Like the compiler, a tensor crosses to a device once, and
    /// like the simulator, a transfer holds every link of its route, one transfer at a time (a
    /// transfer queues after the last one planned on each of its links).
    fn transfers(&self, op: OpIdx, d: usize) -> (f64, Vec<(OpIdx, f64, f64)>) {
        self.inputs_of(&[op], d, false)
    }

    /// [`Schedule::transfers`] for the inputs of several ops booked together; with `skip_unplaced`
    /// an input from an op not yet scheduled (one of `ops` itself) is left out.
    fn inputs_of(
        &self,
        ops: &[OpIdx],
        d: usize,
        skip_unplaced: bool,
    ) -> (f64, Vec<(OpIdx, f64, f64)>) {
        let g = self.p.graph;
        let cluster = self.p.cluster;
        let mut ready: f64 = 0.0;
        let mut planned: Vec<(OpIdx, f64, f64)> = Vec::new();
        // Links this call has already booked: (link, free from).
        let mut booked: Vec<(u32, f64)> = Vec::new();
        for e in ops.iter().flat_map(|&op| g.in_edges(op)) {
            let edge = g.edges()[*e];
            let u = edge.src;
            let from = match self.device[u] {
                Some(from) => from,
                None if skip_unplaced => continue,
                None => panic!("predecessors are scheduled first"),
            };
            let arrive = if from == d {
                self.finish[u]
            } else if let Some(&t) = self.arrived.get(&(u, d)) {
                t
            } else if let Some(&(_, _, t)) = planned.iter().find(|x| x.0 == u) {
                t
            } else {
                let links = cluster.route_links(from, d);
                let free = |l: u32| {
                    booked
                        .iter()
                        .rev()
                        .find(|b| b.0 == l)
                        .map_or(self.link_free[l as usize], |b| b.1)
                };
                let start = links
                    .iter()
                    .map(|&l| free(l))
                    .fold(self.finish[u], f64::max);
                let end = start + cluster.transfer_us(from, d, edge.bytes);
                booked.extend(links.iter().map(|&l| (l, end)));
                planned.push((u, start, end));
                end
            };
            ready = ready.max(arrive);
        }
        (ready, planned)
    }

    /// Earliest start of `op` on `d` no earlier than `ready`: after the device's last task, or,
    /// with `insertion`, in the first idle gap long enough (HEFT's insertion policy).
    pub(crate) fn slot(&self, op: OpIdx, d: usize, ready: f64, insertion: bool) -> f64 {
        let duration = self.costs.compute(op, d);
        if insertion {
            self.gap_after(d, ready, duration)
        } else {
            self.busy[d]
                .last()
                .map_or(ready, |&(_, end)| end.max(ready))
        }
    }

    /// Start of the first idle stretch of `duration` on `d` no earlier than `ready`.
    pub(crate) fn gap_after(&self, d: usize, ready: f64, duration: f64) -> f64 {
        let mut t = ready;
        for &(s, e) in &self.busy[d] {
            if t + duration <= s {
                return t;
            }
            t = t.max(e);
        }
        t
    }

    /// Bytes `op` would add to device `d`: its own bytes plus inputs received from other GPUs.
    pub(crate) fn memory_cost(&self, op: OpIdx, d: usize) -> f64 {
        let g = self.p.graph;
        let received: f64 = g
            .in_edges(op)
            .iter()
            .map(|&e| g.edges()[e])
            .filter(|edge| self.device[edge.src] != Some(d))
            .map(|edge| edge.bytes)
            .sum();
        self.costs.own_bytes[op] + received
    }

    pub(crate) fn has_room(&self, op: OpIdx, d: usize) -> bool {
        self.memory[d] + self.memory_cost(op, d) <= self.costs.capacity[d]
    }

    /// Devices with room for `op`; when none has, every device (the placement will be OOM) and
    /// the schedule stops claiming to fit. Fails once the deadline has passed.
    pub(crate) fn candidates(&mut self, op: OpIdx) -> Result<Vec<usize>> {
        self.within_deadline()?;
        let fit: Vec<usize> = (0..self.costs.devices)
            .filter(|&d| self.has_room(op, d))
            .collect();
        if fit.is_empty() {
            self.fits = false;
            Ok((0..self.costs.devices).collect())
        } else {
            Ok(fit)
        }
    }

    /// [`SearchError::OutOfTime`] once the costs' deadline has passed.
    pub(crate) fn within_deadline(&self) -> Result<()> {
        if crate::interrupt::past(self.costs.deadline) {
            return Err(SearchError::OutOfTime.into());
        }
        Ok(())
    }

    /// Start and finish of `op` on `d` under the policy.
    pub(crate) fn times(&self, op: OpIdx, d: usize, insertion: bool) -> (f64, f64) {
        let start = self.slot(op, d, self.data_ready(op, d), insertion);
        (start, start + self.costs.compute(op, d))
    }

    /// The device among `candidates` where `op` finishes first (ties: lower index).
    pub(crate) fn earliest_finish(
        &self,
        op: OpIdx,
        candidates: &[usize],
        insertion: bool,
    ) -> usize {
        let mut best = candidates[0];
        let mut best_finish = f64::INFINITY;
        for &d in candidates {
            let (_, f) = self.times(op, d, insertion);
            if f < best_finish {
                best = d;
                best_finish = f;
            }
        }
        best
    }

    /// Put `op` on `d`, as early as the policy allows.
    pub(crate) fn assign(&mut self, op: OpIdx, d: usize, insertion: bool) {
        let (start, finish) = self.times(op, d, insertion);
        let (_, planned) = self.transfers(op, d);
        for (u, _, end) in planned {
            let from = self.device[u].expect("predecessors are scheduled first");
            for &l in self.costs.cluster.route_links(from, d).iter() {
                self.link_free[l as usize] = end;
            }
            self.arrived.insert((u, d), end);
        }
        self.memory[d] += self.memory_cost(op, d);
        self.device[op] = Some(d);
        self.start[op] = start;
        self.finish[op] = finish;
        let busy = &mut self.busy[d];
        let at = busy.partition_point(|&(s, _)| s <= start);
        busy.insert(at, (start, finish));
    }

    /// Whether a unit of ops placed together (a fused cluster, a co-location group) fits on `d`
    /// by their own bytes.
    pub(crate) fn unit_has_room(&self, unit: &[OpIdx], d: usize) -> bool {
        let bytes: f64 = unit.iter().map(|&op| self.costs.own_bytes[op]).sum();
        self.memory[d] + bytes <= self.costs.capacity[d]
    }

    /// Earliest start of a unit on `d`: its inputs from already placed ops have arrived and `d`
    /// has an idle stretch as long as the whole unit.
    pub(crate) fn unit_start(&self, unit: &[OpIdx], d: usize) -> f64 {
        let g = self.p.graph;
        let mut ready: f64 = 0.0;
        for &op in unit {
            for &e in g.in_edges(op) {
                let edge = g.edges()[e];
                if let Some(from) = self.device[edge.src] {
                    let transfer = self.costs.cluster.transfer_us(from, d, edge.bytes);
                    ready = ready.max(self.finish[edge.src] + transfer);
                }
            }
        }
        self.gap_after(d, ready, self.unit_compute(unit, d))
    }

    /// [`Schedule::unit_start`] with the unit's inputs from other GPUs queued on their links as
    /// [`Schedule::assign`] will send them (a tensor already on `d` is not sent again), so the
    /// estimate matches the finish times placing the unit then records.
    pub(crate) fn unit_start_contended(&self, unit: &[OpIdx], d: usize) -> f64 {
        let (ready, _) = self.inputs_of(unit, d, true);
        self.gap_after(d, ready, self.unit_compute(unit, d))
    }

    pub(crate) fn unit_compute(&self, unit: &[OpIdx], d: usize) -> f64 {
        unit.iter().map(|&op| self.costs.compute(op, d)).sum()
    }

    /// Assign a unit's ops (given in a topological order) to `d`; the schedule stops claiming to
    /// fit if the conservative estimate (received inputs included) overflows `d`.
    pub(crate) fn place_unit(&mut self, unit: &[OpIdx], d: usize) {
        for &op in unit {
            self.assign(op, d, true);
        }
        if self.memory[d] > self.costs.capacity[d] {
            self.fits = false;
        }
    }

    /// The GPU with the most free memory (the best-effort target when nothing fits).
    pub(crate) fn most_free(&self) -> usize {
        (0..self.costs.devices)
            .max_by(|&a, &b| {
                let free = |d: usize| self.costs.capacity[d] - self.memory[d];
                free(a).total_cmp(&free(b)).then(b.cmp(&a))
            })
            .expect("there is a device")
    }

    pub(crate) fn makespan(&self) -> f64 {
        self.finish.iter().copied().fold(0.0, f64::max)
    }

    /// The strategy (one model-parallel group per used GPU) with the schedule's start times as
    /// execution order.
    pub(crate) fn into_placement(self, note: impl Into<String>) -> Placement {
        let devices: Vec<usize> = self
            .device
            .iter()
            .map(|d| d.expect("every op is scheduled"))
            .collect();
        let strategy = Strategy::from_op_devices("list schedule", &devices, self.costs.devices)
            .expect("a list schedule is a valid strategy");
        // Start time orders the GPUs' queues; the finish time breaks ties between a zero-length
        // op and the op it feeds that starts at the same instant.
        let order = self
            .start
            .iter()
            .zip(&self.finish)
            .map(|(&s, &f)| s + f * 1e-9)
            .collect();
        Placement {
            predicted_us: Some(self.makespan()),
            fits: Some(self.fits),
            simulated_us: None,
            strategy,
            order: Some(order),
            note: note.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;

    /// The pair classes give the mean and the worst transfer over every ordered pair of distinct
    /// GPUs, as a pass over all pairs does, on a cluster of mixed links and GPUs.
    #[test]
    fn pair_classes_give_the_mean_and_worst_transfer_of_all_pairs() {
        let cluster = crate::cluster::load_cluster(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/configs/tag-testbed.toml"
        ))
        .unwrap();
        let graph = crate::zoo::build("mlp", &crate::zoo::ZooOptions::default()).unwrap();
        let cost = CostModel::default();
        let p = Problem {
            graph: &graph,
            cluster: &cluster,
            cost: &cost,
        };
        let costs = Costs::new(&p, &Budget::default());
        let n = cluster.devices.len();
        let pairs: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| (0..n).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect();
        assert!(costs.pair_classes.len() > 1, "{:?}", costs.pair_classes);
        for bytes in [0.0, 1e3, 4e6, 1e9] {
            let each = pairs.iter().map(|&(a, b)| cluster.transfer_us(a, b, bytes));
            let mean = each.clone().sum::<f64>() / pairs.len() as f64;
            let worst = each.fold(0.0, f64::max);
            assert!((costs.mean_transfer(bytes) - mean).abs() <= 1e-9 * mean.max(1.0));
            assert_eq!(costs.max_transfer(bytes), worst);
        }
    }
}
