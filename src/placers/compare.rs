//! `topoplace compare`: every (model, cluster, method) placed and simulated, with results as CSV,
//! a Markdown table and one SVG bar chart per (model, cluster). A method that fails or runs out
//! of memory is a row saying so; the comparison goes on.

use std::fmt::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Budget, Placer, placer, registry};
use crate::cluster::Cluster;
use crate::cost::CostModel;
use crate::error::{Error, InputError, Result, SearchError};
use crate::evaluate::evaluate;
use crate::gnn::LayoutPolicy;
use crate::graph::Graph;
use crate::hybrid::{HybridPlan, JOINT_SEARCH, Planner, plan_all};
use crate::io::write_all_atomic;
use crate::precision::Precision;
use crate::problem::Problem;
use crate::render::{self, svg_open, xml_escape};
use crate::strategy::Reference;
use crate::units::to_ms;
use crate::zoo::ZooOptions;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// One (model, cluster, method) result.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// The model's label as given to `--models` (zoo name or graph file).
    pub model: String,
    /// The cluster's label as given to `--clusters`.
    pub cluster: String,
    /// The placer's registered name.
    pub method: String,
    /// Simulated iteration time (absent if the method failed).
    pub iteration_ms: Option<f64>,
    /// DP-NCCL's iteration time over this one.
    pub speedup_over_dp: Option<f64>,
    /// Highest peak memory of any GPU.
    pub peak_memory_gib: Option<f64>,
    /// Whether any GPU ran out of memory in the simulation.
    pub oom: bool,
    /// Time the placer took, seconds.
    pub search_s: f64,
    /// What the placer was allowed: the budget's steps, or `tag`'s wall-clock time for the
    /// searches compared with it at equal time.
    pub budget: String,
    /// Why the method produced no result (its error, or a panic of the placer or simulation).
    pub error: Option<String>,
    /// The placement's own description of what it is ([`crate::evaluate::Placement::note`]).
    pub note: String,
}

/// The methods a comparison runs: placers of op groups, and hybrid planners of language models.
pub struct Methods {
    /// The placers, run on every model (on a language model planned with hybrid plans only when
    /// named).
    pub placers: Vec<Box<dyn Placer>>,
    /// The hybrid planners (`megatron`, `fsdp`, `metis-atc24`, `sailor`, `hybrid`), run on the
    /// language models of a billion parameters or more.
    pub hybrid: Vec<&'static str>,
    /// Whether the list was `all`.
    pub all: bool,
}

/// The hybrid planners' names, in the order `plan_all` runs them.
pub const HYBRID_METHODS: [&str; 5] = ["megatron", "fsdp", "metis-atc24", "sailor", JOINT_SEARCH];

/// `all`, or a comma-separated list of registered names and hybrid planners.
pub fn parse_methods(spec: &str) -> Result<Methods> {
    if spec == "all" {
        return Ok(Methods {
            placers: registry(),
            hybrid: HYBRID_METHODS.to_vec(),
            all: true,
        });
    }
    let mut methods = Methods {
        placers: Vec::new(),
        hybrid: Vec::new(),
        all: false,
    };
    let names: Vec<&str> = spec.split(',').map(str::trim).collect();
    // One list for every refusal: `all`, the placers, the exact MILPs and the hybrid planners.
    let expected = || {
        let exact: Vec<&str> = super::exact().iter().map(|p| p.name()).collect();
        format!(
            "`all` or names from: {}, {}, {}",
            super::names().join(", "),
            exact.join(", "),
            HYBRID_METHODS.join(", ")
        )
    };
    if names.iter().any(|n| n.is_empty()) {
        // `heft,,dpos`, a trailing comma or `""`: a name was left out, as `--models a,,b` says.
        return Err(Error::Unknown {
            kind: "placement method",
            name: String::new(),
            expected: expected(),
        });
    }
    // A second row of the same method would only repeat the first.
    named_once(&names, "--methods")?;
    for name in names {
        match HYBRID_METHODS.iter().find(|&&h| h == name) {
            Some(&h) => methods.hybrid.push(h),
            None => methods
                .placers
                .push(placer(name).map_err(|_| Error::Unknown {
                    kind: "placement method",
                    name: name.to_string(),
                    expected: expected(),
                })?),
        }
    }
    // `split` yields at least one name, and each is a method or an error: the list is never
    // empty, so nothing runs without being asked.
    Ok(methods)
}

