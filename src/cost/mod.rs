//! The cost model: compute time of an op on a GPU ([`model`], with per-architecture kernel
//! efficiencies in [`kernels`]), transfer time between devices, the closed forms of gradient
//! synchronisation ([`collective`]) and the fits that calibrate them ([`fit`]).

pub(crate) mod collective;
pub(crate) mod fit;
pub(crate) mod kernels;
pub(crate) mod model;

pub use collective::CommModel;
pub use collective::ps_sync_us;
pub use collective::ps_time_us;
pub use collective::ring_allreduce_time_us;
pub use collective::ring_allreduce_us;
pub use collective::tree_allreduce_time_us;
pub use fit::LinearBatchModel;
pub use fit::fit_segmented;
pub use fit::profile_sizes;
pub use kernels::KernelClass;
pub use kernels::KernelEfficiency;
pub use kernels::KernelTable;
pub use model::CostModel;
pub use model::transfer_time_us;
pub use model::transfer_us;
