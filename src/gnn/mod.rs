//! TAG's GNN policy (§4.2.1): a heterogeneous graph attention network over op groups and device
//! groups whose decoder gives the MCTS its prior probabilities `G(s, a)`.
//!
//! - [`features`]: the heterogeneous graph of a search vertex (TAG Table 1) and how it is
//!   normalised.
//! - [`model`]: the GNN and decoder in burn (flex CPU backend; wgpu with the `wgpu` feature).
//! - [`GnnPolicy`]: a model with its hyper-parameters; saved as one file (a header line, the
//!   hyper-parameters as JSON, then burn's burnpack record), so `load` rebuilds the module.
//! - [`VertexPriors`]: what the search calls at expansion.
//! - [`cross_entropy`] and [`adam_step`]: one training step; the training loop is
//!   [`crate::train`].

pub(crate) mod device;
pub mod features;
pub mod layout_policy;
pub(crate) mod model;
pub mod policy;
pub(crate) mod priors;
pub(crate) mod training;

pub use device::cpu;
pub use device::device_named;
#[cfg(feature = "wgpu")]
pub(crate) use device::gpu;

pub(crate) use features::Feedback;
pub use features::HeteroGraph;
pub use features::Slice;
pub use layout_policy::LayoutModel;
pub use layout_policy::LayoutPolicy;
pub use layout_policy::LayoutPolicyConfig;
pub use model::GnnConfig;
pub use model::GnnModel;
pub use model::MAX_HEADS;
pub use model::MAX_LAYERS;
pub use model::MAX_WIDTH;
pub use model::to_vec;
pub use policy::GnnPolicy;
pub use priors::VertexPriors;
pub use training::adam_step;
pub use training::cross_entropy;
