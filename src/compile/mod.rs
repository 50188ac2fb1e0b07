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
//!
//! Devices that run the same tasks are compiled once ([`device_classes`]) when that is exact. A
//! pipeline is compiled as its expansion: one copy of each batch-dependent op per micro-batch,
//! with the schedule as order dependencies (`pipeline`).

pub(crate) mod collective;
pub(crate) mod compiled;
pub(crate) mod compiler;
mod compute_bound;
pub(crate) mod device_classes;
pub(crate) mod layout;
mod pipeline;
pub(crate) mod sync;
mod task_role;

pub(crate) use collective::ring_plan;

pub(crate) use compiled::Compiled;
pub use compiler::CompileOptions;
pub use compiler::Replicas;
pub use compiler::compile;
pub(crate) use compiler::compile_within;
pub use task_role::TaskRole;
