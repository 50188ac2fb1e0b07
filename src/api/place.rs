//! `place`: TAG's tree search over op groups (what the heuristics found is its start and its
//! yardstick), or for a zoo language model of a billion parameters or more the joint search over
//! hybrid plans against Megatron-LM's default layout, FSDP and the Metis- and Sailor-style
//! planners.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::numerics::{Loaded, Numerics, check_traceable, cluster_name, size_as_flag, trace_json};
use super::progress::bar_if;
use crate::assets::SHIPPED_POLICY;
use crate::cluster::Cluster;
use crate::error::{Error, InputError, Result, SearchError};
use crate::evaluate::{Placement, evaluate_every_replica, thin_batch_warning};
use crate::gnn::{self, GnnPolicy, LayoutPolicy};
use crate::hybrid::{self as hybrid_plans, planned_by_default};
use crate::hybrid::{HybridPlan, HybridReport, JOINT_SEARCH, Planned, Planner, plan_all};
use crate::io::{write_all_atomic, write_atomic};
use crate::mcts::{self, GroupOrder, MctsConfig, Progress, SearchResult, SearchSplit};
use crate::place_summary::PlaceSummary;
use crate::placers::heuristics::best_heuristic;
use crate::placers::tag::tag_search;
use crate::resolve::load_named_cluster;
use crate::strategy::strategy_text;
use crate::units::to_ms;
use crate::zoo;
use crate::{interrupt, sim};

/// Which search places the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlannerChoice {
    /// `Hybrid` for a zoo language model of a billion parameters or more, `Tag` otherwise.
    Auto,
    /// TAG's tree search over op groups, with pipelines.
    Tag,
    /// Pipeline stages × tensor × data parallelism with ZeRO and recomputation.
    Hybrid,
}

/// What to place and how the search runs; [`PlaceRequest::new`] gives the command line's
/// defaults.
#[derive(Clone, Debug)]
pub struct PlaceRequest<'a> {
    /// A zoo name or a graph JSON file.
    pub model: &'a str,
    /// The batch; `None`: the model's own.
    pub batch: Option<u32>,
    /// A cluster config file, or the name of a shipped one.
    pub cluster: &'a str,
    /// How the model trains.
    pub numerics: Numerics,
    /// `shipped`, `none` (uniform priors) or a GNN policy file.
    pub policy: &'a str,
    /// Where the GNN runs: `cpu`, or `wgpu` in builds with that feature.
    pub gnn_device: &'a str,
    /// MCTS iterations.
    pub budget: usize,
    /// Seconds the whole call may take, counted from `started`.
    pub time: Option<f64>,
    /// METIS op groups.
    pub groups: usize,
    /// The order in which the tree decides op groups.
    pub group_order: GroupOrder,
    /// Batch shares of the searched strategies.
    pub batch_split: SearchSplit,
    /// New pipelines the tree may simulate below its pipeline frames.
    pub pipeline_leaves: usize,
    /// Every random choice of the search flows from it.
    pub seed: u64,
    /// Which search runs.
    pub planner: PlannerChoice,
    /// When the call began: `time` counts from here (a command line's start, loading included).
    pub started: Instant,
}

impl<'a> PlaceRequest<'a> {
    /// `model` on `cluster` with the command line's defaults: the shipped policy on the CPU, 300
    /// iterations, no time limit, seed 0, the planner chosen by the model.
    pub fn new(model: &'a str, cluster: &'a str) -> Self {
        PlaceRequest {
            model,
            batch: None,
            cluster,
            numerics: Numerics::default(),
            policy: "shipped",
            gnn_device: "cpu",
            budget: 300,
            time: None,
            groups: mcts::DEFAULT_GROUPS,
            group_order: GroupOrder::Compute,
            batch_split: SearchSplit::Even,
            pipeline_leaves: mcts::PIPELINE_LEAVES,
            seed: 0,
            planner: PlannerChoice::Auto,
            started: Instant::now(),
        }
    }

