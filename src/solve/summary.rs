//! What `topoplace solve` prints: the solver's proof (objective, bound, gap, status) and two
//! simulations of the answer — the simulator configured as the formulation assumes
//! ([`super::align`]), and the full compile + simulate every placer is judged by.

use serde::Serialize;

use super::{Coarsen, Formulation, SolveOptions, align, solve_problem};
use crate::error::Result;
use crate::evaluate::evaluate;
use crate::problem::Problem;

/// One `topoplace solve` run: the instance, the solver's result and the answer simulated.
#[derive(Debug, Clone, Serialize)]
pub struct SolveSummary {
    /// The model (graph) name.
    pub model: String,
    /// The cluster name.
    pub cluster: String,
    /// The MILP solved.
    pub formulation: Formulation,
    /// What was solved: P1 on ops, P2 on fused ops with co-location, MOIRAI on fused ops, ...
    pub instance: String,
    /// Nodes of the instance (ops, or groups of ops when coarsened).
    pub nodes: usize,
    /// Data edges between the instance's nodes.
    pub edges: usize,
    /// Sets of nodes that must share a GPU (QuickP's co-location), singletons not counted.
    pub colocation_sets: usize,
    /// Columns of the MILP (0 when no model was built).
    pub variables: usize,
    /// Constraint rows of the MILP (0 when no model was built).
    pub rows: usize,
    /// How the solve ended (optimal, feasible, infeasible, timed out).
    pub status: super::SolveStatus,
    /// Which search established the status and the bound.
    pub prover: super::Prover,
    /// Whether a search was stopped early because memory neared the limit.
    pub stopped_by_memory: bool,
    /// Makespan of the best solution found, µs (`None` without one).
    pub objective_us: Option<f64>,
    /// Proven lower bound on the makespan, µs.
    pub bound_us: Option<f64>,
    /// Relative gap (objective − bound) / objective, a fraction (0.01 = 1%).
    pub gap: Option<f64>,
    /// The greedy warm start's makespan.
    pub heuristic_us: f64,
    /// The simulator on the plan, configured as the formulation assumes.
    pub aligned_us: f64,
    /// The placement compiled and simulated like every other placer's.
    pub simulated_us: f64,
    /// Whether the compiled placement runs out of GPU memory in simulation.
    pub oom: bool,
    /// GPUs the plan puts at least one node on.
    pub devices_used: usize,
    /// The solve's wall-time limit, seconds (`--time-limit`).
    pub time_limit_s: f64,
    /// Wall time spent building the instance and the model, seconds.
    pub build_seconds: f64,
    /// Wall time spent solving, seconds.
    pub solve_seconds: f64,
}

/// Solve `p` with `formulation` after coarsening it (`k` groups for a grouping method), then
/// simulate the answer both ways; no solution is an error.
pub fn run(
    p: &Problem,
    formulation: Formulation,
    coarsen: &Coarsen,
    k: usize,
    opts: &SolveOptions,
) -> Result<SolveSummary> {
    let (inst, label, result, placement) = solve_problem(p, formulation, coarsen, k, opts)?;
    let plan = result.plan.as_ref().expect("solve_problem returns a plan");
    let aligned_us = align::simulated_makespan(&inst, plan, formulation.channels());
    let eval = evaluate(p, &placement)?;
    let mut used = plan.device.clone();
    used.sort_unstable();
    used.dedup();
    Ok(SolveSummary {
        model: p.graph.name.clone(),
        cluster: p.cluster.name.clone(),
        formulation,
        instance: label,
        nodes: inst.len(),
        edges: inst.edges.len(),
        colocation_sets: inst.colocate.len(),
        variables: result.variables,
        rows: result.rows,
        status: result.status,
        prover: result.prover,
        stopped_by_memory: result.stopped_by_memory,
        objective_us: result.objective_us,
        bound_us: result.bound_us,
        gap: result.gap,
        heuristic_us: result.heuristic_us,
        aligned_us,
        simulated_us: eval.report.iteration_us,
        oom: !eval.result.oom.is_empty(),
        devices_used: used.len(),
        time_limit_s: opts.time_limit_s,
        build_seconds: result.build_seconds,
        solve_seconds: result.solve_seconds,
    })
}

impl SolveSummary {
    /// The MILP's size, or why there is none: HiGHS abandoned before its model was read back
    /// printed "0 variables, 0 rows".
    fn model_size(&self) -> String {
        match (self.prover, self.variables) {
            (super::Prover::Abandoned, 0) => {
                "the MILP not built (HiGHS was abandoned first)".into()
            }
            _ => format!("{} variables, {} rows", self.variables, self.rows),
        }
    }

    /// The summary as `topoplace solve` prints it: instance, proof, simulations, times (in ms).
    pub fn render_text(&self) -> String {
        let ms = |x: Option<f64>| x.map_or("—".to_string(), |v| format!("{:.3} ms", v / 1e3));
        let gap = self
            .gap
            .map_or("—".to_string(), |g| format!("{:.2}%", g * 100.0));
        format!(
            "{} on {}: {} MILP, {}\n\
             instance   {} nodes, {} edges, {} co-location sets; {}\n\
             status     {} ({}{})\n\
             objective  {}\n\
             bound      {}\n\
             gap        {}\n\
             heuristic  {} (warm start)\n\
             simulated  {} (as the formulation assumes), {} (compiled strategy){}\n\
             GPUs used  {}\n\
             time       {:.2} s build + {:.2} s solve (limit {} s)\n",
            self.model,
            self.cluster,
            self.formulation.name(),
            self.instance,
            self.nodes,
            self.edges,
            self.colocation_sets,
            self.model_size(),
            self.status.name(),
            self.prover.name(),
            if self.stopped_by_memory {
                "; a search stopped early, memory near --memory-limit"
            } else {
                ""
            },
            ms(self.objective_us),
            ms(self.bound_us),
            gap,
            ms(Some(self.heuristic_us)),
            ms(Some(self.aligned_us)),
            ms(Some(self.simulated_us)),
            if self.oom { ", OOM" } else { "" },
            self.devices_used,
            self.build_seconds,
            self.solve_seconds,
            self.time_limit_s,
        )
    }
}
