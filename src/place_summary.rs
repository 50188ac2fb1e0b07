//! What `topoplace place` reports: the strategy the search chose, per group, against the best
//! other method first (the fastest of every placer that needs no search, `dp-subset` — data
//! parallelism over the best subset of device groups — among them) and DP-NCCL second.

use serde::Serialize;

use crate::cluster::Cluster;
use crate::graph::Graph;
use crate::mcts::SearchResult;
use crate::strategy::{BatchSplit, Strategy};
use crate::units::{no_negative_zero, to_gib, to_ms};

/// One op group of the chosen strategy.
#[derive(Debug, Clone, Serialize)]
pub struct PlacedGroup {
    /// The op group's position in search order (descending compute).
    pub group: usize,
    /// Ops in the op group.
    pub ops: usize,
    /// Indices of the GPUs the op group runs on.
    pub devices: Vec<usize>,
    /// The device groups those GPUs belong to, `name#index`, with `: k of n` when partly used.
    pub device_groups: Vec<String>,
    /// The replication option chosen: `all-reduce`, `ps`, `duplicate` or `model-parallel`.
    pub option: &'static str,
    /// How its replicas share the batch ("even", "proportional"); none where they do not split
    /// it.
    pub shares: Option<&'static str>,
}

/// One stage of a pipeline: its op groups' ops and the GPUs they run on.
#[derive(Debug, Clone, Serialize)]
pub struct PlacedStage {
    /// The stage's position in the pipeline chain, from 0.
    pub stage: usize,
    /// The op groups (search-order indices) in this stage.
    pub groups: Vec<usize>,
    /// Ops in the stage, summed over its op groups.
    pub ops: usize,
    /// Indices of the GPUs the stage runs on: the union over its op groups.
    pub devices: Vec<usize>,
    /// The device groups those GPUs belong to, `name#index`, with `: k of n` when partly used.
    pub device_groups: Vec<String>,
}

/// The pipeline of the chosen strategy, when it has one.
#[derive(Debug, Clone, Serialize)]
pub struct PlacedPipeline {
    /// Micro-batches each iteration's batch is cut into.
    pub micro_batches: u32,
    /// The pipeline schedule: `gpipe` or `1f1b`.
    pub schedule: &'static str,
    /// The stages, in chain order.
    pub stages: Vec<PlacedStage>,
}

/// The result of `topoplace place`; the JSON keys of `--json` are these field names.
#[derive(Debug, Clone, Serialize)]
pub struct PlaceSummary {
    /// The graph's name.
    pub model: String,
    /// The cluster's name.
    pub cluster: String,
    /// The GNN policy giving the search's priors: its file, `... (shipped)`, or `none` (uniform).
    pub policy: String,
    /// Simulated iteration time of the chosen strategy, µs.
    pub iteration_us: f64,
    /// Simulated iteration time of DP-NCCL, µs.
    pub dp_nccl_us: f64,
    /// `dp_nccl_us / iteration_us − 1`: 0.25 means 25% faster than DP-NCCL.
    pub speedup_over_dp: f64,
    /// Whether DP-NCCL fits in every GPU's memory (its time is a reference only when not).
    pub dp_nccl_fits: bool,
    /// Name of the fastest fitting no-search placer (`none` when none fits).
    pub best_heuristic: String,
    /// That placer's simulated iteration time, µs (infinite when none fits).
    pub best_heuristic_us: f64,
    /// `best_heuristic_us / iteration_us − 1`: the speed-up over the best other method.
    pub speedup_over_heuristic: f64,
    /// Largest peak memory of any GPU under the chosen strategy, bytes.
    pub peak_memory_bytes: f64,
    /// MCTS iterations run (leaf evaluations, cache hits included).
    pub iterations: usize,
    /// Distinct strategies simulated.
    pub simulated: usize,
    /// Of them, pipelines the tree simulated below its pipeline frames.
    pub pipeline_leaves: usize,
    /// Size of the action space: the (device-group set, option) pairs each op group chooses from.
    pub actions: usize,
    /// Wall time of the search, seconds.
    pub search_seconds: f64,
    /// Search throughput: MCTS iterations per second of wall time.
    pub iterations_per_second: f64,
    /// The first iteration (1-based) whose strategy fit and beat DP-NCCL; 0 when the starting
    /// strategy already did, `None` when none did.
    pub iterations_to_beat_dp: Option<usize>,
    /// The chosen decision of each op group, in search order.
    pub groups: Vec<PlacedGroup>,
    /// The chosen strategy's pipeline; `None` when it has none.
    pub pipeline: Option<PlacedPipeline>,
}

