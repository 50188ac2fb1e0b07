//! Fixed strategies that need no search: the single fastest GPU, TAG's DP-NCCL and DP-NCCL-P
//! references, and Horovod.

use super::{Budget, Placer};
use crate::error::Result;
use crate::evaluate::Placement;
use crate::problem::Problem;
use crate::strategy::{AllReducePacking, HOROVOD_FUSION_BYTES, Reference};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fixed {
    Single,
    DpNccl,
    DpNcclP,
    /// Every op on every GPU, gradients fused into 64 MiB buckets, each bucket's ring AllReduce
    /// starting as soon as its gradients are ready, overlapping the rest of the backward pass.
    /// Stand-in: fixed buckets of consecutive gradients (PyTorch DDP style) rather than
    /// Horovod's fusion of whatever is ready every cycle.
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
                "horovod: 64 MiB gradient buckets overlapped with backward \
                 (stand-in: fixed consecutive buckets, not time-cycle fusion)",
            ),
        };
        let mut strategy = reference.strategy(p.graph, p.cluster);
        if *self == Fixed::Horovod {
            strategy.allreduce = AllReducePacking::Buckets(HOROVOD_FUSION_BYTES);
        }
        Ok(Placement::plain(strategy, note))
    }
}
