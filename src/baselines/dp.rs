//! Fixed strategies that need no search: the single fastest GPU, TAG's DP-NCCL and DP-NCCL-P
//! references, and Horovod.

use super::{Budget, Placement, Placer, Problem};
use crate::error::Result;
use crate::strategy::{AllReducePacking, Reference};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixed {
    Single,
    DpNccl,
    DpNcclP,
    /// Every op on every GPU, one ring AllReduce per gradient as soon as it is ready, overlapping
    /// the rest of the backward pass. Stand-in: Horovod fuses ready gradients into 64 MiB buffers;
    /// the compiler has no fusion yet, so each gradient is reduced on its own (more latency terms,
    /// same bytes).
    Horovod,
}

impl Placer for Fixed {
    fn name(&self) -> &'static str {
        match self {
            Fixed::Single => "single",
            Fixed::DpNccl => "dp-nccl",
            Fixed::DpNcclP => "dp-nccl-p",
            Fixed::Horovod => "horovod",
        }
    }

    fn place(&self, p: &Problem, _budget: &Budget) -> Result<Placement> {
        let (reference, note) = match self {
            Fixed::Single => (Reference::Single, "everything on the fastest GPU"),
            Fixed::DpNccl => (
                Reference::Dp,
                "data parallel, packed AllReduce after backward",
            ),
            Fixed::DpNcclP => (Reference::DpP, "data parallel, speed-proportional batch"),
            Fixed::Horovod => (
                Reference::Dp,
                "horovod: per-tensor AllReduce overlapped with backward \
                 (stand-in: no 64 MiB tensor fusion)",
            ),
        };
        let mut strategy = reference.strategy(p.graph, p.cluster);
        if *self == Fixed::Horovod {
            strategy.allreduce = AllReducePacking::PerTensor;
        }
        Ok(Placement::plain(strategy, note))
    }
}