impl PlaceSummary {
    /// Summarise the search result `found` for `graph` on `cluster`, against the best no-search
    /// placer (`heuristic`, at `heuristic_us` µs); `policy` is the priors' source as shown.
    pub fn new(
        graph: &Graph,
        cluster: &Cluster,
        policy: &str,
        found: &SearchResult,
        heuristic: String,
        heuristic_us: f64,
    ) -> PlaceSummary {
        let t = found.iteration_us();
        PlaceSummary {
            model: graph.name.clone(),
            cluster: cluster.name.clone(),
            policy: policy.to_string(),
            iteration_us: t,
            dp_nccl_us: found.dp_us,
            speedup_over_dp: crate::units::speedup(found.dp_us, t) - 1.0,
            dp_nccl_fits: found.dp_fits,
            best_heuristic: heuristic,
            best_heuristic_us: heuristic_us,
            speedup_over_heuristic: crate::units::speedup(heuristic_us, t) - 1.0,
            peak_memory_bytes: found
                .evaluation
                .report
                .devices
                .iter()
                .map(|d| d.peak_memory_bytes)
                .fold(0.0, f64::max),
            iterations: found.iterations,
            simulated: found.simulated,
            pipeline_leaves: found.pipeline_leaves,
            actions: found.actions,
            search_seconds: found.seconds,
            iterations_per_second: found.iterations_per_second(),
            iterations_to_beat_dp: found.beat_dp_at,
            groups: found
                .decisions
                .iter()
                .zip(&found.group_ops)
                .zip(&found.shares)
                .enumerate()
                .map(|(i, ((d, &ops), &split))| PlacedGroup {
                    group: i,
                    ops,
                    devices: d.devices.clone(),
                    device_groups: device_group_names(cluster, &d.devices),
                    option: d.option.name(),
                    shares: (d.option.splits_batch() && d.devices.len() > 1)
                        .then_some(split_name(split)),
                })
                .collect(),
            pipeline: placed_pipeline(cluster, &found.strategy),
        }
    }

    /// The text `topoplace place` prints: the result first, then the search, then the strategy
    /// with consecutive op groups of the same decision on one line (the per-group list is in
    /// `--json` and the `--out` file).
    pub fn render_text(&self) -> String {
        let s = self;
        let priors = if s.policy == "none" {
            "uniform priors".to_string()
        } else {
            format!("GNN priors from {}", s.policy)
        };
        // The tree may never beat DP-NCCL while the result does: a heuristic it started from
        // (dp-subset) already did.
        let beat = match s.iterations_to_beat_dp {
            Some(i) => i.to_string(),
            None if s.dp_nccl_fits && s.speedup_over_dp > 0.0 => {
                "never in the tree (a heuristic it started from did)".to_string()
            }
            None => "never".to_string(),
        };
        let dp = if s.dp_nccl_fits {
            format!(
                "speed-up {:+.1}%",
                no_negative_zero(100.0 * s.speedup_over_dp, 1)
            )
        } else {
            "out of memory".to_string()
        };
        let mut out = format!(
            "{} on {}\n\
             iteration time    {:.3} ms\n\
             best other method {} {:.3} ms (speed-up {:+.1}%)\n\
             DP-NCCL           {:.3} ms ({dp})\n\
             peak memory       {:.2} GiB\n\
             search            MCTS ({priors}), {} iterations over {} actions, {} strategies \
             simulated ({} pipelines in the tree)\n\
             search time       {:.2} s ({:.1} iterations/s)\n\
             beat DP-NCCL at   iteration {}\n",
            s.model,
            s.cluster,
            to_ms(s.iteration_us),
            s.best_heuristic,
            to_ms(s.best_heuristic_us),
            no_negative_zero(100.0 * s.speedup_over_heuristic, 1),
            to_ms(s.dp_nccl_us),
            to_gib(s.peak_memory_bytes),
            s.iterations,
            s.actions,
            s.simulated,
            s.pipeline_leaves,
            s.search_seconds,
            s.iterations_per_second,
            beat
        );
        if let Some(pipe) = &s.pipeline {
            out += &pipeline_text(pipe);
        }
        out += &format!(
            "strategy          {} op groups (consecutive groups with one decision share a line)\n",
            s.groups.len()
        );
        out += "groups      ops  option          shares        devices (device groups)\n";
        for run in decision_runs(&s.groups) {
            let (first, last) = (&run[0], &run[run.len() - 1]);
            let groups = if run.len() == 1 {
                first.group.to_string()
            } else {
                format!("{}-{}", first.group, last.group)
            };
            out += &format!(
                "{:<9} {:>5}  {:<15} {:<13} {:?} ({})\n",
                groups,
                run.iter().map(|g| g.ops).sum::<usize>(),
                first.option,
                first.shares.unwrap_or("-"),
                first.devices,
                first.device_groups.join(", ")
            );
        }
        out
    }
}

/// The pipeline's stages, in chain order, a line each.
fn pipeline_text(pipe: &PlacedPipeline) -> String {
    let mut out = format!(
        "pipeline          {} stages, {} micro-batches, {} schedule\n",
        pipe.stages.len(),
        pipe.micro_batches,
        pipe.schedule
    );
    out += "stage  groups     ops  devices (device groups)\n";
    for st in &pipe.stages {
        let groups: Vec<String> = st.groups.iter().map(|g| g.to_string()).collect();
        out += &format!(
            "{:<6} {:<8} {:>5}  {:?} ({})\n",
            st.stage,
            groups.join(","),
            st.ops,
            st.devices,
            st.device_groups.join(", ")
        );
    }
    out
}

