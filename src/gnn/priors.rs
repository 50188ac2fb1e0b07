//! [`VertexPriors`]: what the search calls at expansion.

use super::features::{Feedback, HeteroGraph, StaticFeatures};
use super::policy::GnnPolicy;
use crate::evaluate::Evaluation;
use crate::problem::Problem;
use crate::strategy::GroupDecision;

/// The search's view of a policy: the static part of the features for one problem and the
/// model, turning a vertex's simulated completion into priors for its next op group.
pub struct VertexPriors<'a> {
    policy: &'a GnnPolicy,
    features: StaticFeatures,
    op_group: Vec<u32>,
}

impl<'a> VertexPriors<'a> {
    /// Priors from `policy` for problem `p`: `op_group` maps each op to its METIS group,
    /// `actions` are the decisions a group can take, and `dp_us` is DP-NCCL's iteration time
    /// (µs), the unit of every time feature.
    pub fn new(
        policy: &'a GnnPolicy,
        p: &Problem,
        op_group: &[u32],
        actions: &[GroupDecision],
        dp_us: f64,
    ) -> VertexPriors<'a> {
        VertexPriors {
            policy,
            features: StaticFeatures::new(p, op_group, actions, dp_us),
            op_group: op_group.to_vec(),
        }
    }

    /// The runtime feedback of a simulated completion.
    pub fn feedback(&self, e: &Evaluation) -> Feedback {
        Feedback::new(&self.op_group, self.features.groups(), e)
    }

    /// The heterogeneous graph of a vertex that decided `decided` groups, completed to `choice`.
    pub fn graph(&self, choice: &[u16], decided: usize, feedback: &Feedback) -> HeteroGraph {
        self.features.graph(choice, decided, feedback)
    }

    /// Priors over every action for op group `decided` (the vertex's next group).
    pub fn priors(&self, choice: &[u16], decided: usize, feedback: &Feedback) -> Vec<f64> {
        let g = self.graph(choice, decided, feedback);
        self.policy
            .priors(&g, decided, &self.features.slices)
            .into_iter()
            .map(f64::from)
            .collect()
    }
}
