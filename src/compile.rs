//! The compiler (TAG §4.3.1): a graph plus a strategy becomes an [`ExecGraph`] of compute tasks
//! on GPUs, transfers on links and collectives, with the auxiliary work that keeps the
//! distributed graph equivalent to the original.
//!
//! Every op gets a *layout* from its group's decision:
//! - `Split`: replicas on each device, each on its batch share; outputs are batch slices
//!   (splittability `concat`).
//! - `Partial`: replicas on batch shares whose outputs are partial sums (splittability `sum`:
//!   weight gradients).
//! - `Full`: the whole op on each listed device (duplicates, model-parallel ops, ops that need
//!   whole inputs such as optimizer updates, parameters).
//!
//! Tensors move between layouts by the rules of §4.3.1: slices go where the consumer's batch
//! share overlaps the producer's (no Split op is needed: a batch slice of a batch-major tensor is
//! contiguous); a whole tensor is assembled from slices by a `Concat` on the consumer's device;
//! partial sums are aggregated by the producer group's option — ring AllReduce among the replicas,
//! or push to a parameter server, `AddN` there; a whole tensor is sent from the nearest device
//! holding it. Each tensor crosses to a device at most once, however many ops there consume it.
//! With the PS option, optimizer ops run on the group's parameter servers (round-robin) and the
//! updated parameters are pulled back by every other replica.

use std::collections::HashMap;
use std::rc::Rc;

use crate::cluster::{Cluster, GpuSpec};
use crate::cost::CostModel;
use crate::graph::{Graph, OpIdx, Phase, Splittability};
use crate::group::metis::partition_ops_with_memory;
use crate::sim::{ExecGraph, TaskId, TaskKind, TaskSpec};
use crate::strategy::{AllReducePacking, BatchSplit, ReplicationOption, Strategy};

/// What a task of the compiled graph is, for reports and traces. The task's `label` in the
/// [`ExecGraph`] is the original op it computes or whose tensor it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRole {
    /// A replica (or the single copy) of an original op.
    Op,
    /// A tensor (or a slice of it) sent between devices.
    Transfer,
    /// Assembling a whole tensor from batch slices.
    Concat,
    /// Summing partial tensors on a parameter server.
    AddN,
    /// Ring AllReduce of partial sums among the replicas.
    AllReduce,
    /// The AllReduce result held on one replica's device (zero time; keeps its memory counted).
    Hold,
    /// A parameter server sending an updated parameter back to a replica.
    Pull,
}

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
    pub op_devices: Vec<Vec<u32>>,
    /// Batch share of each replica (1 for whole-batch copies).
    pub op_shares: Vec<Vec<f64>>,
}

impl Compiled {
    /// The compute tasks (replicas) of an original op.
    pub fn tasks_of_op(&self, op: OpIdx) -> std::ops::Range<TaskId> {
        let first = self.op_first_task[op];
        first..first + self.op_devices[op].len() as TaskId
    }
}

/// Routes between every pair of devices, computed once per cluster.
#[derive(Debug, Clone)]
pub struct RouteTable {
    n: usize,
    links: Vec<Vec<u32>>,
    bandwidth: Vec<f64>,
    latency: Vec<f64>,
}

