//! The units a pipeline's stages are made of: every op's position in the forward order, cut
//! into chunks at the positions where the fewest bytes cross, with what each chunk costs, holds
//! and sends ([`super`]'s docs).

use crate::cluster::GpuSpec;
use crate::error::Result;
use crate::graph::{Graph, OpIdx, Phase, rebatch};
use crate::problem::Problem;

/// Most chunks the forward order is cut into before stages are made of them.
pub(crate) const CHUNKS: usize = 96;

/// How far (in equal shares of work) a chunk's end may move to where the fewest bytes cross: two
/// shares either side span half a GPT-2 layer at [`CHUNKS`] chunks, which holds one residual
/// point (after the attention block or after the MLP).
pub(crate) const CUT_WINDOW: f64 = 2.0;

/// Per chunk, what stages are costed from.
pub(super) struct Chunks {
    /// Chunk of every op.
    pub(super) of_op: Vec<usize>,
    /// One micro-batch's compute per chunk, for each micro-batch count planned.
    pub(super) work: Vec<Work>,
    /// Adding one micro-batch's weight gradients to the running sums, per chunk and GPU type.
    pub(super) accumulate_us: Vec<Vec<f64>>,
    pub(super) types: Vec<String>,
    /// Gradient bytes (AllReduced) and resident bytes (parameters, optimizer state) per chunk.
    pub(super) grad_bytes: Vec<f64>,
    pub(super) resident_bytes: Vec<f64>,
    /// Forward output bytes per chunk at the full batch (activations kept for the backward).
    pub(super) activation_bytes: Vec<f64>,
    /// Bytes of activations and activation gradients crossing the cut after each chunk, either
    /// way, at the full batch: sent once per micro-batch, a share each.
    pub(super) cut_bytes: Vec<f64>,
    /// Everything else that leaves its chunk (tied weights, their summed gradients): sent once
    /// per iteration, straight from its producer's stage to each consumer's.
    pub(super) once: Vec<OnceTensor>,
}

/// Forward and backward compute of one micro-batch per chunk, per GPU type of
/// [`Chunks::types`], as the compiled pipeline costs it (each op's copy in the graph re-batched to
/// the micro-batch): the part that does not shrink with a replica's share of the micro-batch
/// (kernel launches, ops without the batch), and the rest on one GPU.
pub(super) struct Work {
    pub(super) micro_batches: u32,
    pub(super) fixed_us: Vec<Vec<f64>>,
    pub(super) scaled_us: Vec<Vec<f64>>,
}

impl Chunks {
    /// The compute of `m` micro-batches' pipeline ([`chunk`] was given `m`).
    pub(super) fn work(&self, m: u32) -> &Work {
        self.work
            .iter()
            .find(|w| w.micro_batches == m)
            .expect("chunk() was given every micro-batch count planned")
    }
}

/// A tensor without the batch that some other chunk reads.
pub(super) struct OnceTensor {
    pub(super) home: usize,
    pub(super) readers: Vec<usize>,
    pub(super) bytes: f64,
}

/// Every op's position in the forward order (module docs).
fn positions(g: &Graph) -> Vec<usize> {
    let order = g.topological_order();
    let mut pos = vec![usize::MAX; g.len()];
    let mut next = 0;
    for &i in &order {
        if matches!(g.op(i).phase, Phase::Forward | Phase::Input) {
            pos[i] = next;
            next += 1;
        }
    }
    let last = next.saturating_sub(1);
    for &i in &order {
        if g.op(i).phase != Phase::Backward {
            continue;
        }
        let forward = latest_activation_read(g, &pos, i);
        let inherited = g
            .predecessors(i)
            .filter(|&j| pos[j] != usize::MAX && g.op(j).scales_with_batch())
            .map(|j| pos[j])
            .min();
        pos[i] = forward.or(inherited).unwrap_or(last);
    }
    for _ in 0..SETTLE_SWEEPS {
        settle_backward(g, &order, &mut pos);
    }
    for link in g.gradients() {
        pos[link.optimizer] = pos[link.grad];
    }
    for &i in order.iter().rev() {
        if pos[i] == usize::MAX {
            pos[i] = g
                .successors(i)
                .map(|j| pos[j])
                .filter(|&x| x != usize::MAX)
                .min()
                .unwrap_or(0);
        }
    }
    pos
}

