//! `topoplace bench gnn`: what the GNN costs on a device, per instance: one forward pass (the
//! priors the search reads at each new vertex) and one training step (cross-entropy over a batch
//! of samples, backward, Adam), each the median of `--repeat` timed runs after warm-up runs (the
//! first runs on a GPU compile its shaders). The graph is the search's start vertex, built as
//! the search builds it; the weights are the shipped policy's.

use std::time::Instant;

use burn::optim::AdamConfig;
use clap::Args;
use serde::Serialize;

use super::place::median;
use crate::cli::common::{
    BenchInstances, GnnDeviceArg, Loaded, Numerics, print_either, progress_bar,
};
use topoplace::error::Result;
use topoplace::gnn::{self, GnnPolicy, adam_step, cross_entropy};
use topoplace::mcts::{DEFAULT_GROUPS, StartGraph, start_graph};

/// Untimed runs before the timed ones.
const WARM_UP: usize = 3;

#[derive(Args)]
pub struct GnnBenchArgs {
    #[command(flatten)]
    instances: BenchInstances,
    /// Where the GNN runs (`wgpu` in builds with `--features wgpu`).
    #[arg(long, default_value = "cpu", value_parser = crate::cli::common::gnn_device)]
    gnn_device: GnnDeviceArg,
    /// Timed runs of each measurement (the median is reported): 1 to 1,000.
    #[arg(long, default_value_t = 20, value_parser = crate::cli::common::bench_repeat)]
    repeat: usize,
    /// Samples in one training step, 1 to 256 (the shipped recipe's batch is 16).
    #[arg(long, default_value_t = 16, value_parser = crate::cli::common::gnn_samples)]
    samples: usize,
    #[arg(long)]
    json: bool,
}

/// One instance's measurements.
#[derive(Debug, Clone, Serialize)]
struct Row {
    model: String,
    cluster: String,
    op_groups: usize,
    device_groups: usize,
    actions: usize,
    device: &'static str,
    forward_ms: f64,
    train_step_ms: f64,
}

pub fn run(args: GnnBenchArgs) -> Result<()> {
    let device = gnn::device_named(args.gnn_device.name())?;
    let policy = GnnPolicy::shipped_on(&device)?;
    let trained = GnnPolicy::shipped_on(&device.clone().autodiff())?;
    let instances = args.instances.pairs()?;
    // Every run, warm-up ones included, of both measurements moves the bar: one training step of
    // many samples takes seconds.
    let runs_per_instance = 2 * (WARM_UP + args.repeat) as u64;
    let bar = progress_bar(
        instances.len() as u64 * runs_per_instance,
        "{bar:30} {pos}/{len} runs {elapsed}",
    )?;
    let mut rows = Vec::new();
    for (model, cluster) in instances {
        let inputs = Loaded::load(model, None, cluster, Numerics::default())?;
        let start = start_graph(&inputs.problem(), DEFAULT_GROUPS, &policy)?;
        rows.push(Row {
            model: model.clone(),
            cluster: cluster.clone(),
            op_groups: start.graph.ops(),
            device_groups: start.graph.devs(),
            actions: start.slices.len(),
            device: args.gnn_device.name(),
            forward_ms: timed(args.repeat, || {
                forward(&policy, &start);
                bar.inc(1);
            }),
            train_step_ms: timed(args.repeat, || {
                train_step(&trained, &start, args.samples);
                bar.inc(1);
            }),
        });
    }
    bar.finish_and_clear();
    print_either(args.json, &rows, |rows| render(rows))
}

/// The median milliseconds of `repeat` runs of `work`, after [`WARM_UP`] untimed ones.
fn timed(repeat: usize, mut work: impl FnMut()) -> f64 {
    for _ in 0..WARM_UP {
        work();
    }
    let ms: Vec<f64> = (0..repeat)
        .map(|_| {
            let began = Instant::now();
            work();
            began.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&ms)
}

/// The priors of the start vertex, read back to the host as the search reads them.
fn forward(policy: &GnnPolicy, start: &StartGraph) {
    let priors = policy.priors(&start.graph, start.next_group, &start.slices);
    assert_eq!(priors.len(), start.slices.len());
}

/// One Adam step on the mean cross-entropy of `samples` copies of the start vertex against a
/// uniform target, its loss read back to the host as the trainer does (which waits for the
/// device). A fresh optimiser each time, on the same weights, so every run does the same work.
fn train_step(policy: &GnnPolicy, start: &StartGraph, samples: usize) {
    let uniform = vec![1.0 / start.slices.len() as f32; start.slices.len()];
    let model = &policy.model;
    let loss = (0..samples)
        .map(|_| {
            cross_entropy(
                model,
                &start.graph,
                start.next_group,
                &start.slices,
                &uniform,
            )
        })
        .reduce(|a, b| a + b)
        .expect("at least one sample")
        / samples as f64;
    let value = loss.clone().into_scalar::<f32>();
    let mut optimizer = AdamConfig::new().init();
    let stepped = adam_step(model.clone(), &mut optimizer, loss, 1e-3);
    // Reading a stepped weight back waits for the step's kernels (one queue on a GPU).
    let weights = gnn::to_vec(stepped.score.weight.val());
    assert!(value.is_finite() && weights.iter().all(|w| w.is_finite()));
}

fn render(rows: &[Row]) -> String {
    let mut s = format!(
        "GNN cost, median of the timed runs after {WARM_UP} warm-up runs (the search's start \
         vertex, the shipped weights)\n\n"
    );
    s += "| model | cluster | op groups | device groups | actions | device | forward ms | training step ms |\n";
    s += "|---|---|---|---|---|---|---|---|\n";
    for r in rows {
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} |\n",
            r.model,
            r.cluster,
            r.op_groups,
            r.device_groups,
            r.actions,
            r.device,
            r.forward_ms,
            r.train_step_ms
        );
    }
    s
}