    /// Whether the hybrid planner places the model.
    pub fn wants_hybrid(&self) -> Result<bool> {
        match self.planner {
            PlannerChoice::Tag => Ok(false),
            PlannerChoice::Hybrid if zoo::lm_shape(self.model)?.is_none() => Err(InputError::new(
                "<cli>",
                "--planner",
                format!(
                    "hybrid plans a zoo GPT or Llama, or a model-spec .toml file; \"{}\" is not one",
                    self.model
                ),
            )
            .into()),
            PlannerChoice::Hybrid => Ok(true),
            PlannerChoice::Auto => planned_by_default(self.model),
        }
    }
}

/// What `place` found.
pub enum Placed {
    /// TAG's search over op groups.
    Tag(Box<TagPlaced>),
    /// The joint search over hybrid plans.
    Hybrid(Box<HybridPlaced>),
}

impl Placed {
    /// The chosen plan's simulated iteration time, ms.
    pub fn iteration_ms(&self) -> f64 {
        match self {
            Placed::Tag(t) => t.summary.iteration_us / 1e3,
            Placed::Hybrid(h) => h.iteration_ms,
        }
    }
}

/// TAG's search's answer: the summary the command line prints and the strategy behind it.
pub struct TagPlaced {
    /// What `place` prints.
    pub summary: PlaceSummary,
    /// The chosen strategy, its execution order and its simulation.
    pub found: SearchResult,
    /// Why the batch is too thin for the strategy's replicas, if it is.
    pub warning: Option<String>,
    /// The model, cluster and cost model placed.
    pub inputs: Loaded,
}

/// How one baseline of the hybrid search fared.
#[derive(Serialize)]
pub struct Baseline {
    /// `megatron`, `fsdp`, `metis-planner`, `sailor-planner`.
    pub method: &'static str,
    /// Its plan's iteration time; `None` when it found no plan.
    pub iteration_ms: Option<f64>,
    /// Whether its plan fits.
    pub fits: bool,
    /// Whether it ran out of its share of the time limit (`--time`) before it was done.
    pub out_of_time: bool,
}

/// The hybrid search's answer, against its baselines.
#[derive(Serialize)]
pub struct HybridPlaced {
    /// The zoo language model.
    pub model: String,
    /// The cluster's name.
    #[serde(rename = "cluster", serialize_with = "cluster_name")]
    pub cluster: Cluster,
    /// The chosen plan's simulated iteration time, ms.
    pub iteration_ms: f64,
    /// Tokens trained per second.
    pub tokens_per_s: f64,
    /// Whether every GPU's memory holds.
    pub fits: bool,
    /// The fastest fitting baseline's time over the chosen plan's.
    pub speedup_over_best_other: Option<f64>,
    /// Every baseline's time.
    pub baselines: Vec<Baseline>,
    /// Wall time of the search.
    pub search_seconds: f64,
    /// The chosen plan.
    pub plan: HybridPlan,
    /// Its times and memory per stage.
    pub report: HybridReport,
}

/// Places `r.model` on `r.cluster`; `progress` hears of the tree search's iterations.
pub fn place(r: &PlaceRequest, progress: impl FnMut(Progress)) -> Result<Placed> {
    match r.wants_hybrid()? {
        true => Ok(Placed::Hybrid(Box::new(place_hybrid(r)?))),
        false => place_tag(r, progress),
    }
}

