//! `simulate`: one training iteration of a strategy (a reference, or a strategy file) or of a
//! hybrid-parallel plan, summarised as the command line prints it.

use std::path::Path;

use serde::Serialize;

use super::numerics::{Loaded, Numerics, check_traceable, cluster_name, strategy_named};
use crate::cluster::Cluster;
use crate::compile::Replicas;
use crate::error::{Error, InputError, Result};
use crate::evaluate::{
    Evaluation, SimulationSummary, evaluate_strategy, simulate_strategy, thin_batch_warning,
};
use crate::hybrid::{HybridModel, HybridPlan, HybridReport, estimate, load_plan};
use crate::resolve::load_named_cluster;
use crate::sim::Order;
use crate::strategy::Reference;

/// What to simulate.
#[derive(Clone, Debug)]
pub struct SimulateRequest<'a> {
    /// A zoo name or a graph JSON file.
    pub model: &'a str,
    /// The batch the model is rebuilt (zoo) or re-batched (file) at; `None`: its own.
    pub batch: Option<u32>,
    /// A cluster config file, or the name of a shipped one.
    pub cluster: &'a str,
    /// `single`, `dp`, `dp-p` or a strategy JSON file.
    pub strategy: &'a str,
    /// How the model trains.
    pub numerics: Numerics,
    /// Execution order on each GPU; `None`: the file's priorities when it gives them, else
    /// arrival order.
    pub order: Option<Order>,
    /// Compile every replica, not one per class of alike GPUs (same times; a trace needs it).
    pub every_replica: bool,
}

/// A simulated strategy: the summary the command line prints, and what a trace is drawn from.
pub struct Simulated {
    /// Iteration time, per-GPU busy share and memory, out-of-memory GPUs, TAG's feedback.
    pub summary: SimulationSummary,
    /// Why the batch is too thin for the strategy's replicas, if it is.
    pub warning: Option<String>,
    /// The model, cluster and cost model simulated.
    pub inputs: Loaded,
    /// The compiled execution graph and its simulation.
    pub evaluation: Evaluation,
}

/// Simulates `r.strategy` for `r.model` on `r.cluster`, beside DP-NCCL for reference.
pub fn simulate(r: &SimulateRequest) -> Result<Simulated> {
    let inputs = Loaded::load(r.model, r.batch, r.cluster, r.numerics)?;
    let Loaded {
        graph,
        cluster,
        cost,
    } = &inputs;
    let p = inputs.problem();
    let (strategy, priority) = strategy_named(r.strategy, graph, cluster, cost)?;
    let warning = joined([
        r.numerics.precision.fallback_note(cluster),
        thin_batch_warning(graph, cluster, &strategy),
    ]);
    let replicas = match r.every_replica {
        true => {
            check_traceable(&strategy)?;
            Replicas::Every
        }
        false => Replicas::ByClass,
    };
    let evaluation = match (priority, r.order) {
        (None, Some(Order::Priority)) => {
            // The order would fall back to arrival order without a word.
            let message = format!(
                "priority order needs the priorities a strategy file gives (`priority`), and {} gives none",
                r.strategy
            );
            return Err(InputError::new("<cli>", "--order", message).into());
        }
        (Some(order), None | Some(Order::Priority)) => {
            simulate_strategy(&p, &strategy, Some(&order), Order::Priority, replicas)?
        }
        (_, order) => {
            let order = order.unwrap_or(Order::Fifo);
            simulate_strategy(&p, &strategy, None, order, replicas)?
        }
    };
    let dp_order = r.order.unwrap_or(Order::Fifo);
    let dp = evaluate_strategy(&p, &Reference::Dp.strategy(graph, cluster), dp_order)?;
    let summary = SimulationSummary::new(graph, cluster, r.strategy, &evaluation, &dp);
    Ok(Simulated {
        summary,
        warning,
        inputs,
        evaluation,
    })
}

/// A hybrid-parallel plan simulated at layer granularity.
#[derive(Serialize)]
pub struct PlanSimulated {
    /// The zoo language model.
    pub model: String,
    /// The cluster (its name in JSON).
    #[serde(serialize_with = "cluster_name")]
    pub cluster: Cluster,
    /// Simulated iteration time, ms.
    pub iteration_ms: f64,
    /// Tokens trained per second.
    pub tokens_per_s: f64,
    /// Whether every GPU's memory holds.
    pub fits: bool,
    /// The plan simulated.
    pub plan: HybridPlan,
    /// Its times and memory per stage.
    pub report: HybridReport,
}

/// Simulates the hybrid plan in the file `plan` for the zoo language model `model`.
pub fn simulate_plan(
    model: &str,
    cluster: &str,
    plan: &Path,
    numerics: Numerics,
) -> Result<PlanSimulated> {
    let source = plan.display().to_string();
    let plan = load_plan(plan)?;
    let cluster = load_named_cluster(cluster, "--cluster")?;
    numerics.check(&cluster)?;
    check_plan_is_for(&plan, model, &cluster.name, &source)?;
    plan.check_micro_batches(&source)?;
    let opts = numerics.zoo_options();
    let micro_batch = plan.global_batch / plan.micro_batches;
    let hybrid = HybridModel::from_zoo(model, micro_batch, &opts, numerics.precision).map_err(
        |e| match e {
            // The model's own sizes were checked when it was named: what its graph cannot take
            // at this micro-batch is the plan's doing.
            Error::Input(inner) if inner.file != "<cli>" => InputError::new(
                &source,
                "global_batch",
                format!(
                    "micro-batches of {micro_batch} sequences: the model's graph at that size is \
                     refused ({inner})"
                ),
            )
            .into(),
            other => other,
        },
    )?;
    hybrid.check(&plan, cluster.devices.len(), &source)?;
    let report = estimate(&hybrid, &cluster, &numerics.cost(), &plan);
    let seq = hybrid.seq() as f64;
    Ok(PlanSimulated {
        model: model.to_string(),
        iteration_ms: report.iteration_us / 1e3,
        tokens_per_s: f64::from(plan.global_batch) * seq / (report.iteration_us * 1e-6),
        fits: report.fits(),
        cluster,
        plan,
        report,
    })
}

/// Refuses a plan file that says it was made for another model or cluster, as a strategy file
/// is refused; a plan that names neither (built in code, or written before plans named them)
/// is taken as it is. A model given as a file matches the same file by another path.
fn check_plan_is_for(plan: &HybridPlan, model: &str, cluster: &str, source: &str) -> Result<()> {
    let refused = |field: &str, said: &str, given: &str| -> Result<()> {
        let message = format!("the plan is for {field} \"{said}\", not \"{given}\"");
        Err(InputError::new(source, field, message).into())
    };
    if let Some(said) = &plan.model
        && said != model
        && !crate::io::same_file(Path::new(said), Path::new(model))
    {
        return refused("model", said, model);
    }
    match &plan.cluster {
        Some(said) if said != cluster => refused("cluster", said, cluster),
        _ => Ok(()),
    }
}

/// The warnings that hold, on one line; `None` when none does.
pub(crate) fn joined<const N: usize>(warnings: [Option<String>; N]) -> Option<String> {
    let held: Vec<String> = warnings.into_iter().flatten().collect();
    (!held.is_empty()).then(|| held.join("; "))
}