/// What a comparison of hybrid planners is given for one language model.
pub struct HybridCase<'a> {
    /// The model's label and zoo name.
    pub model: &'a str,
    /// How the zoo builds it.
    pub opts: &'a ZooOptions,
    /// Its precision.
    pub precision: Precision,
    /// Sequences per iteration.
    pub global_batch: u32,
    /// Seconds the planners may take together.
    pub seconds: f64,
}

/// The rows of `methods` (hybrid planners) on `case` and one cluster: each planner's plan
/// simulated, or the reason it has none.
pub fn hybrid_rows(
    case: &HybridCase,
    cluster_label: &str,
    cluster: &Cluster,
    cost: &CostModel,
    methods: &[&str],
) -> Result<Vec<Row>> {
    let mut planner = Planner::new(
        case.model,
        case.opts,
        case.precision,
        cluster,
        cost,
        case.global_batch,
    )?;
    let end = Instant::now() + std::time::Duration::from_secs_f64(case.seconds);
    let priors = LayoutPolicy::shipped()?;
    let placed = plan_all(&mut planner, Some(end), &priors)?;
    Ok(placed
        .methods
        .iter()
        .filter(|m| methods.contains(&m.method))
        .map(|m| {
            let mut row = Row {
                model: case.model.to_string(),
                cluster: cluster_label.to_string(),
                method: m.method.to_string(),
                iteration_ms: None,
                speedup_over_dp: None,
                peak_memory_gib: None,
                oom: false,
                search_s: m.seconds,
                budget: format!("{:.0} s for all five", case.seconds),
                error: None,
                note: String::new(),
            };
            match &m.planned {
                Some(p) => {
                    row.iteration_ms = Some(to_ms(p.report.iteration_us));
                    row.oom = !p.report.fits();
                    row.peak_memory_gib =
                        Some(p.report.memory().map(|d| d.total).fold(0.0, f64::max) / GIB);
                    row.note = describe(&p.plan);
                }
                None if m.out_of_time => row.error = Some("no plan in its time".to_string()),
                None => row.error = Some("no plan".to_string()),
            }
            row
        })
        .collect())
}

/// A hybrid plan in a few words: stages, and each stage's GPUs as TP × DP with its ZeRO stage.
fn describe(plan: &HybridPlan) -> String {
    let stages: Vec<String> = plan
        .stages
        .iter()
        .map(|s| format!("{}x{} z{}", s.tp(), s.dp(), s.zero.level()))
        .collect();
    format!(
        "{} micro-batches; stages (TPxDP ZeRO): {}",
        plan.micro_batches,
        stages.join(", ")
    )
}

/// Run every method on every (model, cluster) under `cost`; `on_row` sees each row as it is done
/// (progress). A stop request ([`crate::interrupt`]) ends it after the method running then.
pub fn run(
    models: &[(String, Graph)],
    clusters: &[(String, Cluster)],
    methods: &[Box<dyn Placer>],
    budget: &Budget,
    cost: &CostModel,
    mut on_row: impl FnMut(&Row),
) -> Vec<Row> {
    let mut rows = Vec::new();
    'all: for (model, graph) in models {
        for (cluster_name, cluster) in clusters {
            let p = Problem {
                graph,
                cluster,
                cost,
            };
            let dp = dp_iteration_us(&p);
            let mut done: Vec<Option<Row>> = vec![None; methods.len()];
            let mut tag_seconds = None;
            for i in run_order(methods) {
                if crate::interrupt::requested() {
                    break;
                }
                let m = methods[i].as_ref();
                let (budget, allowed) = fair_budget(m.name(), budget, tag_seconds);
                let mut row = run_one(&p, m, &budget);
                if m.name() == "tag" {
                    tag_seconds = Some(row.search_s);
                }
                row.budget = allowed;
                row.model = model.clone();
                row.cluster = cluster_name.clone();
                row.speedup_over_dp = match (dp, row.iteration_ms) {
                    (Some(dp), Some(t)) if t > 0.0 => Some(to_ms(dp) / t),
                    _ => None,
                };
                on_row(&row);
                done[i] = Some(row);
            }
            rows.extend(done.into_iter().flatten());
            if crate::interrupt::requested() {
                break 'all;
            }
        }
    }
    rows
}

