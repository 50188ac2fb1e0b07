//! The compiler proper: places every op's replicas and wires tensors between layouts.

use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::compiled::{Compiled, PipelineOps};
use super::compute_bound::{compute_exceeds, replica_durations};
use super::device_classes::DeviceClasses;
use super::layout::{Layout, LayoutKind, gradient_producers, layouts};
use super::pipeline::{OrderBlock, expand};
use super::task_role::TaskRole;
use crate::cluster::{Cluster, GpuSpec};
use crate::cost::CostModel;
use crate::graph::{Graph, OpIdx, Phase};
use crate::problem::Problem;
use crate::sim::{ExecGraph, TaskId, TaskKind, TaskSpec, deadline};
use crate::strategy::Strategy;

/// Which replicas the compiler emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// One per device class where that is exact ([`super::device_classes`]), with alike links merged.
    ByClass,
    /// Every replica and every link: for traces, which show every GPU and link.
    Every,
}

/// How to compile: an execution order, if any, and which replicas to emit.
#[derive(Debug, Clone, Copy)]
pub struct CompileOptions<'a> {
    /// With an execution order, every task of op `u` (its replicas, and the transfers, concats
    /// and collectives of its tensor) gets dispatch priority `priority[u]`, which the simulator
    /// honours under [`crate::sim::Order::Priority`]; `None` leaves every priority at 0 (FIFO
    /// placements).
    pub priority: Option<&'a [f64]>,
    /// Both kinds of replicas simulate alike.
    pub replicas: Replicas,
}

impl CompileOptions<'_> {
    /// No execution order, one replica per device class.
    pub const FIFO_BY_CLASS: CompileOptions<'static> = CompileOptions {
        priority: None,
        replicas: Replicas::ByClass,
    };
    /// No execution order, every replica and link (for traces).
    pub const FIFO_EVERY_REPLICA: CompileOptions<'static> = CompileOptions {
        priority: None,
        replicas: Replicas::Every,
    };
}

/// Compile `strategy` for the problem's graph on its cluster. Its model-parallel groups must be
/// placed ([`crate::model_parallel::decided`]): the compiler applies decisions, it makes none.
pub fn compile(p: &Problem, strategy: &Strategy, how: CompileOptions) -> Compiled {
    compile_within(p, strategy, how, f64::INFINITY)
        .expect("no compilation is past an infinite limit")
}

/// [`compile`], or `None` when a bound from the layouts alone shows every schedule past
/// `limit_us` ([`super::compute_bound`]): a caller asking only "faster than this?" has its answer
/// before the execution graph is built. `None` too once this thread's wall-clock
/// [`deadline`] has passed.
pub(crate) fn compile_within(
    p: &Problem,
    strategy: &Strategy,
    how: CompileOptions,
    limit_us: f64,
) -> Option<Compiled> {
    if strategy.pipeline.is_some() {
        // The expansion has no pipeline: this recursion runs once.
        let x = expand(p.graph, strategy, how.priority)?;
        let expanded = Problem {
            graph: &x.graph,
            ..*p
        };
        let how = CompileOptions {
            priority: x.priority.as_deref(),
            ..how
        };
        let mut compiled = compile_within(&expanded, &x.strategy, how, limit_us)?;
        add_schedule(&mut compiled, &x.order);
        compiled.pipeline = Some(PipelineOps {
            graph: x.graph,
            origin: x.origin,
        });
        return Some(compiled);
    }
    let layouts = layouts(p.graph, p.cluster, strategy);
    let classes = match how.replicas {
        Replicas::ByClass => DeviceClasses::of(p.cluster, strategy, &layouts),
        Replicas::Every => None,
    };
    let restricted = classes.as_ref().map(|c| c.restrict(&layouts));
    // A class's members run its representative's ops on the same shares, so the
    // representatives' compute bounds theirs (data parallelism over 1,024 GPUs: two GPUs summed).
    let bounded = restricted.as_deref().unwrap_or(&layouts);
    if compute_exceeds(p.graph, p.cluster, p.cost, bounded, limit_us) {
        return None;
    }
    let target = Target {
        problem: p,
        strategy,
        priority: how.priority,
    };
    let by_class = classes
        .zip(restricted)
        .and_then(|(classes, restricted)| compile_layouts(&target, restricted, Some(classes)));
    let mut compiled = match by_class {
        Some(compiled) => compiled,
        None if deadline::passed() => return None,
        // A compilation of every replica has no symmetry to break: `None` only at the deadline.
        None => compile_layouts(&target, layouts, None)?,
    };
    if how.replicas == Replicas::ByClass {
        compiled.link_stand_in = Some(compiled.exec.merge_alike_links());
    }
    Some(compiled)
}