/// TAG's search over op groups.
fn place_tag(r: &PlaceRequest, progress: impl FnMut(Progress)) -> Result<Placed> {
    let (policy, policy_shown, policy_late) = load_policy_in_time(r)?;
    let inputs = Loaded::load(r.model, r.batch, r.cluster, r.numerics)?;
    let config = MctsConfig {
        iterations: r.budget,
        // The limit counts from the start (loading the policy and the inputs too), and the
        // search aims at [`EXIT_MARGIN`] of it less, for what it does not measure.
        seconds: r
            .time
            .map(|t| (t * (1.0 - EXIT_MARGIN) - r.started.elapsed().as_secs_f64()).max(0.0)),
        seed: r.seed,
        group_order: r.group_order,
        batch_split: r.batch_split,
        pipeline_leaves: r.pipeline_leaves,
        ..Default::default()
    };
    let p = inputs.problem();
    let last_moment = r
        .time
        .map(|t| r.started + Duration::from_secs_f64(interrupt::give_up_after(t)));
    let searched = sim::deadline::during(last_moment, || {
        tag_search(&p, r.groups, config, policy.as_ref(), progress)
    });
    let Loaded { graph, cluster, .. } = &inputs;
    let (found, heuristics) = match searched {
        Err(Error::Search(SearchError::Abandoned)) => {
            return Err(SearchError::SimulationTooLong {
                model: graph.name.clone(),
                cluster: cluster.name.clone(),
                seconds: r.time.unwrap_or_default(),
                ops: graph.len(),
                gpus: cluster.devices.len(),
            }
            .into());
        }
        searched => searched?,
    };
    if !found.fits {
        return Err(SearchError::DoesNotFit {
            model: graph.name.clone(),
            cluster: cluster.name.clone(),
            simulated: found.simulated,
            tried: "strategies tried (DP-NCCL included)",
        }
        .into());
    }
    let (mut heuristic, mut heuristic_us) = best_heuristic(&heuristics);
    // DP-NCCL is simulated as the search's reference whatever the time limit left the
    // heuristics (under a tight one, dp-subset only scores the fastest GPU alone): the best other
    // method is never slower than it.
    if found.dp_fits && found.dp_us < heuristic_us {
        (heuristic, heuristic_us) = ("dp-nccl".to_string(), found.dp_us);
    }
    let summary = PlaceSummary::new(
        graph,
        cluster,
        &policy_shown,
        &found,
        heuristic,
        heuristic_us,
    );
    let warning = super::simulate::joined([
        r.numerics.precision.fallback_note(cluster),
        thin_batch_warning(graph, cluster, &found.strategy),
        policy_late,
        found.priors_abandoned.then(|| {
            format!(
                "the policy's forward passes ran past --time: the search went on with \
                 uniform priors (a policy of width {} is large for this cluster)",
                policy.as_ref().map_or(0, |p| p.config.width)
            )
        }),
    ]);
    Ok(Placed::Tag(Box::new(TagPlaced {
        summary,
        found,
        warning,
        inputs,
    })))
}

/// [`place`] with the command line's progress bar on stderr (when `show` and stderr is a
/// terminal): the tree search's iterations and its best time so far.
pub fn place_showing_progress(r: &PlaceRequest, show: bool) -> Result<Placed> {
    // The hybrid search reports no iterations: it draws no bar. Deciding builds the model's
    // graph, so it is decided once.
    if r.wants_hybrid()? {
        return Ok(Placed::Hybrid(Box::new(place_hybrid(r)?)));
    }
    let bar = bar_if(show, r.budget as u64)?;
    bar.set_message("heuristics");
    let placed = place_tag(r, |progress| {
        bar.set_position(progress.iterations as u64);
        if let Some(best) = progress.best_us {
            bar.set_message(format!("best {:.2} ms", to_ms(best)));
        }
    });
    bar.finish_and_clear();
    placed
}

impl TagPlaced {
    /// The chosen strategy as its file's JSON (what `simulate --strategy` reads).
    pub fn strategy_json(&self) -> Result<String> {
        let Loaded { graph, cluster, .. } = &self.inputs;
        let found = &self.found;
        strategy_text(
            &found.strategy,
            found.order.as_deref(),
            graph,
            &cluster.name,
        )
    }

