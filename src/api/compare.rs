//! `compare`: placers (and for language models of a billion parameters or more, the hybrid
//! planners) on every model × cluster, as rows of one table.

use std::path::Path;

use super::numerics::Numerics;
use super::progress::bar_if;
use crate::cluster::Cluster;
use crate::error::{InputError, Result};
use crate::graph::Graph;
use crate::hybrid::{self, planned_by_default};
use crate::placers::compare::{self, HybridCase, Methods, Row};
use crate::placers::{Budget, Placer};
use crate::resolve::load_named_cluster;

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareRequest<'a> {
    /// Zoo names or graph files.
    pub models: &'a [String],
    /// The batch of every model; `None`: each model's own.
    pub batch: Option<u32>,
    /// How the models train.
    pub numerics: Numerics,
    /// Cluster config files or names of shipped ones.
    pub clusters: &'a [String],
    /// `all`, or comma-separated method names.
    pub methods: &'a str,
    /// Seed of the randomised placers.
    pub seed: u64,
    /// Simulator calls each search may make.
    pub budget: usize,
    /// Each method's wall-clock limit (the hybrid planners' together), seconds.
    pub time_limit: Option<f64>,
}

/// A comparison with its inputs loaded: every name resolved, every model built, so that a bad
/// one is refused before any placer runs.
pub struct Comparison {
    clusters: Vec<(String, Cluster)>,
    placed: Vec<(String, Graph)>,
    planned: Vec<(String, Graph)>,
    methods: Methods,
    numerics: Numerics,
    budget: Budget,
    time_limit: Option<f64>,
}

impl Comparison {
    /// Loads what `r` names.
    pub fn prepare(r: &CompareRequest) -> Result<Comparison> {
        let methods = compare::parse_methods(r.methods)?;
        compare::named_once(r.models, "--models")?;
        compare::named_once(r.clusters, "--clusters")?;
        let labelled: Vec<(String, &String)> =
            r.clusters.iter().map(|c| (cluster_label(c), c)).collect();
        compare::distinct_outputs(r.models, &labelled)?;
        let clusters = r
            .clusters
            .iter()
            .map(|c| {
                let cluster = load_named_cluster(c, "--clusters")?;
                r.numerics.check(&cluster)?;
                Ok((cluster_label(c), cluster))
            })
            .collect::<Result<Vec<_>>>()?;
        // Language models of a billion parameters or more get the hybrid planners (and the
        // placers only when named); the other models the placers.
        let (mut placed, mut planned) = (Vec::new(), Vec::new());
        for m in r.models {
            let graph = (m.clone(), r.numerics.model_from("--models", m, r.batch)?);
            match planned_by_default(m)? {
                true => planned.push(graph),
                false => placed.push(graph),
            }
        }
        let comparison = Comparison {
            clusters,
            placed,
            planned,
            methods,
            numerics: r.numerics,
            budget: Budget {
                steps: r.budget,
                seconds: r.time_limit,
                seed: r.seed,
                deadline: None,
            },
            time_limit: r.time_limit,
        };
        if comparison.rows() == 0 {
            // Only hybrid planners named, and no model they plan: an empty table and exit 0
            // would hide it.
            return Err(InputError::new(
                "<cli>",
                "--methods",
                format!(
                    "the hybrid planners ({}) plan zoo GPTs and Llamas (or model-spec files) of a billion parameters \
                     or more, and none of --models is one",
                    comparison.methods.hybrid.join(", ")
                ),
            )
            .into());
        }
        Ok(comparison)
    }

    /// The placers run on the language models: none under `all` (the hybrid planners place
    /// them), the named ones otherwise.
    fn lm_placers(&self) -> &[Box<dyn Placer>] {
        if self.methods.all {
            &[]
        } else {
            &self.methods.placers
        }
    }

    /// The rows [`Comparison::run`] will produce.
    pub fn rows(&self) -> usize {
        (self.placed.len() * self.methods.placers.len()
            + self.planned.len() * (self.lm_placers().len() + self.methods.hybrid.len()))
            * self.clusters.len()
    }

    /// Runs every method on every model × cluster; `on_row` hears of each row as it is done.
    pub fn run(&self, mut on_row: impl FnMut(&Row)) -> Result<Vec<Row>> {
        let cost = self.numerics.cost();
        let (clusters, budget) = (&self.clusters, &self.budget);
        let placers = &self.methods.placers;
        let mut rows = compare::run(&self.placed, clusters, placers, budget, &cost, &mut on_row);
        let lm_placers = self.lm_placers();
        rows.extend(compare::run(
            &self.planned,
            clusters,
            lm_placers,
            budget,
            &cost,
            &mut on_row,
        ));
        if self.methods.hybrid.is_empty() {
            return Ok(rows);
        }
        let opts = self.numerics.zoo_options();
        for (model, graph) in &self.planned {
            let case = HybridCase {
                model,
                opts: &opts,
                precision: self.numerics.precision,
                global_batch: graph.batch_size,
                seconds: self.time_limit.unwrap_or(hybrid::DEFAULT_SECONDS),
            };
            for (label, cluster) in clusters {
                if crate::interrupt::requested() {
                    return Ok(rows);
                }
                for row in compare::hybrid_rows(&case, label, cluster, &cost, &self.methods.hybrid)?
                {
                    on_row(&row);
                    rows.push(row);
                }
            }
        }
        Ok(rows)
    }
}

impl Comparison {
    /// [`Comparison::run`] with the command line's progress bar on stderr (when `show` and
    /// stderr is a terminal): rows done of all, and the one being run.
    pub fn run_showing_progress(&self, show: bool) -> Result<Vec<Row>> {
        let bar = bar_if(show, self.rows() as u64)?;
        let rows = self.run(|row: &Row| {
            bar.set_message(format!("{} {} {}", row.model, row.cluster, row.method));
            bar.inc(1);
        });
        bar.finish_and_clear();
        rows
    }
}

/// How a cluster argument appears in results: a config file by its stem ("tag-testbed" for
/// configs/tag-testbed.toml), a shipped config by its name.
pub fn cluster_label(arg: &str) -> String {
    Path::new(arg)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| arg.to_string())
}
