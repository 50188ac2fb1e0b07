//! Fitting the kernel-efficiency table to the calibration scenarios: the documented way to
//! calibrate the cost model (`topoplace experiment calibrate`).
//!
//! On one GPU an iteration is the sum of its ops' times, so each candidate table is scored
//! without simulating. The fit minimises the squared log error of the calibration throughputs
//! plus a light pull (weight [`PRIOR_WEIGHT`]) of every figure towards a neutral prior (0.6 of
//! peak, 2× for fast algorithms, 0.8 of memory bandwidth, 5 µs per op), by coordinate descent on
//! a logarithmic grid. Deterministic: the same scenarios give the same table.

use super::measure::graph;
use super::scenarios::{Metric, Role, Scenario};
use crate::cluster::{Arch, find_gpu};
use crate::cost::{CostModel, KernelEfficiency, KernelTable};
use crate::error::Result;
use crate::graph::Graph;

/// Weight of the prior against one scenario's squared log error.
pub(crate) const PRIOR_WEIGHT: f64 = 0.02;

/// The fitted table and how well it fits.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// The fitted kernel-efficiency table, to put in a [`CostModel`]'s `kernels`.
    pub table: KernelTable,
    /// Root-mean-square log error over the calibration scenarios.
    pub rms_log_error: f64,
    /// How many scenarios the table was fitted to (single-GPU images/s calibration scenarios).
    pub scenarios: usize,
}

/// A calibration point, ready to score.
struct Point {
    graph: Graph,
    arch: Arch,
    gpu: &'static crate::cluster::GpuSpec,
    measured_us: f64,
}

/// Bounds and prior of each fitted figure.
const SHARED_RANGES: [(f64, f64, f64); 4] = [
    (1.0, 4.0, 2.0),  // Winograd speed-up
    (1.0, 4.0, 2.0),  // FFT speed-up
    (0.4, 1.0, 0.8),  // memory share of peak bandwidth
    (1.0, 60.0, 5.0), // µs per op
];
const SHARE_RANGE: (f64, f64, f64) = (0.15, 4.0, 0.6);

/// Fit the table to the calibration scenarios of `scenarios`.
pub fn calibrate(scenarios: &[Scenario]) -> Result<Calibration> {
    let points = points(scenarios)?;
    let mut archs: Vec<Arch> = points.iter().map(|p| p.arch).collect();
    archs.sort_unstable();
    archs.dedup();
    let mut x: Vec<f64> = SHARED_RANGES.iter().map(|r| r.2).collect();
    x.extend(archs.iter().flat_map(|_| [SHARE_RANGE.2, SHARE_RANGE.2]));
    let ranges: Vec<(f64, f64, f64)> = SHARED_RANGES
        .iter()
        .copied()
        .chain(archs.iter().flat_map(|_| [SHARE_RANGE, SHARE_RANGE]))
        .collect();
    let objective = |x: &[f64]| {
        let table = table_of(x, &archs);
        let cost = CostModel {
            kernels: table,
            ..CostModel::default()
        };
        let misfit: f64 = points.iter().map(|p| log_error(p, &cost).powi(2)).sum();
        let prior: f64 = x
            .iter()
            .zip(&ranges)
            .map(|(v, r)| (v / r.2).ln().powi(2))
            .sum();
        misfit + PRIOR_WEIGHT * prior
    };
    for _round in 0..8 {
        for i in 0..x.len() {
            x[i] = best_on_grid(&x, i, ranges[i], &objective);
        }
    }
    let table = table_of(&x, &archs);
    let cost = CostModel {
        kernels: table.clone(),
        ..CostModel::default()
    };
    let sq: f64 = points.iter().map(|p| log_error(p, &cost).powi(2)).sum();
    Ok(Calibration {
        table,
        rms_log_error: (sq / points.len() as f64).sqrt(),
        scenarios: points.len(),
    })
}

/// Single-GPU iteration time: the sum of the ops' times.
pub fn single_gpu_us(g: &Graph, gpu: &crate::cluster::GpuSpec, cost: &CostModel) -> f64 {
    g.ops()
        .iter()
        .map(|op| cost.compute_time_us(op, gpu, 1.0))
        .sum()
}

fn points(scenarios: &[Scenario]) -> Result<Vec<Point>> {
    scenarios
        .iter()
        .filter(|s| s.role == Role::Calibration && s.metric == Metric::ImagesPerSecond)
        .map(|s| {
            let gpu = find_gpu(s.gpu).expect("scenario GPUs are in the catalog");
            let g = graph(s)?;
            let measured_us = f64::from(g.batch_size) / s.published * 1e6;
            Ok(Point {
                graph: g,
                arch: gpu.arch,
                gpu,
                measured_us,
            })
        })
        .collect()
}

fn log_error(p: &Point, cost: &CostModel) -> f64 {
    (single_gpu_us(&p.graph, p.gpu, cost) / p.measured_us).ln()
}

/// The value of coordinate `i` in `range` minimising `f`: a 41-point log grid, then a finer one
/// around the best.
fn best_on_grid(x: &[f64], i: usize, range: (f64, f64, f64), f: &impl Fn(&[f64]) -> f64) -> f64 {
    let (mut lo, mut hi) = (range.0.ln(), range.1.ln());
    let mut y = x.to_vec();
    let mut best = (f(&y), x[i]);
    for _refine in 0..3 {
        let steps = 40;
        for k in 0..=steps {
            let v = (lo + (hi - lo) * k as f64 / steps as f64).exp();
            y[i] = v;
            let score = f(&y);
            if score < best.0 {
                best = (score, v);
            }
        }
        let width = (hi - lo) / steps as f64;
        lo = (best.1.ln() - width).max(range.0.ln());
        hi = (best.1.ln() + width).min(range.1.ln());
    }
    best.1
}

/// The table of a parameter vector: four shared figures, then (GEMM, convolution) per arch; the
/// fallback for other architectures takes the mean shares.
fn table_of(x: &[f64], archs: &[Arch]) -> KernelTable {
    let row = |gemm: f64, conv: f64| KernelEfficiency {
        gemm,
        conv,
        winograd_speedup: x[0],
        fft_speedup: x[1],
        memory: x[2],
        launch_us: x[3],
    };
    let rows: Vec<(Arch, KernelEfficiency)> = archs
        .iter()
        .enumerate()
        .map(|(k, &a)| (a, row(x[4 + 2 * k], x[5 + 2 * k])))
        .collect();
    let n = archs.len().max(1) as f64;
    let mean = |j: usize| rows.iter().map(|r| [r.1.gemm, r.1.conv][j]).sum::<f64>() / n;
    let fallback = if rows.is_empty() {
        row(SHARE_RANGE.2, SHARE_RANGE.2)
    } else {
        row(mean(0), mean(1))
    };
    KernelTable::new(rows, fallback)
}