/// Blocks of at most this many op pairs become dependencies pair by pair; larger ones go
/// through zero-time gates, whose dependencies grow with the sum of the block's sides rather than
/// their product.
const GATE_ABOVE_PAIRS: usize = 4096;

/// The schedule's order between the expanded ops as order dependencies between their tasks:
/// replica by replica when both ops run on the same devices, else every replica before every one.
/// A large block whose ops all run on the same devices gets one gate per replica, which is the
/// same order; a large block over different devices gets one gate for all, which also orders
/// its same-device pairs across replicas (slightly stricter than pair by pair).
fn add_schedule(compiled: &mut Compiled, order: &[OrderBlock]) {
    for block in order {
        if block.before.len() * block.after.len() <= GATE_ABOVE_PAIRS {
            for &before in &block.before {
                for &after in &block.after {
                    order_pair(compiled, before, after);
                }
            }
        } else {
            order_through_gates(compiled, block);
        }
    }
}

/// `after`'s tasks wait for `before`'s.
fn order_pair(compiled: &mut Compiled, before: OpIdx, after: OpIdx) {
    let (a, b) = (compiled.tasks_of_op(before), compiled.tasks_of_op(after));
    if compiled.op_devices[before] == compiled.op_devices[after] {
        for (ta, tb) in a.zip(b) {
            compiled.exec.add_order_dep(ta, tb);
        }
    } else {
        for ta in a {
            for tb in b.clone() {
                compiled.exec.add_order_dep(ta, tb);
            }
        }
    }
}

/// A block's order through zero-time gates: one per replica when every op of the block runs
/// on the same devices, else one for all.
fn order_through_gates(compiled: &mut Compiled, block: &OrderBlock) {
    let first = block.before[0];
    let devices = Arc::clone(&compiled.op_devices[first]);
    let same = block
        .before
        .iter()
        .chain(&block.after)
        .all(|&op| compiled.op_devices[op] == devices);
    let lanes: Vec<Option<usize>> = if same {
        (0..devices.len()).map(Some).collect()
    } else {
        vec![None]
    };
    for lane in lanes {
        let gate = compiled.exec.add_task(TaskSpec {
            kind: TaskKind::Collective,
            duration: 0.0,
            resources: &[],
            out_device: devices[lane.unwrap_or(0)],
            out_bytes: 0.0,
            priority: 0.0,
            label: first as u32,
        });
        compiled.roles.push(TaskRole::Gate);
        let tasks = |compiled: &Compiled, op: OpIdx| {
            let all = compiled.tasks_of_op(op);
            match lane {
                Some(r) => {
                    let t = all.start + r as TaskId;
                    t..t + 1
                }
                None => all,
            }
        };
        for &op in &block.before {
            for t in tasks(compiled, op) {
                compiled.exec.add_order_dep(t, gate);
            }
        }
        for &op in &block.after {
            for t in tasks(compiled, op) {
                compiled.exec.add_order_dep(gate, t);
            }
        }
    }
}

/// What one compilation works on: the problem, the strategy and its execution order.
struct Target<'a> {
    problem: &'a Problem<'a>,
    strategy: &'a Strategy,
    priority: Option<&'a [f64]>,
}

