//! [`VertexPriors`]: what the search calls at expansion.

use super::features::{Feedback, HeteroGraph, StaticFeatures};
use super::policy::GnnPolicy;
use crate::evaluate::Evaluation;
use crate::problem::Problem;
use crate::strategy::GroupDecision;
use rayon::prelude::*;
use std::time::Instant;

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
        self.priors_of(&self.graph(choice, decided, feedback), decided)
    }

    /// Priors over every action for op group `group` of the vertex whose GNN input is `g`.
    pub fn priors_of(&self, g: &HeteroGraph, group: usize) -> Vec<f64> {
        widen(self.policy.priors(g, group, &self.features.slices))
    }

    /// The priors of each vertex input `(graph, group)` of `inputs`, in order, or `None` when
    /// they are not all ready by `until`. The forward passes run on a thread of their own with a
    /// copy of the model (its tensors are shared, not copied), so a search under a time limit
    /// does not wait past it for a network too large for the graph: the abandoned passes run
    /// to their end and their priors are dropped. They run in a thread pool of their own: in the
    /// search's pool an abandoned pass would hold its threads, and the search's simulations would
    /// queue behind it.
    pub fn priors_until(
        &self,
        inputs: Vec<(HeteroGraph, usize)>,
        until: Instant,
    ) -> Option<Vec<Vec<f64>>> {
        let model = self.policy.clone();
        let slices = self.features.slices.clone();
        let threads = rayon::current_num_threads();
        let wait = until.saturating_duration_since(Instant::now());
        crate::interrupt::answer_within(wait, move || {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .ok()?;
            Some(pool.install(|| {
                inputs
                    .into_par_iter()
                    .map(|(g, group)| widen(model.priors(&g, group, &slices)))
                    .collect()
            }))
        })
        .flatten()
    }
}

fn widen(priors: Vec<f32>) -> Vec<f64> {
    priors.into_iter().map(f64::from).collect()
}