/// The strategy's pipeline by stage: each stage's groups, ops and GPUs (the union over its
/// groups).
fn placed_pipeline(cluster: &Cluster, strategy: &Strategy) -> Option<PlacedPipeline> {
    let pipe = strategy.pipeline.as_ref()?;
    let members = strategy.members();
    let stages = pipe
        .stage_groups()
        .into_iter()
        .enumerate()
        .map(|(stage, groups)| {
            let mut devices: Vec<usize> = groups
                .iter()
                .flat_map(|&g| strategy.decision(g).devices.iter().copied())
                .collect();
            devices.sort_unstable();
            devices.dedup();
            PlacedStage {
                stage,
                ops: groups.iter().map(|&g| members[g].len()).sum(),
                device_groups: device_group_names(cluster, &devices),
                devices,
                groups,
            }
        })
        .collect();
    Some(PlacedPipeline {
        micro_batches: pipe.micro_batches,
        schedule: pipe.schedule.name(),
        stages,
    })
}

/// Maximal runs of consecutive groups with the same devices, option and shares.
fn decision_runs(groups: &[PlacedGroup]) -> Vec<&[PlacedGroup]> {
    groups
        .chunk_by(|a, b| a.devices == b.devices && a.option == b.option && a.shares == b.shares)
        .collect()
}

fn split_name(split: BatchSplit) -> &'static str {
    match split {
        BatchSplit::Even => "even",
        BatchSplit::Proportional => "proportional",
    }
}

/// Names of the device groups `devices` use: whole (`v100-0#0`) or in part (`v100-0#0: 4 of 8`,
/// a pipeline stage on half a machine).
fn device_group_names(cluster: &Cluster, devices: &[usize]) -> Vec<String> {
    cluster
        .groups
        .iter()
        .filter_map(|g| {
            let used = g.devices.iter().filter(|d| devices.contains(d)).count();
            let name = format!("{}#{}", g.name, g.index);
            match used {
                0 => None,
                n if n == g.devices.len() => Some(name),
                n => Some(format!("{name}: {n} of {}", g.devices.len())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(group: usize, ops: usize, devices: Vec<usize>, option: &'static str) -> PlacedGroup {
        PlacedGroup {
            group,
            ops,
            device_groups: vec![format!("g{}", devices[0])],
            devices,
            option,
            shares: None,
        }
    }

    /// A summary of a 1 ms plan, 2× faster than DP-NCCL and 1.5× than the best heuristic.
    fn summary() -> PlaceSummary {
        PlaceSummary {
            model: "m".into(),
            cluster: "c".into(),
            policy: "none".into(),
            iteration_us: 1000.0,
            dp_nccl_us: 2000.0,
            speedup_over_dp: 1.0,
            dp_nccl_fits: true,
            best_heuristic: "horovod".into(),
            best_heuristic_us: 1500.0,
            speedup_over_heuristic: 0.5,
            peak_memory_bytes: 0.0,
            iterations: 1,
            simulated: 1,
            pipeline_leaves: 0,
            actions: 1,
            search_seconds: 0.0,
            iterations_per_second: 0.0,
            iterations_to_beat_dp: Some(0),
            pipeline: None,
            groups: Vec::new(),
        }
    }

    #[test]
    fn consecutive_groups_with_one_decision_share_a_line() {
        let summary = PlaceSummary {
            groups: vec![
                group(0, 3, vec![0, 1], "all-reduce"),
                group(1, 4, vec![0, 1], "all-reduce"),
                group(2, 5, vec![0], "model-parallel"),
                group(3, 6, vec![0, 1], "all-reduce"),
                PlacedGroup {
                    shares: Some("proportional"),
                    ..group(4, 2, vec![0, 1], "all-reduce")
                },
            ],
            ..summary()
        };
        let text = summary.render_text();
        // The result leads; the strategy follows, four runs for five groups (the last differs
        // from its neighbour in its shares only).
        assert!(
            text.starts_with("m on c\niteration time    1.000 ms\n"),
            "{text}"
        );
        let runs: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("groups"))
            .skip(1)
            .collect();
        assert_eq!(runs.len(), 4, "{text}");
        assert!(
            runs[0].starts_with("0-1") && runs[0].contains(" 7  all-reduce"),
            "{text}"
        );
        assert!(
            runs[1].starts_with("2 ") && runs[1].contains("model-parallel"),
            "{text}"
        );
        assert!(
            runs[2].starts_with("3 ") && runs[2].contains(" 6  all-reduce"),
            "{text}"
        );
        assert!(
            runs[3].starts_with("4 ") && runs[3].contains("all-reduce      proportional"),
            "{text}"
        );
    }

    #[test]
    fn dp_nccl_that_does_not_fit_gets_no_speed_up() {
        let fits = PlaceSummary {
            iterations_to_beat_dp: None,
            ..summary()
        };
        assert!(
            fits.render_text()
                .contains("DP-NCCL           2.000 ms (speed-up +100.0%)")
        );
        let oom = PlaceSummary {
            dp_nccl_fits: false,
            ..fits
        };
        assert!(
            oom.render_text()
                .contains("DP-NCCL           2.000 ms (out of memory)")
        );
    }
}