/// Each position split in two slots, its forward ops (and whatever else runs once, such as
/// parameters) first and its backward ops after, so that a chunk may end between them. A backward
/// op sits at the latest activation it reads, which for a LayerNorm's gradient (it reads the
/// block's input) is the residual add of the block before: cut after that add with the gradient on
/// the far side, one tensor crosses each way; with the gradient on the near side, the LayerNorm's
/// inner gradients cross as well. An optimizer update keeps its gradient's slot.
fn slots(g: &Graph, pos: &[usize]) -> Vec<usize> {
    let mut slot: Vec<usize> = pos
        .iter()
        .enumerate()
        .map(|(i, &x)| 2 * x + usize::from(g.op(i).phase == Phase::Backward))
        .collect();
    for link in g.gradients() {
        slot[link.optimizer] = slot[link.grad];
    }
    slot
}

/// Position of the latest forward op carrying the batch that op `i` reads. A constant made once
/// at the start (a causal mask) is read by the gradient of the product with it, in every layer:
/// it says nothing of the layer.
fn latest_activation_read(g: &Graph, pos: &[usize], i: OpIdx) -> Option<usize> {
    g.predecessors(i)
        .filter(|&j| g.op(j).phase == Phase::Forward && g.op(j).scales_with_batch())
        .map(|j| pos[j])
        .max()
}

/// Whether ops of `phase` run in the forward and backward passes (per micro-batch in a
/// pipeline), as inputs, forward and backward ops do; parameters and updates run once.
fn in_passes(phase: Phase) -> bool {
    matches!(phase, Phase::Input | Phase::Forward | Phase::Backward)
}

/// Sweeps of [`settle_backward`].
const SETTLE_SWEEPS: usize = 2;

/// Moves each backward op, within what keeps data flowing one way (not before a forward op
/// carrying the batch that it reads, not after a gradient it reads), to the weighted median of
/// its neighbours' positions by bytes exchanged. The first guess, the latest forward op read,
/// puts the gradient of a LayerNorm that reads the block's input in the block before: its
/// inputs and outputs then cross the boundary between the blocks, one tensor more per cut.
fn settle_backward(g: &Graph, order: &[OpIdx], pos: &mut [usize]) {
    for &i in order {
        if g.op(i).phase != Phase::Backward {
            continue;
        }
        let placed = |j: OpIdx| pos[j] != usize::MAX && in_passes(g.op(j).phase);
        let lo = latest_activation_read(g, pos, i).unwrap_or(0);
        let hi = g
            .predecessors(i)
            .filter(|&j| g.op(j).phase == Phase::Backward)
            .map(|j| pos[j])
            .min()
            .unwrap_or(usize::MAX);
        if lo > hi {
            continue;
        }
        let edges = g.in_edges(i).iter().chain(g.out_edges(i));
        let mut weighted: Vec<(usize, f64)> = edges
            .map(|&e| &g.edges()[e])
            .map(|e| (if e.src == i { e.dst } else { e.src }, e.bytes))
            .filter(|&(j, _)| placed(j) && g.op(j).scales_with_batch())
            .map(|(j, bytes)| (pos[j], bytes))
            .collect();
        let half = weighted.iter().map(|w| w.1).sum::<f64>() / 2.0;
        if half <= 0.0 {
            continue;
        }
        weighted.sort_by_key(|w| w.0);
        let mut acc = 0.0;
        // On a tie the later position: a gradient belongs with the layer it comes back from.
        let median = weighted
            .iter()
            .find(|w| {
                acc += w.1;
                acc > half
            })
            .map_or(weighted[weighted.len() - 1].0, |w| w.0);
        pos[i] = median.clamp(lo, hi);
    }
}