    /// Writes the chosen strategy's file.
    pub fn write_strategy(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.strategy_json()?.as_bytes())
    }

    /// Writes a Chrome trace of the chosen strategy's iteration.
    pub fn write_trace(&self, path: &Path) -> Result<()> {
        write_atomic(path, self.trace_json()?.as_bytes())
    }

    /// Writes the strategy to `out` and the trace to `trace`, those given, as one: when either
    /// cannot be written, neither regular file is replaced.
    pub fn write_outputs(&self, out: Option<&Path>, trace: Option<&Path>) -> Result<()> {
        let strategy = out.map(|_| self.strategy_json()).transpose()?;
        let traced = trace.map(|_| self.trace_json()).transpose()?;
        let files: Vec<(&Path, &[u8])> = [(out, &strategy), (trace, &traced)]
            .into_iter()
            .filter_map(|(path, text)| Some((path?, text.as_deref()?.as_bytes())))
            .collect();
        write_all_atomic(&files)
    }

    /// A Chrome trace of the chosen strategy's iteration, every GPU in it (the search's
    /// evaluation may have compiled one per class of alike GPUs).
    pub fn trace_json(&self) -> Result<String> {
        let placement = Placement {
            order: self.found.order.clone(),
            ..Placement::plain(self.found.strategy.clone(), "")
        };
        check_traceable(&placement.strategy)?;
        let traced = evaluate_every_replica(&self.inputs.problem(), &placement)?;
        let Loaded { graph, cluster, .. } = &self.inputs;
        trace_json(graph, cluster, &traced)
    }
}

impl HybridPlaced {
    /// Writes the chosen plan's file (what `simulate --plan` reads).
    pub fn write_plan(&self, path: &Path) -> Result<()> {
        // The file says what it was made for, so that `simulate --plan` can refuse another.
        let plan = HybridPlan {
            model: Some(self.model.clone()),
            cluster: Some(self.cluster.name.clone()),
            ..self.plan.clone()
        };
        let text = serde_json::to_string_pretty(&plan).map_err(|e| Error::serialise("plan", e))?;
        write_atomic(path, text.as_bytes())
    }
}

/// Share of the time limit the search leaves unplanned: the result's SFB check, the summary, and
/// the process's start and exit are not among the pieces of work it times (`mcts::reserve`), and
/// without it `place --time 10` ended at 10.02 s on two cores.
const EXIT_MARGIN: f64 = 0.01;

/// Share of the time limit the hybrid search aims at: the rest is for loading and printing.
const HYBRID_SHARE: f64 = 0.95;

