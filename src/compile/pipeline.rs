//! A pipeline compiled as its exact equivalent without one: the graph with a copy of every
//! batch-dependent op per micro-batch, the gradients accumulated over the micro-batches, and the
//! schedule's order as order dependencies between the copies on each stage.
//!
//! - Copies: an input, forward or backward op that depends on the batch (an input, or an op fed by
//!   a copied op) gets one copy per micro-batch, costed as the graph re-batched to the
//!   micro-batch ([`crate::graph::rebatch`]: FLOPs, traffic and batch-carrying bytes divided by the
//!   micro-batch count). Parameters, optimizer updates and the ops that only read parameters stay
//!   single and feed every copy.
//! - Gradients: each micro-batch's weight gradient is a full-size partial sum; a chain of
//!   `GradAccumulate` ops adds them as they come (as autograd accumulates into `.grad`, so two
//!   buffers are alive, not `m`), and the last one feeds the optimizer. It keeps the gradient's
//!   splittability, so a data-parallel stage synchronises it once, after the last micro-batch.
//! - Order on each stage `s` of `p`, micro-batch `k` of `m`: forwards in micro-batch order, and
//!   backwards too; GPipe starts no backward before the last forward (a flush); 1F1B starts the
//!   forward of micro-batch `k ≥ p − s` only after the backward of `k − (p − s)`. Order
//!   dependencies hold no memory ([`crate::sim::ExecGraph::add_order_dep`]): activations live
//!   exactly until their backward consumers run, so the simulator's peak memory counts the
//!   micro-batches each schedule keeps in flight.

use std::sync::{Arc, Mutex};

use crate::graph::{Graph, GraphBuilder, Op, OpIdx, Phase, Splittability, rebatch};
use crate::sim::deadline;
use crate::strategy::{Pipeline, Schedule, Strategy};

/// The expanded graph and what it came from.
pub(super) struct Expansion {
    pub(super) graph: Arc<Graph>,
    /// The strategy on the expanded graph (each op in its original's group; no pipeline).
    pub(super) strategy: Strategy,
    pub(super) priority: Option<Vec<f64>>,
    /// Original op of each expanded op.
    pub(super) origin: Arc<[OpIdx]>,
    /// The schedule's order on each stage: every op of a block's `before` ahead of every op of
    /// its `after`.
    pub(super) order: Vec<OrderBlock>,
}

/// Where an original op went.
#[derive(Clone)]
enum Copies {
    /// Not batch-dependent: one op, shared by every micro-batch.
    Single(OpIdx),
    /// One per micro-batch, and the op holding the sum over micro-batches (the last
    /// accumulation; the only copy when there is one micro-batch).
    PerMicroBatch { first: OpIdx, summed: OpIdx },
}

/// The part of an expansion that depends only on the graph and the micro-batch count, not on the
/// stages: the copies and their wiring.
struct Copied {
    graph: Arc<Graph>,
    origin: Arc<[OpIdx]>,
    /// Micro-batch of each expanded op (none for the ops every micro-batch shares).
    micro_batch: Vec<Option<usize>>,
    copies: Vec<Copies>,
}

/// (graph identity, batch size, micro-batch count).
type CopiesKey = (u64, u32, u32);

/// The copies built most recently, newest first, by (graph identity, batch size, micro-batch
/// count): a search simulates many pipelines of one graph at a few micro-batch counts, and
/// building, wiring and validating the copies was a sixth of each simulation (bert-large on TAG's
/// cloud). A few are kept: each is the size of the graph times its micro-batch count.
static RECENT: Mutex<Vec<(CopiesKey, Arc<Copied>)>> = Mutex::new(Vec::new());
const RECENT_KEPT: usize = 4;