/// Cut the positions into chunks of balanced compute and total what each holds, with the compute
/// of one micro-batch for each count of `micro_batches`.
pub(super) fn chunk(p: &Problem, types: &[&GpuSpec], micro_batches: &[u32]) -> Result<Chunks> {
    let g = p.graph;
    let pos = slots(g, &positions(g));
    let positions = pos.iter().copied().max().unwrap_or(0) + 1;
    let mut work_at = vec![0.0; positions];
    for (op, o) in g.ops().iter().enumerate() {
        if in_passes(o.phase) {
            work_at[pos[op]] += p.cost.compute_time_us(o, types[0], 1.0);
        }
    }
    let of_position = cheap_cut(&work_at, &crossing(g, &pos, positions), CHUNKS);
    let n = of_position.iter().copied().max().unwrap_or(0) + 1;
    let of_op: Vec<usize> = pos.iter().map(|&x| of_position[x]).collect();
    let mut c = Chunks {
        work: Vec::with_capacity(micro_batches.len()),
        accumulate_us: vec![vec![0.0; n]; types.len()],
        types: types.iter().map(|t| t.name.to_string()).collect(),
        grad_bytes: vec![0.0; n],
        resident_bytes: vec![0.0; n],
        activation_bytes: vec![0.0; n],
        cut_bytes: crossing(g, &of_op, n),
        once: Vec::new(),
        of_op,
    };
    for op in 0..g.len() {
        let k = c.of_op[op];
        c.resident_bytes[k] += g.op(op).resident_bytes;
        if g.op(op).phase == Phase::Forward {
            c.activation_bytes[k] += g.op(op).output_bytes;
        }
    }
    for link in g.gradients() {
        let (k, bytes) = (c.of_op[link.grad], g.op(link.grad).output_bytes);
        c.grad_bytes[k] += bytes;
        for (t, gpu) in types.iter().enumerate() {
            c.accumulate_us[t][k] += p.cost.kernel_us(gpu, bytes / 4.0, 3.0 * bytes);
        }
    }
    // A tensor that carries the batch crosses cuts per micro-batch (`cut_bytes`); any other (a
    // tied weight, its summed gradient) goes once per iteration to each chunk that reads it.
    for u in 0..g.len() {
        let readers = readers(g, u, &c.of_op);
        if readers.is_empty() || g.op(u).carries_batch() {
            continue;
        }
        let bytes = readers.iter().map(|r| r.1).fold(0.0, f64::max);
        let mut readers: Vec<usize> = readers.into_iter().map(|r| r.0).collect();
        readers.sort_unstable();
        readers.dedup();
        c.once.push(OnceTensor {
            home: c.of_op[u],
            readers,
            bytes,
        });
    }
    for &m in micro_batches {
        let work = micro_batch_work(p, types, &c.of_op, n, m)?;
        c.work.push(work);
    }
    Ok(c)
}

/// The compute of one of `m` micro-batches per chunk (see [`Work`]).
fn micro_batch_work(
    p: &Problem,
    types: &[&GpuSpec],
    of_op: &[usize],
    chunks: usize,
    m: u32,
) -> Result<Work> {
    let g = p.graph;
    let micro = rebatch(g, g.batch_size / m, &g.name)?;
    let mut w = Work {
        micro_batches: m,
        fixed_us: vec![vec![0.0; chunks]; types.len()],
        scaled_us: vec![vec![0.0; chunks]; types.len()],
    };
    for (op, &k) in of_op.iter().enumerate() {
        let o = micro.op(op);
        if !in_passes(o.phase) {
            continue;
        }
        for (t, gpu) in types.iter().enumerate() {
            let fixed = p.cost.compute_time_us(o, gpu, 0.0);
            w.fixed_us[t][k] += fixed;
            w.scaled_us[t][k] += p.cost.compute_time_us(o, gpu, 1.0) - fixed;
        }
    }
    Ok(w)
}

/// The units (positions or chunks, `unit_of` each op) other than its own that read `u`'s output,
/// with the bytes each reads.
fn readers(g: &Graph, u: OpIdx, unit_of: &[usize]) -> Vec<(usize, f64)> {
    g.out_edges(u)
        .iter()
        .map(|&e| &g.edges()[e])
        .filter(|e| unit_of[e.dst] != unit_of[u])
        .map(|e| (unit_of[e.dst], e.bytes))
        .collect()
}