fn place_hybrid(r: &PlaceRequest) -> Result<HybridPlaced> {
    let cluster = load_named_cluster(r.cluster, "--cluster")?;
    r.numerics.check(&cluster)?;
    let global_batch = match r.batch {
        Some(b) => b,
        None => zoo::card(r.model).map_or(8, |c| c.default_batch),
    };
    let opts = r.numerics.zoo_options();
    let cost = r.numerics.cost();
    let limit = r.time.unwrap_or(hybrid_plans::DEFAULT_SECONDS) * HYBRID_SHARE;
    let end = r.started + Duration::from_secs_f64(limit);
    let mut planner = Planner::new(
        r.model,
        &opts,
        r.numerics.precision,
        &cluster,
        &cost,
        global_batch,
    )
    .map_err(|e| size_as_flag(e, r.batch, r.numerics.seq))?;
    // No time given to the search can fit a model whose state alone outgrows the cluster.
    let needed = planner.model(1)?.state_bytes();
    let available: f64 = cluster.devices.iter().map(|d| d.memory_bytes).sum();
    if needed > available {
        return Err(SearchError::StateExceedsCluster {
            model: r.model.to_string(),
            cluster: cluster.name.clone(),
            needed: crate::render::bytes(needed),
            available: crate::render::bytes(available),
        }
        .into());
    }
    let priors = LayoutPolicy::shipped()?;
    let placed = plan_all(&mut planner, Some(end), &priors)?;
    let Some(best) = placed.best() else {
        let unfinished: Vec<&str> = placed
            .methods
            .iter()
            .filter(|m| m.out_of_time)
            .map(|m| m.method)
            .collect();
        if !unfinished.is_empty() {
            return Err(SearchError::NoneInTime {
                model: r.model.to_string(),
                cluster: cluster.name.clone(),
                seconds: r.time.unwrap_or(hybrid_plans::DEFAULT_SECONDS),
                simulated: planner.judged(),
                unfinished: unfinished.join(", "),
            }
            .into());
        }
        return Err(SearchError::DoesNotFit {
            model: r.model.to_string(),
            cluster: cluster.name.clone(),
            simulated: planner.judged(),
            tried: "hybrid plans tried (Megatron's default layout and FSDP's included)",
        }
        .into());
    };
    let best_other = placed.best_baseline_us();
    let seq = planner.seq(global_batch)? as f64;
    let baselines = placed
        .methods
        .iter()
        .filter(|m| m.method != JOINT_SEARCH)
        .map(|m| Baseline {
            method: m.method,
            iteration_ms: m.planned.as_ref().map(|p| p.report.iteration_us / 1e3),
            fits: m.planned.as_ref().is_some_and(|p| p.report.fits()),
            out_of_time: m.out_of_time,
        })
        .collect();
    let Planned { plan, report } = best.clone();
    Ok(HybridPlaced {
        model: r.model.to_string(),
        iteration_ms: report.iteration_us / 1e3,
        tokens_per_s: f64::from(global_batch) * seq / (report.iteration_us * 1e-6),
        fits: report.fits(),
        speedup_over_best_other: best_other.map(|t| t / report.iteration_us),
        baselines,
        search_seconds: r.started.elapsed().as_secs_f64(),
        cluster,
        plan,
        report,
    })
}

/// [`load_policy`] under `--time`: a policy not read within [`POLICY_READ_SHARE`] of the limit
/// is not waited for (a file of hundreds of megabytes takes seconds to check and decode), and
/// the search runs with uniform priors; the third value says so. Without a limit, the policy.
fn load_policy_in_time(r: &PlaceRequest) -> Result<(Option<GnnPolicy>, String, Option<String>)> {
    let Some(limit) = r.time else {
        let (policy, shown) = load_policy(r.policy, r.gnn_device)?;
        return Ok((policy, shown, None));
    };
    let (named, device) = (r.policy.to_string(), r.gnn_device.to_string());
    let wait = Duration::try_from_secs_f64(limit * POLICY_READ_SHARE)
        .unwrap_or(Duration::MAX)
        .saturating_sub(r.started.elapsed());
    match crate::interrupt::answer_within(wait, move || load_policy(&named, &device)) {
        Some(loaded) => {
            let (policy, shown) = loaded?;
            Ok((policy, shown, None))
        }
        None => Ok((
            None,
            "none".to_string(),
            Some(format!(
                "the policy {} was not read within {:.0}% of --time: the search used uniform \
                 priors",
                r.policy,
                POLICY_READ_SHARE * 100.0
            )),
        )),
    }
}

/// The share of `place --time` the policy file may take to read.
const POLICY_READ_SHARE: f64 = 0.5;

/// The policy `policy` names and how the summary shows it: `none` (uniform priors), `shipped`
/// (the policy embedded in the binary) or a file. Read before any search starts, so a bad file
/// fails fast and names itself.
pub fn load_policy(policy: &str, device: &str) -> Result<(Option<GnnPolicy>, String)> {
    let device = gnn::device_named(device)?;
    match policy {
        "" => Err(InputError::new(
            "<cli>",
            "--policy",
            "empty: give `shipped`, `none` or a policy file",
        )
        .into()),
        "none" => Ok((None, "none".into())),
        "shipped" => Ok((
            Some(GnnPolicy::shipped_on(&device)?),
            format!("{SHIPPED_POLICY} (shipped)"),
        )),
        file => Ok((
            Some(GnnPolicy::load_on(std::path::Path::new(file), &device)?),
            file.to_string(),
        )),
    }
}