/// Expand `graph` under `strategy`'s pipeline (which it must have); `None` once this thread's
/// [`deadline`] has passed (the copies of a 10⁵-op graph for eight micro-batches take seconds).
pub(super) fn expand(
    graph: &Graph,
    strategy: &Strategy,
    priority: Option<&[f64]>,
) -> Option<Expansion> {
    let pipeline = strategy
        .pipeline
        .as_ref()
        .expect("expand is for strategies with a pipeline");
    let m = pipeline.micro_batches as usize;
    let c = copied(graph, pipeline.micro_batches)?;
    let order = schedule_order(&c.graph, strategy, pipeline, &c.origin, &c.micro_batch);
    let op_group = c
        .origin
        .iter()
        .map(|&o| strategy.group_of(o) as u32)
        .collect();
    let sfb = expanded_ops(&strategy.sfb_duplicated, &c.copies, m);
    let mut expanded = strategy.regrouped(op_group, sfb);
    if !strategy.model_parallel_devices.is_empty() {
        // Every copy of a model-parallel op runs where the op runs.
        let devices = &strategy.model_parallel_devices;
        expanded.model_parallel_devices = c.origin.iter().map(|&o| devices[o]).collect();
    }
    Some(Expansion {
        strategy: expanded,
        priority: priority.map(|p| c.origin.iter().map(|&o| p[o]).collect()),
        graph: Arc::clone(&c.graph),
        origin: Arc::clone(&c.origin),
        order,
    })
}