/// Bytes carrying the batch that cross the boundary after each unit (position or chunk, `unit_of`
/// each op; both ways), each tensor once however many readers lie beyond.
fn crossing(g: &Graph, unit_of: &[usize], units: usize) -> Vec<f64> {
    let mut delta = vec![0.0; units + 1];
    for u in 0..g.len() {
        let r = readers(g, u, unit_of);
        if r.is_empty() || !g.op(u).carries_batch() {
            continue;
        }
        let bytes = r.iter().map(|x| x.1).fold(0.0, f64::max);
        let lo = r.iter().map(|x| x.0).chain([unit_of[u]]).min().unwrap();
        let hi = r.iter().map(|x| x.0).chain([unit_of[u]]).max().unwrap();
        delta[lo] += bytes;
        delta[hi] -= bytes;
    }
    delta.truncate(units);
    running_sum(&delta)
}

/// The sums of `v`'s first 1, 2, …, all values.
pub(super) fn running_sum(v: &[f64]) -> Vec<f64> {
    v.iter()
        .scan(0.0, |acc, x| {
            *acc += x;
            Some(*acc)
        })
        .collect()
}

/// Chunk of each position: at most `parts` chunks of consecutive positions, the `k`-th ending at
/// the position with the fewest bytes crossing (ties: nearest the `k`-th equal share of work)
/// among those whose cumulative work lies within [`CUT_WINDOW`] shares of `k` shares. Cuts then
/// fall on the residual stream between blocks rather than through an attention block or an MLP
/// (whose inner tensors are several times the residual stream); windows that pick the same
/// position make one chunk.
fn cheap_cut(work: &[f64], crossing: &[f64], parts: usize) -> Vec<usize> {
    let total: f64 = work.iter().sum();
    let share = total / parts as f64;
    let done = running_sum(work);
    let last = work.len().saturating_sub(1);
    let mut ends: Vec<usize> = (1..parts)
        .filter_map(|k| {
            let target = k as f64 * share;
            (0..last)
                .filter(|&x| (done[x] - target).abs() <= CUT_WINDOW * share)
                .min_by(|&a, &b| {
                    crossing[a].total_cmp(&crossing[b]).then(
                        (done[a] - target)
                            .abs()
                            .total_cmp(&(done[b] - target).abs()),
                    )
                })
        })
        .collect();
    ends.sort_unstable();
    ends.dedup();
    let mut out = Vec::with_capacity(work.len());
    let mut chunk = 0;
    for x in 0..work.len() {
        out.push(chunk);
        if ends.get(chunk) == Some(&x) {
            chunk += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphBuilder, Op, Splittability};

    /// Every chunk ends where the fewest bytes cross within its window: on a "transformer" whose
    /// residual points (crossing 1) come every fourth position between inner ones (crossing 5),
    /// no chunk ends inside a block.
    #[test]
    fn chunks_end_on_the_cheapest_positions() {
        let work = vec![1.0; 24];
        let crossing: Vec<f64> = (0..24)
            .map(|x| if x % 4 == 3 { 1.0 } else { 5.0 })
            .collect();
        let of = cheap_cut(&work, &crossing, 12);
        let ends: Vec<usize> = (0..23).filter(|&x| of[x] != of[x + 1]).collect();
        assert!(ends.len() >= 4, "{ends:?}");
        for x in ends {
            assert_eq!(crossing[x], 1.0, "a chunk ends at position {x}");
        }
        // Chunks are consecutive positions numbered from 0.
        assert_eq!(of[0], 0);
        assert!(of.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
    }

    /// Tensors of one byte along `edges`.
    fn wire(b: &mut GraphBuilder, edges: &[(OpIdx, OpIdx)]) {
        for &(s, d) in edges {
            b.add_edge(s, d, 1.0);
        }
    }

    fn op(name: &str, phase: Phase, batch: bool) -> Op {
        let mut op = Op::new(0, name, "X", phase);
        op.output_bytes = 1.0;
        op.batch_scaled = Some(batch);
        op
    }

    /// A pre-LN block's boundary: `add` (the residual stream) feeds a LayerNorm `ln`, whose
    /// gradient `ln_grad` reads `add` and `ln`'s output. Placed at `add`'s position (where GPT-2's
    /// LayerNorm gradients settle), the cut after `add` sends three tensors; with slots it may
    /// leave `ln_grad` on the far side, and one tensor crosses each way (`add` forward, the
    /// gradient `add_grad` back).
    #[test]
    fn a_chunk_may_end_between_a_residual_add_and_the_gradient_reading_it() {
        let mut b = GraphBuilder::new();
        // Activations and their gradients: tensors with the batch dimension.
        let op = |name: &str, phase: Phase, batch: bool| Op {
            split: Splittability::Concat,
            ..op(name, phase, batch)
        };
        let input = b.add_op(op("input", Phase::Input, true));
        let f0 = b.add_op(op("f0", Phase::Forward, true));
        let add = b.add_op(op("add", Phase::Forward, true));
        let ln = b.add_op(op("ln", Phase::Forward, true));
        let f1 = b.add_op(op("f1", Phase::Forward, true));
        let f1_grad = b.add_op(op("f1_grad", Phase::Backward, true));
        let ln_grad = b.add_op(op("ln_grad", Phase::Backward, true));
        let add_grad = b.add_op(op("add_grad", Phase::Backward, true));
        let f0_grad = b.add_op(op("f0_grad", Phase::Backward, true));
        wire(
            &mut b,
            &[
                (input, f0),
                (f0, add),
                (input, add),
                (add, ln),
                (ln, f1),
                (ln, f1_grad),
                (f1, f1_grad),
                (f1_grad, ln_grad),
                (add, ln_grad),
                (ln, ln_grad),
                (ln_grad, add_grad),
                (add_grad, f0_grad),
                (input, f0_grad),
            ],
        );
        let g = b.finish("<test>", "block", 8).unwrap();
        let mut pos = vec![0, 1, 2, 3, 4, 4, 2, 2, 1];
        pos[ln_grad] = pos[add];
        let after_add = crossing(&g, &pos, pos[f1] + 1)[pos[add]];
        assert_eq!(after_add, 3.0);
        let slot = slots(&g, &pos);
        assert!(
            slot[add] < slot[ln_grad] && slot[ln_grad] < slot[ln],
            "{slot:?}"
        );
        let units = slot.iter().max().unwrap() + 1;
        assert_eq!(crossing(&g, &slot, units)[slot[add]], 2.0);
    }

    /// The gradient of a product with a constant mask reads the constant (made at the start) and
    /// its layer's gradient, no activation: it belongs to its layer, not to the start.
    #[test]
    fn a_mask_gradient_sits_in_its_layer() {
        let mut b = GraphBuilder::new();
        let mask = b.add_op(op("mask", Phase::Forward, false));
        let input = b.add_op(op("input", Phase::Input, true));
        let f0 = b.add_op(op("f0", Phase::Forward, true));
        let f1 = b.add_op(op("f1", Phase::Forward, true));
        let masked = b.add_op(op("f2_masked", Phase::Forward, true));
        let g2 = b.add_op(op("g2", Phase::Backward, true));
        let mask_grad = b.add_op(op("f2_masked_grad", Phase::Backward, true));
        let g1 = b.add_op(op("g1", Phase::Backward, true));
        wire(
            &mut b,
            &[
                (input, f0),
                (f0, f1),
                (f1, masked),
                (mask, masked),
                (masked, g2),
                (g2, mask_grad),
                (mask, mask_grad),
                (mask_grad, g1),
                (f0, g1),
            ],
        );
        let g = b.finish("<test>", "mask", 8).unwrap();
        let pos = positions(&g);
        // Between the layers its data flows from and to, not at the mask's.
        assert!(pos[mask_grad] > pos[f0], "{pos:?}");
        assert!(pos[mask_grad] <= pos[masked], "{pos:?}");
        assert!(pos[f0] <= pos[g1] && pos[g1] <= pos[mask_grad], "{pos:?}");
    }
}
