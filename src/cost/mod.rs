//! The cost model: compute time of an op on a GPU ([`model`], with per-architecture kernel
//! efficiencies in [`kernels`]), transfer time between devices, the closed forms of gradient
//! synchronisation ([`collective`]) and the fits that calibrate them ([`fit`]).

pub mod collective;
pub mod fit;
pub mod kernels;
pub mod model;

pub use collective::{
    CommModel, ps_sync_us, ps_time_us, ring_allreduce_time_us, ring_allreduce_us,
    tree_allreduce_time_us,
};
pub use fit::{LinearBatchModel, SegmentedLinear, fit_segmented, least_squares, profile_sizes};
pub use kernels::{KernelClass, KernelEfficiency, KernelTable};
pub use model::{CostModel, profiled_us, transfer_time_us, transfer_us};
