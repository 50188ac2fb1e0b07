//! A pipeline as the planners for heterogeneous clusters make one (AMP, Li et al. NeurIPS'22;
//! Metis, Um et al. ATC'24): stages are device groups (each data-parallel inside, shares by
//! speed), under 1F1B or GPipe, the model is cut into contiguous stages of its forward order by dynamic programming
//! that balances each stage's time on its own GPUs under a memory bound, and the best few of the
//! cost model's candidates are simulated, the fastest kept. The `pipeline-dp` placer returns it.
//!
//! - Layer order: every forward op has its position in the topological order; an input takes the
//!   first, a parameter its first consumer's, a backward op the latest forward op carrying the
//!   batch it reads (the layer whose activation it differentiates; a constant such as a causal
//!   mask, made once at the start, says nothing of the layer; one reading none inherits from its
//!   inputs), an optimizer update its gradient's. Each position has two slots, its forward ops
//!   first and its backward ops after, so a chunk may end between them (a pre-LN block's
//!   LayerNorm gradient reads the residual add before it: cut after the add with that gradient
//!   on the far side and one tensor crosses each way).
//! - Chunks: the positions are cut into at most [`CHUNKS`] chunks, the units stages are made of;
//!   each ends where the fewest bytes carrying the batch cross, within [`CUT_WINDOW`] equal shares
//!   of work of its place (so a transformer is cut on its residual stream, not through an
//!   attention block whose inner tensors are many times larger).
//! - Stage time per micro-batch (`m` micro-batches): on the group's GPU type, the chunks' fixed
//!   compute (kernel launches: every op runs once per micro-batch however small) plus the rest
//!   divided by the group's GPU count, as the compiled pipeline costs it (the graph re-batched to
//!   the micro-batch), plus adding one micro-batch's weight gradients to their running sums; and
//!   sending what crosses the cut per micro-batch (activations forward, their gradients back)
//!   over the route to the next stage. Under 1F1B a stage waits for its sends (it keeps only the
//!   micro-batches in flight that the round trip through the later stages needs without them):
//!   compute plus send, the iteration `(m + p − 1)` times the slowest stage. Under GPipe the
//!   sends overlap the next forwards or backwards: the larger of the two, the iteration `m − 1`
//!   times the slowest stage plus each stage's compute and send once (fill and drain). Both add
//!   the slowest stage's gradient AllReduce (once, after the last micro-batch) and each tensor
//!   without the batch (a weight tied across stages, its summed gradient) sent once from its
//!   stage to each stage reading it. Memory per GPU: the stage's parameters and optimizer state
//!   plus the micro-batches the schedule keeps in flight (`p − s` under 1F1B, `m` under GPipe)
//!   of its activations split over its GPUs.
//! - Candidates: the device groups (or, on a cluster with one, its GPUs) ordered fastest first
//!   and slowest first, every prefix of two to [`MAX_STAGES`]; each prefix also wrapped round its
//!   first group (half of it runs the first stage and half the last, so that a weight tied
//!   between the model's ends — an embedding and its output layer — is shared inside one machine
//!   instead of over the slowest link); micro-batch counts that divide the batch, up to
//!   [`MAX_MICRO_BATCHES`], and both schedules. The balanced cut of each is estimated, and the
//!   [`SIMULATED`] best are simulated (half of each schedule: the estimates rank plans of one
//!   schedule better than across the two), [`SIMULATED_PER_ROUND`] at a time until a deadline.
//! - Folded twins: each wrapped plan among them is simulated a second time with its first and
//!   last stages both on the whole device group (a V-shaped pipeline: the two end stages share
//!   its GPUs and fill each other's bubbles, the tied weight never leaves them). The cut stays
//!   the one balanced for halves, under which the group's two stages together take about one
//!   stage time per micro-batch.
//! - Other schedule: the fastest plan is cut afresh under the other schedule and simulated
//!   (folded again if it was a folded twin); the estimates rank one plan's two schedules poorly.
//! - Packing: the fastest plan is simulated again with its stages' gradients packed the other
//!   ways data parallelism tries (one buffer per stage, Horovod's buckets; one AllReduce per
//!   gradient first), the fastest kept: they overlap the last micro-batch's backward
//!   differently, which the estimate does not see.
//! - Refinement (`refine`): the cut moved on the simulator, a round of single moves at a
//!   time (the busiest stage one chunk shorter at either end; the micro-batch count one step
//!   either way), the fastest strictly faster one kept, within [`REFINE_SIMULATIONS`]
//!   simulations: the estimate prices each stage alone, the simulator the whole pipeline.

mod best;
mod candidates;
mod chunks;
mod frames;
mod plan;
mod refine;
mod simulated_plan;

pub(crate) use best::best_pipeline;
pub(crate) use best::best_pipeline_with_frames;
pub use frames::PipelineFrames;
pub(crate) use plan::BestPipeline;
pub(crate) use refine::REFINE_SIMULATIONS;

#[cfg(test)]
mod tests;
