//! What a task of the compiled graph stands for.

/// What a task of the compiled graph is, for reports and traces. The task's `label` in the
/// [`ExecGraph`] is the original op it computes or whose tensor it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRole {
    /// A replica (or the single copy) of an original op.
    Op,
    /// A tensor (or a slice of it) sent between devices.
    Transfer,
    /// Assembling a whole tensor from batch slices.
    Concat,
    /// Summing partial tensors on a parameter server.
    AddN,
    /// Ring AllReduce of partial sums among the replicas.
    AllReduce,
    /// The compute an AllReduce takes from one of its GPUs while it runs (NCCL's kernels share
    /// the SMs and memory bandwidth with the training kernels).
    Interference,
    /// The AllReduce result held on one replica's device (zero time; keeps its memory counted).
    Hold,
    /// A parameter server sending an updated parameter back to a replica.
    Pull,
    /// A zero-time task without resources through which a pipeline stage's schedule orders a
    /// large block of its work ([`super::pipeline`]).
    Gate,
}

impl TaskRole {
    /// Whether a task of this role keeps device classes exact ([`super::device_classes`]):
    /// anything that moves a tensor between two particular devices does not.
    pub(crate) fn keeps_device_classes(self) -> bool {
        !matches!(
            self,
            TaskRole::Transfer | TaskRole::Concat | TaskRole::AddN | TaskRole::Pull
        )
    }
}