/// Searches that get `tag`'s wall-clock time when both are compared (the issue of fairness the
/// papers' comparisons leave open): their steps are unbounded and the time is `tag`'s.
pub(crate) const EQUAL_TIME: &[&str] = &["mcmc", "local-search"];

/// Indices of `methods` in the order they run: `tag` first, so the equal-time searches know its
/// time; rows are reported in the given order.
fn run_order(methods: &[Box<dyn Placer>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..methods.len()).collect();
    order.sort_by_key(|&i| methods[i].name() != "tag");
    order
}

/// The budget of `method` and how the table states it.
fn fair_budget(method: &str, budget: &Budget, tag_seconds: Option<f64>) -> (Budget, String) {
    match tag_seconds {
        Some(seconds) if EQUAL_TIME.contains(&method) => (
            Budget {
                steps: usize::MAX,
                seconds: Some(seconds),
                seed: budget.seed,
                deadline: None,
            },
            format!("equal time: {seconds:.2} s (tag's)"),
        ),
        _ => (*budget, format!("{} steps", budget.steps)),
    }
}

fn dp_iteration_us(p: &Problem) -> Option<f64> {
    let placement = super::Placement::plain(Reference::Dp.strategy(p.graph, p.cluster), "");
    evaluate(p, &placement).ok().map(|e| e.report.iteration_us)
}

/// Place and simulate one method; failures (errors or panics) become the row's `error`.
pub(crate) fn run_one(p: &Problem, m: &dyn Placer, budget: &Budget) -> Row {
    let began = Instant::now();
    let budget = with_deadline(budget, began);
    let outcome = catch_unwind(AssertUnwindSafe(|| m.place(p, &budget)));
    let search_s = began.elapsed().as_secs_f64();
    let mut row = Row {
        model: String::new(),
        cluster: String::new(),
        method: m.name().to_string(),
        iteration_ms: None,
        speedup_over_dp: None,
        peak_memory_gib: None,
        oom: false,
        search_s,
        budget: String::new(),
        error: None,
        note: String::new(),
    };
    let placement = match outcome {
        Ok(Ok(pl)) => pl,
        Ok(Err(Error::Search(SearchError::OutOfTime))) => {
            row.error = Some("no plan in its time".to_string());
            return row;
        }
        Ok(Err(e)) => {
            row.error = Some(e.to_string());
            return row;
        }
        Err(_) => {
            row.error = Some("the placer panicked".to_string());
            return row;
        }
    };
    row.note = placement.note.clone();
    match catch_unwind(AssertUnwindSafe(|| evaluate(p, &placement))) {
        Ok(Ok(e)) => {
            row.iteration_ms = Some(to_ms(e.report.iteration_us));
            row.oom = !e.result.oom.is_empty();
            row.peak_memory_gib =
                Some(e.result.peak_memory.iter().copied().fold(0.0, f64::max) / GIB);
        }
        Ok(Err(e)) => row.error = Some(e.to_string()),
        Err(_) => row.error = Some("the simulation panicked".to_string()),
    }
    row
}