/// Compile with `layouts`. With `classes` (the layouts restricted to representatives), `None` as
/// soon as a task breaks the classes' symmetry, so the caller compiles every replica instead
/// having wasted no more than the ops wired so far.
fn compile_layouts(
    target: &Target<'_>,
    layouts: Vec<Rc<Layout>>,
    classes: Option<DeviceClasses>,
) -> Option<Compiled> {
    let Target {
        problem,
        strategy,
        priority,
    } = *target;
    let Problem {
        graph,
        cluster,
        cost,
    } = *problem;
    let mut exec = ExecGraph::new(
        cluster.devices.iter().map(|d| d.memory_bytes).collect(),
        cluster.links.len(),
    );
    for link in &cluster.links {
        exec.set_link_lanes(link.index, link.lanes);
    }
    exec.set_runtime_memory(cost.runtime.context_bytes, cost.runtime.allocator_headroom);
    let tasks = expected_tasks(&layouts);
    exec.reserve(tasks, tasks);
    let mut c = Compiler {
        graph,
        cluster,
        strategy,
        cost,
        layouts,
        exec,
        roles: Vec::with_capacity(tasks),
        first_task: vec![TaskId::MAX; graph.len()],
        whole_on: FxHashMap::default(),
        slice_on: FxHashMap::default(),
        copies: FxHashMap::default(),
        aggregated: FxHashMap::default(),
        ps_turn: vec![0; strategy.group_count()],
        is_gradient: gradient_producers(graph),
        priority,
        buckets: Vec::new(),
        bucket_of: FxHashMap::default(),
        bucket_holders: FxHashMap::default(),
        asymmetric: false,
    };
    let broken = |c: &Compiler| classes.is_some() && c.asymmetric;
    let late = |i: usize| i.is_multiple_of(deadline::ASK_EVERY) && deadline::passed();
    // All replicas first, then the wiring: a packed AllReduce needs every gradient of its group.
    let order = graph.topological_order();
    for (i, &op) in order.iter().enumerate() {
        if late(i) {
            return None;
        }
        c.place_op(op);
    }
    for (i, &op) in order.iter().enumerate() {
        if broken(&c) || late(i) {
            return None;
        }
        c.wire_inputs(op);
    }
    if broken(&c) {
        return None;
    }
    let (op_devices, op_shares) = c
        .layouts
        .into_iter()
        .map(|l| (Arc::clone(&l.devices), Arc::clone(&l.shares)))
        .unzip();
    let compiled = Compiled {
        exec: c.exec,
        roles: c.roles,
        op_first_task: c.first_task,
        op_devices,
        op_shares,
        classes,
        link_stand_in: None,
        pipeline: None,
    };
    Some(compiled)
}

/// About how many tasks a compilation with `layouts` adds: one per replica of each op, and a
/// quarter more for the transfers and collectives that wire them (most tasks take one resource).
fn expected_tasks(layouts: &[Rc<Layout>]) -> usize {
    let replicas: usize = layouts.iter().map(|l| l.devices.len()).sum();
    replicas + replicas / 4
}

pub(super) struct Compiler<'a> {
    pub(super) graph: &'a Graph,
    pub(super) cluster: &'a Cluster,
    pub(super) strategy: &'a Strategy,
    pub(super) cost: &'a CostModel,
    /// Shared so a layout can be read while the compiler mutates itself.
    pub(super) layouts: Vec<Rc<Layout>>,
    pub(super) exec: ExecGraph,
    pub(super) roles: Vec<TaskRole>,
    /// First replica task of each placed op.
    pub(super) first_task: Vec<TaskId>,
    /// Task that makes op `u`'s whole tensor available on device `d`.
    pub(super) whole_on: FxHashMap<(OpIdx, u32), TaskId>,
    /// Task that makes a batch slice of op `u`'s tensor available on device `d`, keyed by the
    /// slice's bounds and the tensor's bytes (as bits): the consumers on `d` that take that
    /// slice share one copy.
    pub(super) slice_on: FxHashMap<(OpIdx, u32, [u64; 3]), TaskId>,
    /// Devices a whole-tensor op's output was sent to, and the transfer that brought it there.
    pub(super) copies: FxHashMap<OpIdx, Vec<(u32, TaskId)>>,
    /// Devices holding op `u`'s aggregated (summed) tensor, and the task providing it there.
    pub(super) aggregated: FxHashMap<OpIdx, Vec<(u32, TaskId)>>,
    /// Next parameter server per group, for aggregations that are not optimizer inputs.
    pub(super) ps_turn: Vec<usize>,
    /// Whether each op produces a gradient an optimizer applies.
    pub(super) is_gradient: Vec<bool>,
    /// Per-op dispatch priority, copied onto every task labelled with the op.
    pub(super) priority: Option<&'a [f64]>,
    /// Gradient buckets ([`AllReducePacking::Buckets`]): members of each, the bucket of each
    /// gradient, and the holders of each bucket's reduced buffer.
    pub(super) buckets: Vec<Vec<OpIdx>>,
    pub(super) bucket_of: FxHashMap<OpIdx, usize>,
    pub(super) bucket_holders: FxHashMap<usize, Vec<(u32, TaskId)>>,
    /// Whether a task joins particular devices ([`TaskRole::keeps_device_classes`]) or a consumer
    /// took batch slices by interval (intervals need every replica): a representative-only
    /// compilation that does is not exact.
    pub(super) asymmetric: bool,
}