/// The copies of `graph` for `m` micro-batches, from [`RECENT`] or built (and kept there); `None`
/// when the [`deadline`] passes while they are built.
fn copied(graph: &Graph, m: u32) -> Option<Arc<Copied>> {
    let key = (graph.identity(), graph.batch_size, m);
    let recent = || {
        RECENT
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some((_, c)) = recent().iter().find(|(k, _)| *k == key) {
        return Some(Arc::clone(c));
    }
    // Built outside the lock: threads expanding other counts do not wait. Two threads may build
    // the same copies at once; they are equal, and the second is not kept twice.
    let built = Arc::new(build_copies(graph, m as usize)?);
    let mut kept = recent();
    if !kept.iter().any(|(k, _)| *k == key) {
        kept.insert(0, (key, Arc::clone(&built)));
        kept.truncate(RECENT_KEPT);
    }
    Some(built)
}

fn build_copies(graph: &Graph, m: usize) -> Option<Copied> {
    let micro = rebatch(graph, graph.batch_size / m as u32, &graph.name)
        .expect("a pipeline's micro-batch count divides the batch size");
    let copied = batch_dependent(graph);
    let mut b = GraphBuilder::new();
    let mut origin = Vec::new();
    let mut copies = Vec::with_capacity(graph.len());
    let mut micro_batch = Vec::new();
    let mut add = |b: &mut GraphBuilder, op: Op, from: OpIdx, k: Option<usize>| {
        origin.push(from);
        micro_batch.push(k);
        b.add_op(op)
    };
    for (i, op) in graph.ops().iter().enumerate() {
        if i % deadline::ASK_EVERY == 0 && deadline::passed() {
            return None;
        }
        if !copied[i] {
            copies.push(Copies::Single(add(&mut b, op.clone(), i, None)));
            continue;
        }
        let first = b.len();
        for k in 0..m {
            let mut c = micro.op(i).clone();
            c.name = format!("{}#mb{k}", op.name);
            add(&mut b, c, i, Some(k));
        }
        let mut summed = first;
        if op.split == Splittability::Sum && feeds_unbatched(graph, &copied, i) {
            for k in 1..m {
                let acc = add(&mut b, accumulation(op, k), i, Some(k));
                b.add_edge(summed, acc, op.output_bytes);
                b.add_edge(first + k, acc, op.output_bytes);
                summed = acc;
            }
        } else {
            summed = first + m - 1;
        }
        copies.push(Copies::PerMicroBatch { first, summed });
    }
    wire_edges(graph, &micro, &copies, m, &mut b);
    // Validating the expansion is a third of its cost.
    if deadline::passed() {
        return None;
    }
    let expanded = b
        .finish(&graph.name, &graph.name, graph.batch_size / m as u32)
        .expect("an expansion of a valid graph is valid");
    Some(Copied {
        graph: Arc::new(expanded),
        origin: origin.into(),
        micro_batch,
        copies,
    })
}

/// Whether each op depends on the batch: an input, or a forward or backward op fed by one. A
/// linear op of partial sums whose own work does not scale with the batch (the add of a tied
/// weight's gradient terms) is applied once, to the sums over the micro-batches, not per
/// micro-batch: the same result with one tensor sent where there were `m`.
fn batch_dependent(graph: &Graph) -> Vec<bool> {
    let mut copied = vec![false; graph.len()];
    for i in graph.topological_order() {
        let op = graph.op(i);
        let of_sums = op.split == Splittability::Sum && !op.scales_with_batch();
        copied[i] = match op.phase {
            Phase::Input => true,
            Phase::Forward | Phase::Backward => {
                !of_sums && graph.predecessors(i).any(|p| copied[p])
            }
            Phase::Parameter | Phase::Optimizer => false,
        };
    }
    copied
}

/// Whether copied op `i` feeds an op that is not copied (a weight gradient feeding its update).
fn feeds_unbatched(graph: &Graph, copied: &[bool], i: OpIdx) -> bool {
    graph.successors(i).any(|s| !copied[s])
}

/// Adds micro-batch `k`'s partial gradient of `grad` to the running sum.
fn accumulation(grad: &Op, k: usize) -> Op {
    let mut op = Op::new(
        0,
        format!("{}#acc{k}", grad.name),
        "GradAccumulate",
        Phase::Backward,
    );
    let elements = grad.output_bytes / 4.0;
    op.flops = elements;
    op.bytes_accessed = 3.0 * grad.output_bytes;
    op.output_bytes = grad.output_bytes;
    op.split = Splittability::Sum;
    op.batch_scaled = Some(false);
    op
}

/// Every original edge between the right copies; gradient links from the summed gradients.
fn wire_edges(graph: &Graph, micro: &Graph, copies: &[Copies], m: usize, b: &mut GraphBuilder) {
    let gradient_link: std::collections::HashSet<(OpIdx, OpIdx)> = graph
        .gradients()
        .iter()
        .map(|l| (l.grad, l.optimizer))
        .collect();
    for (e, edge) in graph.edges().iter().enumerate() {
        let micro_bytes = micro.edges()[e].bytes;
        let (u, v) = (&copies[edge.src], &copies[edge.dst]);
        let gradient = gradient_link.contains(&(edge.src, edge.dst));
        match (u, v) {
            (Copies::Single(u), Copies::Single(v)) if gradient => {
                b.add_gradient(*u, *v, edge.bytes)
            }
            (Copies::Single(u), Copies::Single(v)) => b.add_edge(*u, *v, edge.bytes),
            (Copies::Single(u), Copies::PerMicroBatch { first, .. }) => {
                for k in 0..m {
                    b.add_edge(*u, first + k, micro_bytes);
                }
            }
            (Copies::PerMicroBatch { first: fu, .. }, Copies::PerMicroBatch { first: fv, .. }) => {
                for k in 0..m {
                    b.add_edge(fu + k, fv + k, micro_bytes);
                }
            }
            (Copies::PerMicroBatch { summed, .. }, Copies::Single(v)) if gradient => {
                b.add_gradient(*summed, *v, edge.bytes)
            }
            (Copies::PerMicroBatch { summed, .. }, Copies::Single(v)) => {
                b.add_edge(*summed, *v, edge.bytes)
            }
        }
    }
}

/// The copies of each of `ops`, sorted.
fn expanded_ops(ops: &[OpIdx], copies: &[Copies], m: usize) -> Vec<OpIdx> {
    let mut out: Vec<OpIdx> = ops
        .iter()
        .flat_map(|&o| match copies[o] {
            Copies::Single(i) => i..i + 1,
            Copies::PerMicroBatch { first, .. } => first..first + m,
        })
        .collect();
    out.sort_unstable();
    out
}

/// The copies of one stage's forward (or backward) work on one micro-batch: the ops entering it
/// and the ops leaving it.
#[derive(Default, Clone)]
struct Work {
    sources: Vec<OpIdx>,
    sinks: Vec<OpIdx>,
}

/// The ops leaving one piece of a stage's work (`before`) and those entering the next (`after`):
/// each of the first goes ahead of each of the second. Kept as a block, not as pairs: a stage fed
/// by one op fanning out to 50,000 has 50,000 ops on each side, and its pairs would not fit in
/// memory.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OrderBlock {
    pub(super) before: Vec<OpIdx>,
    pub(super) after: Vec<OpIdx>,
}

