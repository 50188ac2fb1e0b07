//! Simulating a scenario the way it was measured.

use super::scenarios::{Metric, Scenario};
use crate::autocast::autocast;
use crate::cluster::{Cluster, parse_cluster};
use crate::cost::CostModel;
use crate::error::Result;
use crate::evaluate::{Evaluation, evaluate_strategy};
use crate::graph::Graph;
use crate::problem::Problem;
use crate::sim::Order;
use crate::strategy::{AllReducePacking, BatchSplit, GroupDecision, ReplicationOption, Strategy};
use crate::units::MIB;

/// What the simulator says of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Outcome {
    /// In the scenario's metric.
    pub value: f64,
    /// Whether the simulated memory peak exceeds a GPU's memory.
    pub oom: bool,
}

/// The scenario's cluster.
pub fn cluster(s: &Scenario) -> Result<Cluster> {
    Ok(parse_cluster(&s.cluster_toml(), &s.label())?)
}

/// The scenario's training graph at its global batch, in its framework's ops and precision.
pub fn graph(s: &Scenario) -> Result<Graph> {
    let options = crate::zoo::ZooOptions {
        batch_size: Some((s.per_gpu * u64::from(s.gpus())) as u32),
        framework: s.framework,
        seq: s.seq,
        optimizer: s.optimizer,
        ..Default::default()
    };
    let fp32 = without_attention_shapes(crate::zoo::build(s.model, &options)?, &s.label())?;
    Ok(autocast(&fp32, s.precision, &s.label())?)
}

/// `g` with its fused attention ops' shapes dropped, so they run at the matrix-product share. No
/// published run here used PyTorch's `scaled_dot_product_attention`: NVIDIA's BERT
/// (DeepLearningExamples, which Lambda's harness also runs) computes attention with its own
/// batched products and softmax, Hugging Face's ran eager attention, and the rest are CNNs. The
/// fused kernels' published speeds ([`crate::cost`]'s attention figures) are checked against the
/// LLM runs of `tests/hybrid.rs` instead.
fn without_attention_shapes(g: Graph, source: &str) -> Result<Graph> {
    if g.ops().iter().all(|op| op.attention.is_none()) {
        return Ok(g);
    }
    let mut ops = g.ops().to_vec();
    for op in &mut ops {
        op.attention = None;
    }
    let (edges, gradients) = (g.edges().to_vec(), g.gradients().to_vec());
    Ok(Graph::new(
        source,
        g.name,
        g.batch_size,
        ops,
        edges,
        gradients,
    )?)
}

/// `cost` in `s`'s precision, with its framework's runtime memory and host dispatch.
fn scenario_cost(s: &Scenario, cost: &CostModel) -> CostModel {
    CostModel {
        precision: s.precision,
        runtime: s.framework.runtime_memory(),
        memory_format: s.memory_format,
        host: s.framework.host_dispatch(s.precision),
        ..cost.clone()
    }
}

/// Simulate `s` under `cost`, in the scenario's precision.
pub(crate) fn simulate(s: &Scenario, cost: &CostModel) -> Result<Outcome> {
    let c = cluster(s)?;
    let cost = &scenario_cost(s, cost);
    if s.metric == Metric::BusBandwidth {
        return Ok(Outcome {
            value: bus_bandwidth_gbs(&c, cost, s.per_gpu as f64),
            oom: false,
        });
    }
    let g = graph(s)?;
    let e = data_parallel(&g, &c, cost)?;
    let value = match s.metric {
        Metric::DeviceMemoryMib => {
            let peak = e.report.devices.iter().map(|d| d.peak_memory_bytes);
            peak.fold(0.0, f64::max) / MIB
        }
        _ => f64::from(g.batch_size) / (e.report.iteration_us * 1e-6),
    };
    Ok(Outcome {
        value,
        oom: e.report.is_oom(),
    })
}

/// The tensors' peak (`torch.cuda.max_memory_allocated`) of a memory scenario on its busiest GPU,
/// bytes, under `cost`.
pub(crate) fn peak_allocated_bytes(s: &Scenario, cost: &CostModel) -> Result<f64> {
    let (c, g) = (cluster(s)?, graph(s)?);
    let cost = &scenario_cost(s, cost);
    let e = data_parallel(&g, &c, cost)?;
    let peak = e.report.devices.iter().map(|d| d.peak_allocated_bytes);
    Ok(peak.fold(0.0, f64::max))
}

/// Data parallelism over every GPU as tf_cnn_benchmarks runs it: even batch shares, one NCCL
/// AllReduce per gradient as soon as it is ready.
fn data_parallel(g: &Graph, c: &Cluster, cost: &CostModel) -> Result<Evaluation> {
    let mut strategy = Strategy::uniform(
        g.len(),
        GroupDecision {
            devices: (0..c.devices.len()).collect(),
            option: ReplicationOption::AllReduce,
        },
        BatchSplit::Even,
    );
    strategy.allreduce = AllReducePacking::PerTensor;
    let p = Problem {
        graph: g,
        cluster: c,
        cost,
    };
    evaluate_strategy(&p, &strategy, Order::Fifo)
}

/// nccl-tests' bus bandwidth of one AllReduce of `bytes` over every GPU of `c`, GB/s:
/// S / t · 2(n−1)/n.
pub(crate) fn bus_bandwidth_gbs(c: &Cluster, cost: &CostModel, bytes: f64) -> f64 {
    let n = c.devices.len();
    let ring: Vec<u32> = (0..n as u32).collect();
    let plan = crate::compile::ring_plan(c, &ring);
    let t = cost
        .comm
        .allreduce_us(bytes, n, plan.bandwidth, plan.latency_us);
    bytes / t * 2.0 * (n as f64 - 1.0) / n as f64 / 1e3
}