/// `budget` with its time limit, if any, as a deadline from `began`: a method's time limit
/// holds for every method, so the list schedulers, `dp-subset` and `pipeline-dp` (which take no
/// steps to count) give up at it too, and the row says "no plan in its time".
fn with_deadline(budget: &Budget, began: Instant) -> Budget {
    let from_limit = budget.seconds.map(|s| began + Duration::from_secs_f64(s));
    Budget {
        deadline: budget.deadline.or(from_limit),
        ..*budget
    }
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// What the status column says.
fn status(r: &Row) -> String {
    match (&r.error, r.oom) {
        (Some(e), _) => format!("failed: {e}"),
        (None, true) => "OOM".to_string(),
        (None, false) => "ok".to_string(),
    }
}

/// The rows as a Markdown table (`results.md`), one line per row with its status.
pub fn markdown(rows: &[Row]) -> String {
    let mut s = String::from(
        "| model | cluster | method | iteration ms | speed-up over DP-NCCL | peak memory GiB | OOM | search s | budget | status |\n\
         |---|---|---|---:|---:|---:|---|---:|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} |",
            cell(&r.model),
            cell(&r.cluster),
            r.method,
            fmt_opt(r.iteration_ms, 2),
            fmt_opt(r.speedup_over_dp, 2),
            fmt_opt(r.peak_memory_gib, 2),
            if r.oom { "yes" } else { "no" },
            r.search_s,
            r.budget,
            status(r).replace('|', "/"),
        );
    }
    s
}

/// `text` as one Markdown table cell: a `|` in a file name would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The rows as CSV (`results.csv`).
pub(crate) fn csv(rows: &[Row]) -> String {
    let header = [
        "model",
        "cluster",
        "method",
        "iteration_ms",
        "speedup_over_dp",
        "peak_memory_gib",
        "oom",
        "search_s",
        "budget",
        "error",
        "note",
    ];
    let fixed = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                r.cluster.clone(),
                r.method.clone(),
                fixed(r.iteration_ms),
                fixed(r.speedup_over_dp),
                fixed(r.peak_memory_gib),
                r.oom.to_string(),
                format!("{:.3}", r.search_s),
                r.budget.clone(),
                r.error.clone().unwrap_or_default(),
                r.note.clone(),
            ]
        })
        .collect();
    render::csv(&header, &lines)
}