impl<'a> Compiler<'a> {
    pub(super) fn gpu(&self, device: u32) -> &'a GpuSpec {
        &self.cluster.devices[device as usize].gpu
    }

    /// A task taking one lane of each of its resources.
    pub(super) fn add(&mut self, role: TaskRole, spec: TaskSpec<'_>) -> TaskId {
        self.add_with_lanes(role, spec, None)
    }

    /// A task taking `lanes[i]` lanes of `spec.resources[i]` (one of each with `None`), with the
    /// op's priority and its role recorded.
    pub(super) fn add_with_lanes(
        &mut self,
        role: TaskRole,
        mut spec: TaskSpec<'_>,
        lanes: Option<&[u32]>,
    ) -> TaskId {
        if let Some(p) = self.priority {
            spec.priority = p[spec.label as usize];
        }
        self.asymmetric |= !role.keeps_device_classes();
        self.roles.push(role);
        match lanes {
            Some(lanes) => self.exec.add_task_with_lanes(spec, lanes),
            None => self.exec.add_task(spec),
        }
    }

    pub(super) fn compute(
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
    pub(super) fn transfer(
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
            .cluster
            .route_links(from as usize, to as usize)
            .iter()
            .map(|&l| self.exec.link_resource(l as usize))
            .collect();
        let duration = self.cluster.transfer_us(from as usize, to as usize, bytes);
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
        let host_us = self.cost.host.per_op_us(o.phase);
        for (d, share, duration) in replica_durations(self.cluster, self.cost, o, &layout) {
            let out_bytes = match (o.phase, layout.kind) {
                // A parameter's tensor is the resident variable itself.
                (Phase::Parameter, _) => 0.0,
                (_, LayoutKind::Split) => o.output_bytes * share,
                _ => o.output_bytes,
            };
            let t = self.compute(TaskRole::Op, op, d, duration, out_bytes);
            self.exec.set_host_us(t, host_us);
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

    pub(super) fn task_of(&self, op: OpIdx, replica: usize) -> TaskId {
        debug_assert!(
            self.first_task[op] != TaskId::MAX,
            "ops are placed in topological order"
        );
        self.first_task[op] + replica as u32
    }

    /// Feed tensor `u → v` of `bytes` (at the full batch) to every replica of `v`.
    fn wire(&mut self, u: OpIdx, v: OpIdx, bytes: f64) {
        let consumer = Rc::clone(&self.layouts[v]);
        let producer = &self.layouts[u];
        let producer_batched = producer.kind == LayoutKind::Split || self.is_batch_tensor(u);
        // Replica j of a split producer on the consumer's devices and shares holds exactly the
        // slice replica j of the consumer needs (the common case: one data-parallel group). A
        // partial sum feeding a partial sum on the same replicas is added replica by replica
        // (a sum-split op of partial sums is linear: a tied weight's gradient terms, a pipeline's
        // gradient accumulation) and reduced once, after the consumer.
        let same_replicas = Rc::ptr_eq(producer, &consumer)
            || (producer.devices == consumer.devices && producer.shares == consumer.shares);
        let aligned = same_replicas
            && match producer.kind {
                LayoutKind::Split => consumer.kind != LayoutKind::Full,
                LayoutKind::Partial => consumer.kind == LayoutKind::Partial,
                LayoutKind::Full => false,
            };
        for (j, &d) in consumer.devices.iter().enumerate() {
            let task = self.task_of(v, j);
            if aligned && consumer.shares[j] > 1e-12 {
                let src = self.task_of(u, j);
                self.exec.add_dep(src, task);
            } else if consumer.kind != LayoutKind::Full && producer_batched {
                self.feed_slice(u, &consumer, j, bytes, task);
            } else {
                let source = self.whole_on(u, d, bytes);
                self.exec.add_dep(source, task);
            }
        }
    }

    /// Whether `u`'s output has a batch dimension (so a batch-split consumer takes a slice).
    fn is_batch_tensor(&self, u: OpIdx) -> bool {
        self.graph.op(u).carries_batch()
    }

    /// Consumer replica `j` of `v` needs its batch slice of `u`'s tensor. The slice is brought
    /// to its device once, whatever number of consumers there read it (a residual stream read by
    /// a block's first op and by the skip connection crosses a pipeline's cut once).
    fn feed_slice(&mut self, u: OpIdx, consumer: &Layout, j: usize, bytes: f64, task: TaskId) {
        let d = consumer.devices[j];
        let (lo, hi) = consumer.interval(j);
        let key = (u, d, [lo, hi, bytes].map(f64::to_bits));
        let source = match self.slice_on.get(&key) {
            Some(&t) => t,
            None => {
                let t = self.slice_source(u, consumer, j, bytes);
                self.slice_on.insert(key, t);
                t
            }
        };
        self.exec.add_dep(source, task);
    }

    /// The task providing consumer replica `j`'s batch slice of `u`'s tensor on its device: the
    /// producer's replica there, a transfer, or a Concat of the pieces ([`Self::feed_slice`]).
    fn slice_source(&mut self, u: OpIdx, consumer: &Layout, j: usize, bytes: f64) -> TaskId {
        let d = consumer.devices[j];
        let producer = Rc::clone(&self.layouts[u]);
        if producer.kind == LayoutKind::Full {
            // Slice a whole tensor held somewhere: local if possible, else from the nearest holder.
            if let Some(i) = producer.position(d) {
                return self.task_of(u, i);
            }
            let i = self.nearest(&producer.devices, d);
            let src = self.task_of(u, i);
            let slice = bytes * consumer.shares[j];
            return self.transfer(TaskRole::Transfer, u, src, producer.devices[i], d, slice);
        }
        self.asymmetric = true;
        let (lo, hi) = consumer.interval(j);
        let mut pieces = Vec::new();
        for i in producer.replicas_over(lo, hi) {
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
            pieces[0]
        } else {
            self.concat(u, d, bytes * consumer.shares[j], &pieces)
        }
    }

    /// A Concat on `device` of `pieces` into a tensor of `bytes`.
    pub(super) fn concat(
        &mut self,
        u: OpIdx,
        device: u32,
        bytes: f64,
        pieces: &[TaskId],
    ) -> TaskId {
        let duration = self.cost.kernel_us(self.gpu(device), 0.0, 2.0 * bytes);
        let t = self.compute(TaskRole::Concat, u, device, duration, bytes);
        for &p in pieces {
            self.exec.add_dep(p, t);
        }
        t
    }

    /// The task that makes `u`'s whole tensor available on `device` (cached per device).
    pub(super) fn whole_on(&mut self, u: OpIdx, device: u32, bytes: f64) -> TaskId {
        if let Some(&t) = self.whole_on.get(&(u, device)) {
            return t;
        }
        let producer = Rc::clone(&self.layouts[u]);
        let t = match producer.kind {
            LayoutKind::Full => match producer.position(device) {
                Some(i) => self.task_of(u, i),
                None => {
                    let replicas: Vec<(u32, TaskId)> = (0..producer.devices.len())
                        .map(|i| (producer.devices[i], self.task_of(u, i)))
                        .collect();
                    self.send_from_nearest(u, replicas, device, bytes)
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
                    None => self.send_from_nearest(u, holders, device, bytes),
                }
            }
        };
        self.whole_on.insert((u, device), t);
        t
    }
    /// `u`'s whole tensor sent to `device` from the nearest of `holders` or of the devices it was
    /// sent to already (a broadcast tree: one copy crosses to a machine, its GPUs share it over
    /// their fast links); the copy is remembered for later sends.
    fn send_from_nearest(
        &mut self,
        u: OpIdx,
        mut holders: Vec<(u32, TaskId)>,
        device: u32,
        bytes: f64,
    ) -> TaskId {
        holders.extend(self.copies.get(&u).into_iter().flatten().copied());
        let devices: Vec<u32> = holders.iter().map(|h| h.0).collect();
        let (from, src) = holders[self.nearest(&devices, device)];
        let t = self.transfer(TaskRole::Transfer, u, src, from, device, bytes);
        self.copies.entry(u).or_default().push((device, t));
        t
    }

    /// Index in `candidates` of the device with the fastest route to `to` (ties: first).
    pub(super) fn nearest(&self, candidates: &[u32], to: u32) -> usize {
        let mut best = 0;
        let mut best_bw = f64::NEG_INFINITY;
        for (i, &c) in candidates.iter().enumerate() {
            let bw = self.cluster.bandwidth(c as usize, to as usize);
            if bw > best_bw {
                best = i;
                best_bw = bw;
            }
        }
        best
    }
}