/// Order dependencies of the schedule, stage by stage.
fn schedule_order(
    g: &Graph,
    strategy: &Strategy,
    pipeline: &Pipeline,
    origin: &[OpIdx],
    micro_batch: &[Option<usize>],
) -> Vec<OrderBlock> {
    let (p, m) = (pipeline.stages(), pipeline.micro_batches as usize);
    // Key of an expanded op's work: (stage, micro-batch, backward?); accumulations are not work.
    let key = |i: OpIdx| -> Option<(usize, usize, bool)> {
        let k = micro_batch[i]?;
        let op = g.op(i);
        if op.op_type == "GradAccumulate" {
            return None;
        }
        let stage = pipeline.stage_of(strategy.group_of(origin[i]));
        Some((stage, k, op.phase == Phase::Backward))
    };
    let mut work = vec![[Work::default(), Work::default()]; p * m];
    for i in 0..g.len() {
        let Some((s, k, back)) = key(i) else { continue };
        let w = &mut work[s * m + k][back as usize];
        if !g.predecessors(i).any(|j| key(j) == Some((s, k, back))) {
            w.sources.push(i);
        }
        if !g.successors(i).any(|j| key(j) == Some((s, k, back))) {
            w.sinks.push(i);
        }
    }
    let mut order = Vec::new();
    let mut after = |before: &Work, then: &Work| {
        if !before.sinks.is_empty() && !then.sources.is_empty() {
            order.push(OrderBlock {
                before: before.sinks.clone(),
                after: then.sources.clone(),
            });
        }
    };
    for s in 0..p {
        let at = |k: usize, back: bool| &work[s * m + k][back as usize];
        for k in 1..m {
            after(at(k - 1, false), at(k, false));
            after(at(k - 1, true), at(k, true));
        }
        match pipeline.schedule {
            Schedule::GPipe => after(at(m - 1, false), at(0, true)),
            Schedule::OneFOneB => {
                let warm_up = pipeline.schedule.in_flight(s, p, m as u32) as usize;
                for k in warm_up..m {
                    after(at(k - warm_up, true), at(k, false));
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zoo::{ZooOptions, build};

    fn same_graph(a: &Graph, b: &Graph) -> bool {
        a.len() == b.len()
            && a.batch_size == b.batch_size
            && a.edges().len() == b.edges().len()
            && a.edges()
                .iter()
                .zip(b.edges())
                .all(|(x, y)| (x.src, x.dst, x.bytes) == (y.src, y.dst, y.bytes))
            && a.ops().iter().zip(b.ops()).all(|(x, y)| {
                (&x.name, x.flops, x.output_bytes) == (&y.name, y.flops, y.output_bytes)
            })
    }

    /// Past this thread's deadline the copies are not built (a graph of 10⁵ ops took seconds
    /// per micro-batch count, past `place --time`); without one they are.
    #[test]
    fn copies_are_abandoned_past_the_deadline() {
        let opts = ZooOptions {
            batch_size: Some(12),
            ..ZooOptions::default()
        };
        let graph = build("mlp", &opts).unwrap();
        let past = Some(std::time::Instant::now());
        assert!(deadline::during(past, || build_copies(&graph, 3)).is_none());
        assert!(deadline::during(None, || build_copies(&graph, 3)).is_some());
    }

    /// The kept copies are those of the graph and count asked for, whatever was kept before:
    /// a key that left out the count, the batch or the graph would hand back another's copies.
    #[test]
    fn kept_copies_equal_fresh_ones() {
        let opts = |batch| ZooOptions {
            batch_size: Some(batch),
            ..ZooOptions::default()
        };
        let g8 = build("mlp", &opts(8)).unwrap();
        let g16 = build("mlp", &opts(16)).unwrap();
        let resnet = build("resnet50", &opts(8)).unwrap();
        for round in 0..2 {
            for (g, m) in [
                (&g8, 2),
                (&g8, 4),
                (&g16, 2),
                (&resnet, 2),
                (&g8.clone(), 2),
            ] {
                let kept = copied(g, m).unwrap();
                let fresh = build_copies(g, m as usize).unwrap();
                assert!(
                    same_graph(&kept.graph, &fresh.graph),
                    "{} at batch {}, {m} micro-batches, round {round}",
                    g.name,
                    g.batch_size
                );
                assert_eq!(kept.origin, fresh.origin);
                assert_eq!(kept.micro_batch, fresh.micro_batch);
            }
        }
        assert_ne!(g8.identity(), g16.identity());
        assert_eq!(g8.identity(), g8.clone().identity());
    }
}