/// A horizontal bar chart of iteration time per method; OOM bars red, failures as text.
pub(crate) fn svg(title: &str, rows: &[&Row]) -> String {
    let (left, bar_h, gap, width) = (110.0, 18.0, 6.0, 420.0);
    let top = 30.0;
    let height = top + rows.len() as f64 * (bar_h + gap) + 10.0;
    let max = rows
        .iter()
        .filter_map(|r| r.iteration_ms)
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let mut s = svg_open(
        left + width + 120.0,
        height,
        &format!("{title} (iteration ms)"),
    );
    for (i, r) in rows.iter().enumerate() {
        let y = top + i as f64 * (bar_h + gap);
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + bar_h - 5.0,
            xml_escape(&r.method)
        );
        let label = match (r.iteration_ms, &r.error) {
            (Some(t), _) => {
                let w = width * t / max;
                let colour = if r.oom { "#d62728" } else { "#1f77b4" };
                let _ = writeln!(
                    s,
                    "<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{colour}\"/>"
                );
                let oom = if r.oom { " OOM" } else { "" };
                (format!("{t:.2}{oom}"), left + w + 4.0)
            }
            (None, _) => ("failed".to_string(), left + 4.0),
        };
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\">{}</text>",
            label.1,
            y + bar_h - 5.0,
            xml_escape(&label.0)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Write results.csv, results.md and one SVG per (model, cluster) into `dir` as one: when any
/// cannot be written (a directory where a chart goes), none of the others is replaced.
pub fn write_outputs(dir: &Path, rows: &[Row]) -> Result<()> {
    crate::io::create_dir(dir)?;
    let files = outputs(dir, rows);
    let files: Vec<(&Path, &[u8])> = (files.iter())
        .map(|(path, text)| (path.as_path(), text.as_bytes()))
        .collect();
    write_all_atomic(&files)
}

/// The files [`write_outputs`] writes for `rows` into `dir` (a caller checks none is an input).
pub fn output_paths(dir: &Path, rows: &[Row]) -> Vec<std::path::PathBuf> {
    outputs(dir, rows)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// Each output file with its text.
fn outputs(dir: &Path, rows: &[Row]) -> Vec<(std::path::PathBuf, String)> {
    let mut files = vec![
        (dir.join("results.csv"), csv(rows)),
        (dir.join("results.md"), markdown(rows)),
    ];
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !pairs.contains(&(&r.model, &r.cluster)) {
            pairs.push((&r.model, &r.cluster));
        }
    }
    for (model, cluster) in pairs {
        let chart: Vec<&Row> = rows
            .iter()
            .filter(|r| r.model == model && r.cluster == cluster)
            .collect();
        let title = format!("{model} on {cluster}");
        files.push((dir.join(chart_name(model, cluster)), svg(&title, &chart)));
    }
    files
}

/// The file of the chart of `model` on `cluster`.
pub(crate) fn chart_name(model: &str, cluster: &str) -> String {
    format!("{}_{}.svg", file_stem(model), file_stem(cluster))
}

/// Refuses models and clusters whose results could not be told apart: two clusters shown under
/// one label, or two (model, cluster) pairs whose charts would share a file (`ms/ok.toml` and
/// `ms2/ok.toml` both chart as `ok_<cluster>.svg`, and the second replaced the first).
pub(crate) fn distinct_outputs(models: &[String], clusters: &[(String, &String)]) -> Result<()> {
    for (i, (label, name)) in clusters.iter().enumerate() {
        if let Some((_, first)) = clusters[..i].iter().find(|(l, _)| l == label) {
            let message = format!(
                "{first} and {name} would both be shown as \"{label}\"; give one of them another file name"
            );
            return Err(InputError::new("<cli>", "--clusters", message).into());
        }
    }
    let mut charts: Vec<(String, &str)> = Vec::new();
    for model in models {
        for (label, _) in clusters {
            let chart = chart_name(model, label);
            if let Some((_, first)) = charts.iter().find(|(c, _)| *c == chart) {
                let message = format!(
                    "{first} and {model} would both be charted in {chart}; give one of them another file name"
                );
                return Err(InputError::new("<cli>", "--models", message).into());
            }
            charts.push((chart, model));
        }
    }
    Ok(())
}

/// A name usable in a file name: its last path component without extension.
pub(crate) fn file_stem(name: &str) -> String {
    let stem = Path::new(name)
        .file_stem()
        .map_or(name.to_string(), |s| s.to_string_lossy().into_owned());
    stem.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Refuses a list (`--methods`, `--models`, `--clusters`) that names an entry twice or leaves
/// one empty, naming `flag`: a second entry would only repeat the first one's rows.
pub fn named_once<S: AsRef<str>>(names: &[S], flag: &str) -> Result<()> {
    // `a,,b`, a trailing comma or `,,`: an empty name is a slip, not a second "" entry.
    if names.iter().any(|n| n.as_ref().trim().is_empty()) {
        let message = "a name is empty (two commas in a row, or one at an end?)";
        return Err(InputError::new("<cli>", flag, message).into());
    }
    let twice = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].iter().any(|m| m.as_ref() == n.as_ref()));
    match twice {
        Some((_, n)) => {
            let message = format!("\"{}\" is named twice", n.as_ref());
            Err(InputError::new("<cli>", flag, message).into())
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod markdown_tests {
    use super::cell;

    #[test]
    fn a_bar_in_a_file_name_stays_inside_its_cell() {
        assert_eq!(cell("a|b.toml"), "a\\|b.toml");
        assert_eq!(cell("vgg19"), "vgg19");
    }
}
