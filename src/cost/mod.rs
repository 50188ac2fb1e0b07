//! The cost model: compute time of an op on a GPU ([`model`], with per-architecture kernel
//! efficiencies in [`kernels`] and fused attention's published speeds in [`attention`]), transfer time between devices, the closed forms of gradient
//! synchronisation ([`collective`]), the fits that calibrate them ([`fit`]), the transposes a
//! convolution layout costs ([`memory_format`]), the memory a framework's runtime holds
//! beyond the tensors ([`runtime_memory`]) and the host's time to issue each op ([`host_dispatch`]).

pub(crate) mod attention;
pub(crate) mod collective;
pub(crate) mod fit;
pub(crate) mod host_dispatch;
pub(crate) mod kernels;
pub(crate) mod memory_format;
pub(crate) mod model;
pub(crate) mod runtime_memory;

pub use collective::CommModel;

#[cfg(test)]
pub(crate) use collective::ps_time_us;
pub use collective::ring_allreduce_time_us;

pub use collective::tree_allreduce_time_us;

pub(crate) use kernels::KernelClass;
pub use kernels::KernelEfficiency;

pub use host_dispatch::HostDispatch;
pub use memory_format::MemoryFormat;
pub use model::CostModel;
pub use runtime_memory::RuntimeMemory;

#[cfg(test)]
pub(crate) use collective::ps_sync_us;
pub(crate) use collective::ring_allreduce_us;
pub use fit::LinearBatchModel;
#[cfg(test)]
pub(crate) use fit::{fit_segmented, profile_sizes};
pub(crate) use kernels::KernelTable;
#[cfg(test)]
pub(crate) use model::transfer_time_us;
#[cfg(test)]
pub(crate) use model::transfer_us;

#[cfg(test)]
mod tests;