impl RouteTable {
    pub fn new(cluster: &Cluster) -> RouteTable {
        let n = cluster.devices.len();
        let mut t = RouteTable {
            n,
            links: Vec::with_capacity(n * n),
            bandwidth: Vec::with_capacity(n * n),
            latency: Vec::with_capacity(n * n),
        };
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    t.links.push(Vec::new());
                    t.bandwidth.push(f64::INFINITY);
                    t.latency.push(0.0);
                } else {
                    let route = cluster.path(a, b);
                    t.links
                        .push(route.links.iter().map(|&l| l as u32).collect());
                    t.bandwidth.push(route.bandwidth);
                    t.latency.push(route.latency_us);
                }
            }
        }
        t
    }

    pub fn links(&self, a: usize, b: usize) -> &[u32] {
        &self.links[a * self.n + b]
    }

    pub fn bandwidth(&self, a: usize, b: usize) -> f64 {
        self.bandwidth[a * self.n + b]
    }

    pub fn latency(&self, a: usize, b: usize) -> f64 {
        self.latency[a * self.n + b]
    }

    /// Latency plus bytes over the bottleneck bandwidth.
    pub fn transfer_us(&self, a: usize, b: usize, bytes: f64) -> f64 {
        if a == b {
            0.0
        } else {
            self.latency(a, b) + bytes / self.bandwidth(a, b)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LayoutKind {
    Split,
    Partial,
    Full,
}

/// Where an op runs: `devices[i]` with batch share `shares[i]` (1 for `Full`).
#[derive(Debug, Clone)]
struct Layout {
    kind: LayoutKind,
    devices: Vec<u32>,
    shares: Vec<f64>,
}

impl Layout {
    fn full(devices: Vec<u32>) -> Layout {
        let shares = vec![1.0; devices.len()];
        Layout {
            kind: LayoutKind::Full,
            devices,
            shares,
        }
    }

    fn position(&self, device: u32) -> Option<usize> {
        self.devices.iter().position(|&d| d == device)
    }

    /// Batch interval `[start, end)` of replica `i` as fractions of the batch.
    fn interval(&self, i: usize) -> (f64, f64) {
        let start: f64 = self.shares[..i].iter().sum();
        (start, start + self.shares[i])
    }
}

/// Compile `strategy` for `graph` on `cluster`.
pub fn compile(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &Strategy,
    cost: &CostModel,
) -> Compiled {
    let routes = RouteTable::new(cluster);
    compile_with_routes(graph, cluster, &routes, strategy, cost)
}

/// As [`compile`], reusing a route table (the search compiles many strategies per cluster).
pub fn compile_with_routes(
    graph: &Graph,
    cluster: &Cluster,
    routes: &RouteTable,
    strategy: &Strategy,
    cost: &CostModel,
) -> Compiled {
    compile_ordered(graph, cluster, routes, strategy, cost, None)
}

/// As [`compile_with_routes`], with an execution order: every task of op `u` (its replicas, and
/// the transfers, concats and collectives of its tensor) gets dispatch priority `priority[u]`,
/// which the simulator honours under [`crate::sim::Order::Priority`]. `None` leaves every
/// priority at 0 (FIFO placements).
pub fn compile_ordered(
    graph: &Graph,
    cluster: &Cluster,
    routes: &RouteTable,
    strategy: &Strategy,
    cost: &CostModel,
    priority: Option<&[f64]>,
) -> Compiled {
    let layouts = layouts(graph, cluster, strategy, cost)
        .into_iter()
        .map(Rc::new)
        .collect();
    let mut c = Compiler {
        graph,
        cluster,
        routes,
        strategy,
        cost,
        layouts,
        exec: ExecGraph::new(
            cluster.devices.iter().map(|d| d.memory_bytes).collect(),
            cluster.links.len(),
        ),
        roles: Vec::new(),
        first_task: vec![TaskId::MAX; graph.len()],
        whole_on: HashMap::new(),
        aggregated: HashMap::new(),
        ps_turn: vec![0; strategy.group_count()],
        is_gradient: gradient_producers(graph),
        priority,
        buckets: Vec::new(),
        bucket_of: HashMap::new(),
        bucket_holders: HashMap::new(),
    };
    // All replicas first, then the wiring: a packed AllReduce needs every gradient of its group.
    let order = graph.topological_order();
    for &op in &order {
        c.place_op(op);
    }
    for &op in &order {
        c.wire_inputs(op);
    }
    let (op_devices, op_shares) = c
        .layouts
        .into_iter()
        .map(|l| Rc::try_unwrap(l).unwrap_or_else(|shared| (*shared).clone()))
        .map(|l| (l.devices, l.shares))
        .unzip();
    Compiled {
        exec: c.exec,
        roles: c.roles,
        op_first_task: c.first_task,
        op_devices,
        op_shares,
    }
}

/// The layout of every op, from its group's decision.
fn layouts(graph: &Graph, cluster: &Cluster, strategy: &Strategy, cost: &CostModel) -> Vec<Layout> {
    let mp_device = model_parallel_assignment(graph, cluster, strategy, cost);
    let mut optimizer_turn = vec![0usize; strategy.group_count()];
    let mut out = Vec::with_capacity(graph.len());
    for (op_idx, op) in graph.ops().iter().enumerate() {
        let group = strategy.group_of(op_idx);
        let decision = strategy.decision(group);
        let devices: Vec<u32> = decision.devices.iter().map(|&d| d as u32).collect();
        let layout = match decision.option {
            ReplicationOption::ModelParallel => Layout::full(vec![mp_device[op_idx]]),
            ReplicationOption::Duplicate => Layout::full(devices),
            ReplicationOption::AllReduce | ReplicationOption::Ps => {
                let batched = op.scales_with_batch() && op.split != Splittability::None;
                if op.phase == Phase::Optimizer && decision.option == ReplicationOption::Ps {
                    // The parameter server of this update, round-robin over the group's devices.
                    let turn = optimizer_turn[group];
                    optimizer_turn[group] += 1;
                    Layout::full(vec![devices[turn % devices.len()]])
                } else if batched && devices.len() > 1 {
                    let shares = batch_shares(cluster, &devices, strategy.batch_split);
                    let kind = if op.split == Splittability::Sum {
                        LayoutKind::Partial
                    } else {
                        LayoutKind::Split
                    };
                    Layout {
                        kind,
                        devices,
                        shares,
                    }
                } else {
                    Layout::full(devices)
                }
            }
        };
        out.push(layout);
    }
    if strategy.sfb {
        apply_sfb(graph, cluster, strategy, cost, &mut out);
    }
    out
}

/// TAG's SFB double check: ops the SFB ILP duplicates for a replicated gradient run whole on
/// every device of their group, so the compiler broadcasts their inputs (the sufficient factors,
/// assembled by `Concat`) and the gradient needs no aggregation. A failed solve leaves the
/// strategy as it is.
fn apply_sfb(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &Strategy,
    cost: &CostModel,
    layouts: &mut [Layout],
) {
    let options = crate::sfb::SfbOptions::default();
    let Ok(decisions) = crate::sfb::check_strategy(graph, cluster, cost, strategy, &options) else {
        return;
    };
    for d in decisions.iter().filter(|d| d.use_sfb) {
        for &op in &d.duplicated {
            let group = strategy.decision(strategy.group_of(op));
            layouts[op] = Layout::full(group.devices.iter().map(|&x| x as u32).collect());
        }
    }
}

fn gradient_producers(graph: &Graph) -> Vec<bool> {
    let mut is = vec![false; graph.len()];
    for link in graph.gradients() {
        is[link.grad] = true;
    }
    is
}

/// Even shares, or shares proportional to each device's peak compute rate.
pub fn batch_shares(cluster: &Cluster, devices: &[u32], split: BatchSplit) -> Vec<f64> {
    match split {
        BatchSplit::Even => vec![1.0 / devices.len() as f64; devices.len()],
        BatchSplit::Proportional => {
            let speed: Vec<f64> = devices
                .iter()
                .map(|&d| cluster.devices[d as usize].gpu.fp32_tflops)
                .collect();
            let total: f64 = speed.iter().sum();
            speed.iter().map(|s| s / total).collect()
        }
    }
}

/// For model-parallel groups: each op's device. TAG §4.2 divides the group with METIS; we
/// balance compute (mean time over the group's devices) and memory (resident plus output bytes)
/// as two METIS constraints, parts going to devices in order. Should METIS fail, the group's ops
/// are cut in topological order into chunks of balanced compute.
fn model_parallel_assignment(
    graph: &Graph,
    cluster: &Cluster,
    strategy: &Strategy,
    cost: &CostModel,
) -> Vec<u32> {
    let mut device = vec![0u32; graph.len()];
    let order = graph.topological_order();
    for (group, decision) in strategy.decisions().iter().enumerate() {
        if decision.option != ReplicationOption::ModelParallel {
            continue;
        }
        let members: Vec<OpIdx> = order
            .iter()
            .copied()
            .filter(|&op| strategy.group_of(op) == group)
            .collect();
        let parts = decision.devices.len();
        let mut weights = vec![0.0; graph.len()];
        let mut memory = vec![0.0; graph.len()];
        for &op in &members {
            let o = graph.op(op);
            weights[op] = decision
                .devices
                .iter()
                .map(|&d| cost.compute_time_us(o, &cluster.devices[d].gpu, 1.0))
                .sum::<f64>()
                / parts as f64;
            memory[op] = o.resident_bytes + o.output_bytes;
        }
        let chunks = if parts > 1 {
            partition_ops_with_memory(graph, &weights, &memory, &members, parts, 0).ok()
        } else {
            None
        }
        .unwrap_or_else(|| topological_chunks(&members, &weights, parts));
        for (&op, &part) in members.iter().zip(&chunks) {
            device[op] = decision.devices[part as usize % parts] as u32;
        }
    }
    device
}

/// `ops` (in topological order) cut into `parts` consecutive chunks of balanced weight.
fn topological_chunks(ops: &[OpIdx], weights: &[f64], parts: usize) -> Vec<u32> {
    let total: f64 = ops
        .iter()
        .map(|&op| weights[op])
        .sum::<f64>()
        .max(f64::MIN_POSITIVE);
    let mut before = 0.0;
    ops.iter()
        .map(|&op| {
            let middle = before + weights[op] / 2.0;
            before += weights[op];
            (((middle / total) * parts as f64).floor() as usize).min(parts - 1) as u32
        })
        .collect()
}

struct Compiler<'a> {
    graph: &'a Graph,
    cluster: &'a Cluster,
    routes: &'a RouteTable,
    strategy: &'a Strategy,
    cost: &'a CostModel,
    /// Shared so a layout can be read while the compiler mutates itself.
    layouts: Vec<Rc<Layout>>,
    exec: ExecGraph,
    roles: Vec<TaskRole>,
    /// First replica task of each placed op.
    first_task: Vec<TaskId>,
    /// Task that makes op `u`'s whole tensor available on device `d`.
    whole_on: HashMap<(OpIdx, u32), TaskId>,
    /// Devices holding op `u`'s aggregated (summed) tensor, and the task providing it there.
    aggregated: HashMap<OpIdx, Vec<(u32, TaskId)>>,
    /// Next parameter server per group, for aggregations that are not optimizer inputs.
    ps_turn: Vec<usize>,
    /// Whether each op produces a gradient an optimizer applies.
    is_gradient: Vec<bool>,
    /// Per-op dispatch priority, copied onto every task labelled with the op.
    priority: Option<&'a [f64]>,
    /// Gradient buckets ([`AllReducePacking::Buckets`]): members of each, the bucket of each
    /// gradient, and the holders of each bucket's reduced buffer.
    buckets: Vec<Vec<OpIdx>>,
    bucket_of: HashMap<OpIdx, usize>,
    bucket_holders: HashMap<usize, Vec<(u32, TaskId)>>,
}

impl<'a> Compiler<'a> {
    fn gpu(&self, device: u32) -> &'a GpuSpec {
        &self.cluster.devices[device as usize].gpu
    }

    fn add(&mut self, role: TaskRole, mut spec: TaskSpec<'_>) -> TaskId {
        if let Some(p) = self.priority {
            spec.priority = p[spec.label as usize];
        }
        self.roles.push(role);
        self.exec.add_task(spec)
    }

    fn compute(
        &mut self,
        role: TaskRole,
        label: OpIdx,
        device: u32,
        duration: f64,
        out_bytes: f64,
    ) -> TaskId {
        self.add(
            role,
            TaskSpec {
                kind: TaskKind::Compute,
                duration,
                resources: &[device],
                out_device: device,
                out_bytes,
                priority: 0.0,
                label: label as u32,
            },
        )
    }

    /// A transfer of `bytes` from `from` to `to` after `after`. The receiver allocates the
    /// bytes, except for a parameter pull, which overwrites the resident copy.
    fn transfer(
        &mut self,
        role: TaskRole,
        label: OpIdx,
        after: TaskId,
        from: u32,
        to: u32,
        bytes: f64,
    ) -> TaskId {
        let out_bytes = if role == TaskRole::Pull { 0.0 } else { bytes };
        let links: Vec<u32> = self
            .routes
            .links(from as usize, to as usize)
            .iter()
            .map(|&l| self.exec.link_resource(l as usize))
            .collect();
        let duration = self.routes.transfer_us(from as usize, to as usize, bytes);
        let t = self.add(
            role,
            TaskSpec {
                kind: TaskKind::Transfer,
                duration,
                resources: &links,
                out_device: to,
                out_bytes,
                priority: 0.0,
                label: label as u32,
            },
        );
        self.exec.add_dep(after, t);
        t
    }

    /// Create the replicas of `op`.
    fn place_op(&mut self, op: OpIdx) {
        let o = self.graph.op(op);
        let layout = Rc::clone(&self.layouts[op]);
        let first = self.exec.len() as TaskId;
        for (i, &d) in layout.devices.iter().enumerate() {
            let share = if layout.kind == LayoutKind::Full {
                1.0
            } else {
                layout.shares[i]
            };
            let duration = self.cost.compute_time_us(o, self.gpu(d), share);
            let out_bytes = match (o.phase, layout.kind) {
                // A parameter's tensor is the resident variable itself.
                (Phase::Parameter, _) => 0.0,
                (_, LayoutKind::Split) => o.output_bytes * share,
                _ => o.output_bytes,
            };
            self.compute(TaskRole::Op, op, d, duration, out_bytes);
            self.exec.add_resident(d as usize, o.resident_bytes);
        }
        self.first_task[op] = first;
    }

    /// Feed every input of `op`'s replicas; after an optimizer update, pull parameters back.
    fn wire_inputs(&mut self, op: OpIdx) {
        for &e in self.graph.in_edges(op) {
            let edge = self.graph.edges()[e];
            self.wire(edge.src, op, edge.bytes);
        }
        if self.graph.op(op).phase == Phase::Optimizer {
            self.pull_parameters(op);
        }
    }

    fn task_of(&self, op: OpIdx, replica: usize) -> TaskId {
        debug_assert!(
            self.first_task[op] != TaskId::MAX,
            "ops are placed in topological order"
        );
        self.first_task[op] + replica as u32
    }

    /// Feed tensor `u → v` of `bytes` (at the full batch) to every replica of `v`.
    fn wire(&mut self, u: OpIdx, v: OpIdx, bytes: f64) {
        let consumer = Rc::clone(&self.layouts[v]);
        let producer_kind = self.layouts[u].kind;
        let producer_batched = producer_kind == LayoutKind::Split || self.is_batch_tensor(u);
        for (j, &d) in consumer.devices.iter().enumerate() {
            let task = self.task_of(v, j);
            if consumer.kind != LayoutKind::Full && producer_batched {
                self.feed_slice(u, &consumer, j, bytes, task);
            } else {
                let source = self.whole_on(u, d, bytes);
                self.exec.add_dep(source, task);
            }
        }
    }

    /// Whether `u`'s output has a batch dimension (so a batch-split consumer takes a slice).
    fn is_batch_tensor(&self, u: OpIdx) -> bool {
        let op = self.graph.op(u);
        op.scales_with_batch() && op.split == Splittability::Concat
    }

    /// Consumer replica `j` of `v` needs its batch slice of `u`'s tensor.
    fn feed_slice(&mut self, u: OpIdx, consumer: &Layout, j: usize, bytes: f64, task: TaskId) {
        let d = consumer.devices[j];
        let producer = Rc::clone(&self.layouts[u]);
        if producer.kind == LayoutKind::Full {
            // Slice a whole tensor held somewhere: local if possible, else from the nearest holder.
            if let Some(i) = producer.position(d) {
                let t = self.task_of(u, i);
                self.exec.add_dep(t, task);
            } else {
                let i = self.nearest(&producer.devices, d);
                let src = self.task_of(u, i);
                let slice = bytes * consumer.shares[j];
                let x = self.transfer(TaskRole::Transfer, u, src, producer.devices[i], d, slice);
                self.exec.add_dep(x, task);
            }
            return;
        }
        let (lo, hi) = consumer.interval(j);
        let mut pieces = Vec::new();
        for i in 0..producer.devices.len() {
            let (plo, phi) = producer.interval(i);
            let overlap = hi.min(phi) - lo.max(plo);
            if overlap <= 1e-12 {
                continue;
            }
            let src = self.task_of(u, i);
            if producer.devices[i] == d {
                pieces.push(src);
            } else {
                let b = bytes * overlap;
                pieces.push(self.transfer(TaskRole::Transfer, u, src, producer.devices[i], d, b));
            }
        }
        if pieces.len() == 1 {
            self.exec.add_dep(pieces[0], task);
        } else {
            let assembled = self.concat(u, d, bytes * consumer.shares[j], &pieces);
            self.exec.add_dep(assembled, task);
        }
    }

    /// A Concat on `device` of `pieces` into a tensor of `bytes`.
    fn concat(&mut self, u: OpIdx, device: u32, bytes: f64, pieces: &[TaskId]) -> TaskId {
        let duration = self.cost.kernel_us(self.gpu(device), 0.0, 2.0 * bytes);
        let t = self.compute(TaskRole::Concat, u, device, duration, bytes);
        for &p in pieces {
            self.exec.add_dep(p, t);
        }
        t
    }

    /// The task that makes `u`'s whole tensor available on `device` (cached per device).
    fn whole_on(&mut self, u: OpIdx, device: u32, bytes: f64) -> TaskId {
        if let Some(&t) = self.whole_on.get(&(u, device)) {
            return t;
        }
        let producer = Rc::clone(&self.layouts[u]);
        let t = match producer.kind {
            LayoutKind::Full => match producer.position(device) {
                Some(i) => self.task_of(u, i),
                None => {
                    let i = self.nearest(&producer.devices, device);
                    let src = self.task_of(u, i);
                    self.transfer(
                        TaskRole::Transfer,
                        u,
                        src,
                        producer.devices[i],
                        device,
                        bytes,
                    )
                }
            },
            LayoutKind::Split => {
                let pieces: Vec<TaskId> = (0..producer.devices.len())
                    .map(|i| {
                        let src = self.task_of(u, i);
                        let from = producer.devices[i];
                        if from == device {
                            src
                        } else {
                            let b = bytes * producer.shares[i];
                            self.transfer(TaskRole::Transfer, u, src, from, device, b)
                        }
                    })
                    .collect();
                self.concat(u, device, bytes, &pieces)
            }
            LayoutKind::Partial => {
                let holders = self.aggregate(u, device, bytes);
                match holders.iter().find(|h| h.0 == device) {
                    Some(&(_, t)) => t,
                    None => {
                        let devices: Vec<u32> = holders.iter().map(|h| h.0).collect();
                        let i = self.nearest(&devices, device);
                        let (from, src) = holders[i];
                        self.transfer(TaskRole::Transfer, u, src, from, device, bytes)
                    }
                }
            }
        };
        self.whole_on.insert((u, device), t);
        t
    }

    /// Sum `u`'s partial outputs by its group's option; the devices then holding the sum.
    /// `wanted_on` is the first consumer's device, the natural parameter server when it is one
    /// of the replicas.
    fn aggregate(&mut self, u: OpIdx, wanted_on: u32, bytes: f64) -> Vec<(u32, TaskId)> {
        if let Some(h) = self.aggregated.get(&u) {
            return h.clone();
        }
        let producer = Rc::clone(&self.layouts[u]);
        let group = self.strategy.group_of(u);
        let holders = match self.strategy.decision(group).option {
            ReplicationOption::Ps => {
                let ps = if producer.position(wanted_on).is_some() {
                    wanted_on
                } else {
                    let turn = self.ps_turn[group];
                    self.ps_turn[group] += 1;
                    producer.devices[turn % producer.devices.len()]
                };
                vec![(ps, self.push_and_sum(u, &producer, ps, bytes))]
            }
            // Packing is one bucket with no size limit.
            _ if self.strategy.allreduce == AllReducePacking::Packed && self.is_gradient[u] => {
                self.bucketed_all_reduce(group, u, f64::INFINITY)
            }
            _ if self.is_gradient[u]
                && let AllReducePacking::Buckets(cap) = self.strategy.allreduce =>
            {
                self.bucketed_all_reduce(group, u, cap as f64)
            }
            _ => {
                let ring = producer.devices.clone();
                let inputs: Vec<TaskId> = (0..ring.len()).map(|i| self.task_of(u, i)).collect();
                self.all_reduce(u, &ring, &inputs, bytes)
            }
        };
        self.aggregated.insert(u, holders.clone());
        holders
    }

    /// The AllReduce of the bucket holding gradient `u`: `group`'s gradients, in topological
    /// order (the order the backward pass makes them), cut into runs of at most `cap` bytes (a
    /// larger gradient is a bucket of its own). Each bucket's AllReduce waits for its gradients.
    fn bucketed_all_reduce(&mut self, group: usize, u: OpIdx, cap: f64) -> Vec<(u32, TaskId)> {
        if !self.bucket_of.contains_key(&u) {
            self.form_buckets(group, cap);
        }
        let bucket = self.bucket_of[&u];
        if let Some(h) = self.bucket_holders.get(&bucket) {
            return h.clone();
        }
        let members = self.buckets[bucket].clone();
        let ring = self.layouts[members[0]].devices.clone();
        let bytes: f64 = members
            .iter()
            .map(|&op| self.graph.op(op).output_bytes)
            .sum();
        let inputs: Vec<TaskId> = members
            .iter()
            .flat_map(|&op| (0..ring.len()).map(move |i| (op, i)))
            .map(|(op, i)| self.task_of(op, i))
            .collect();
        let holders = self.all_reduce(members[0], &ring, &inputs, bytes);
        self.bucket_holders.insert(bucket, holders.clone());
        holders
    }

    fn form_buckets(&mut self, group: usize, cap: f64) {
        let mut filled = 0.0;
        let mut open = false;
        for op in self.graph.topological_order() {
            if !(self.is_gradient[op]
                && self.strategy.group_of(op) == group
                && self.layouts[op].kind == LayoutKind::Partial)
            {
                continue;
            }
            let bytes = self.graph.op(op).output_bytes;
            if !open || filled + bytes > cap {
                self.buckets.push(Vec::new());
                filled = 0.0;
                open = true;
            }
            filled += bytes;
            self.buckets.last_mut().expect("a bucket is open").push(op);
            self.bucket_of.insert(op, self.buckets.len() - 1);
        }
    }

    /// Parameter-server aggregation: every replica pushes its partial sum to `ps`, which adds them.
    fn push_and_sum(&mut self, u: OpIdx, producer: &Layout, ps: u32, bytes: f64) -> TaskId {
        let mut parts = Vec::with_capacity(producer.devices.len());
        for (i, &d) in producer.devices.iter().enumerate() {
            let src = self.task_of(u, i);
            parts.push(if d == ps {
                src
            } else {
                self.transfer(TaskRole::Transfer, u, src, d, ps, bytes)
            });
        }
        let k = parts.len() as f64;
        let duration =
            self.cost
                .kernel_us(self.gpu(ps), (k - 1.0) * bytes / 4.0, (k + 1.0) * bytes);
        let t = self.compute(TaskRole::AddN, u, ps, duration, bytes);
        for p in parts {
            self.exec.add_dep(p, t);
        }
        t
    }

    /// Ring AllReduce of `bytes` among the devices of `ring` once all `inputs` are done; the
    /// reduced tensor stays on each device until its consumers are done. `u` labels the tasks.
    fn all_reduce(
        &mut self,
        u: OpIdx,
        ring: &[u32],
        inputs: &[TaskId],
        bytes: f64,
    ) -> Vec<(u32, TaskId)> {
        let n = ring.len();
        let mut links: Vec<u32> = Vec::new();
        let mut bottleneck = f64::INFINITY;
        let mut latency: f64 = 0.0;
        for k in 0..n {
            let (a, b) = (ring[k] as usize, ring[(k + 1) % n] as usize);
            bottleneck = bottleneck.min(self.routes.bandwidth(a, b));
            latency = latency.max(self.routes.latency(a, b));
            for &l in self.routes.links(a, b) {
                links.push(self.exec.link_resource(l as usize));
            }
        }
        links.sort_unstable();
        links.dedup();
        let duration = crate::cost::ring_allreduce_time_us(bytes, n, bottleneck, latency);
        let ar = self.add(
            TaskRole::AllReduce,
            TaskSpec {
                kind: TaskKind::Collective,
                duration,
                resources: &links,
                out_device: ring[0],
                out_bytes: 0.0,
                priority: 0.0,
                label: u as u32,
            },
        );
        for &input in inputs {
            self.exec.add_dep(input, ar);
        }
        // The reduced buffer lives on every replica until its consumers are done.
        let mut holders = Vec::with_capacity(n);
        for &d in ring {
            let hold = self.add(
                TaskRole::Hold,
                TaskSpec {
                    kind: TaskKind::Collective,
                    duration: 0.0,
                    resources: &[],
                    out_device: d,
                    out_bytes: bytes,
                    priority: 0.0,
                    label: u as u32,
                },
            );
            self.exec.add_dep(ar, hold);
            holders.push((d, hold));
        }
        holders
    }

    /// After a PS-style update, replicas of the parameter elsewhere pull the new value.
    fn pull_parameters(&mut self, opt: OpIdx) {
        let opt_layout = Rc::clone(&self.layouts[opt]);
        for &e in self.graph.in_edges(opt) {
            let edge = self.graph.edges()[e];
            if self.graph.op(edge.src).phase != Phase::Parameter {
                continue;
            }
            let params = Rc::clone(&self.layouts[edge.src]);
            for &d in &params.devices {
                if opt_layout.position(d).is_some() {
                    continue;
                }
                let i = self.nearest(&opt_layout.devices, d);
                let src = self.task_of(opt, i);
                self.transfer(
                    TaskRole::Pull,
                    edge.src,
                    src,
                    opt_layout.devices[i],
                    d,
                    edge.bytes,
                );
            }
        }
    }

    /// Index in `candidates` of the device with the fastest route to `to` (ties: first).
    fn nearest(&self, candidates: &[u32], to: u32) -> usize {
        let mut best = 0;
        let mut best_bw = f64::NEG_INFINITY;
        for (i, &c) in candidates.iter().enumerate() {
            let bw = self.routes.bandwidth(c as usize, to as usize);
            if bw > best_bw {
                best = i;
                best_bw = bw;
            }
        }
        best
    }
}
