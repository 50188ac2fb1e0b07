//! Fitting the kernel-efficiency table to the calibration scenarios: the documented way to
//! calibrate the cost model (`topoplace experiment calibrate`).
//!
//! On one GPU an iteration is the sum of its ops' times, so each candidate table is scored
//! without simulating. The fit minimises the squared log error of the calibration throughputs
//! plus a light pull (weight [`PRIOR_WEIGHT`]) of every figure towards a neutral prior (0.6 of
//! peak, 2× for fast algorithms, 0.8 of memory bandwidth, 5 µs per op), by coordinate descent on
//! a logarithmic grid. Deterministic: the same scenarios give the same table.
//!
//! Three stages, each holding the earlier ones' figures fixed, so a later measurement never
//! moves an earlier result: the FP32 figures to the FP32 calibration scenarios; one tensor-core
//! share per architecture to the TF32 and mixed-precision ones; then the rows of architectures
//! measured only relative to a calibrated one ([`Scenario::relative_to`]): the donor's row with
//! the convolution and tensor-core shares refitted.

use super::measure::{graph, peak_allocated_bytes};
use super::scenarios::{Metric, Role, Scenario};
use crate::cluster::{Arch, find_gpu};
use crate::cost::{CostModel, KernelEfficiency, KernelTable};
use crate::error::Result;
use crate::graph::Graph;
use crate::precision::Precision;
use crate::units::MIB;

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
    /// PyTorch's caching-allocator reserve over the allocated peak, fitted to the calibration
    /// memory scenarios (the mean over them); `None` without any.
    pub allocator_headroom: Option<f64>,
}

/// A calibration point, ready to score.
struct Point {
    graph: Graph,
    arch: Arch,
    gpu: &'static crate::cluster::GpuSpec,
    measured_us: f64,
    precision: Precision,
}

/// Bounds and prior of each fitted figure.
const SHARED_RANGES: [(f64, f64, f64); 4] = [
    (1.0, 4.0, 2.0),  // Winograd speed-up
    (1.0, 4.0, 2.0),  // FFT speed-up
    (0.4, 1.0, 0.8),  // memory share of peak bandwidth
    (1.0, 60.0, 5.0), // µs per op
];
const SHARE_RANGE: (f64, f64, f64) = (0.15, 4.0, 0.6);
/// A share of the tensor-core peak: at most all of it.
const TENSOR_RANGE: (f64, f64, f64) = (0.15, 1.0, 0.6);

/// Fit the table to the calibration scenarios of `scenarios`.
pub fn calibrate(scenarios: &[Scenario]) -> Result<Calibration> {
    let all = points(scenarios)?;
    let (fp32, tensor): (Vec<Point>, Vec<Point>) = all
        .into_iter()
        .partition(|p| p.precision == Precision::Fp32);
    let (x, archs) = fit_fp32(&fp32);
    let (shares, tensor_archs) = fit_tensor(&tensor, &x, &archs);
    let mut table = table_of(&x, &archs, &shares, &tensor_archs);
    let relative = relative_points(scenarios, &table)?;
    for (arch, donor) in relative_archs(&relative) {
        let row = fit_relative(&relative, &table, arch, donor);
        table = table.with_row(arch, row);
    }
    let cost = cost_of(table.clone(), Precision::Fp32);
    let points: Vec<&Point> = fp32
        .iter()
        .chain(&tensor)
        .chain(relative.iter().map(|(p, _)| p))
        .collect();
    let sq: f64 = points
        .iter()
        .map(|p| log_error(p, &cost_of(cost.kernels.clone(), p.precision)).powi(2))
        .sum();
    let allocator_headroom = fit_headroom(scenarios, &table)?;
    Ok(Calibration {
        table,
        rms_log_error: (sq / points.len() as f64).sqrt(),
        scenarios: points.len(),
        allocator_headroom,
    })
}

/// The allocator reserve that makes each calibration memory scenario's device memory, less the
/// runtime's context, its simulated allocated peak: the mean over them.
fn fit_headroom(scenarios: &[Scenario], table: &KernelTable) -> Result<Option<f64>> {
    let mut shares = Vec::new();
    for s in scenarios {
        if s.role != Role::Calibration || s.metric != Metric::DeviceMemoryMib {
            continue;
        }
        let allocated = peak_allocated_bytes(s, &cost_of(table.clone(), s.precision))?;
        let context = s.framework.runtime_memory().context_bytes;
        shares.push((s.published * MIB - context) / allocated - 1.0);
    }
    Ok((!shares.is_empty()).then(|| shares.iter().sum::<f64>() / shares.len() as f64))
}

/// A cost model of `table` in `precision`.
fn cost_of(table: KernelTable, precision: Precision) -> CostModel {
    CostModel {
        kernels: table,
        precision,
        ..CostModel::default()
    }
}

/// The architectures of `points`, sorted, once each.
fn archs_of(points: &[Point]) -> Vec<Arch> {
    let mut archs: Vec<Arch> = points.iter().map(|p| p.arch).collect();
    archs.sort_unstable();
    archs.dedup();
    archs
}

/// Stage two: the tensor-core shares of matrix products and of convolutions per architecture of
/// `points` (two per architecture, in that order), the FP32 figures `x` fixed.
fn fit_tensor(points: &[Point], x: &[f64], archs: &[Arch]) -> (Vec<f64>, Vec<Arch>) {
    let tensor_archs = archs_of(points);
    let mut shares = vec![TENSOR_RANGE.2; 2 * tensor_archs.len()];
    let ranges = vec![TENSOR_RANGE; shares.len()];
    let objective = |shares: &[f64]| {
        let table = table_of(x, archs, shares, &tensor_archs);
        let misfit: f64 = points
            .iter()
            .map(|p| log_error(p, &cost_of(table.clone(), p.precision)).powi(2))
            .sum();
        misfit + PRIOR_WEIGHT * prior(shares, &ranges)
    };
    for _round in 0..4 {
        for i in 0..shares.len() {
            shares[i] = best_on_grid(&shares, i, TENSOR_RANGE, &objective);
        }
    }
    (shares, tensor_archs)
}

/// Stage one: the shared figures and the FP32 GEMM and convolution shares per architecture.
fn fit_fp32(points: &[Point]) -> (Vec<f64>, Vec<Arch>) {
    let archs = archs_of(points);
    let mut x: Vec<f64> = SHARED_RANGES.iter().map(|r| r.2).collect();
    x.extend(archs.iter().flat_map(|_| [SHARE_RANGE.2, SHARE_RANGE.2]));
    let ranges: Vec<(f64, f64, f64)> = SHARED_RANGES
        .iter()
        .copied()
        .chain(archs.iter().flat_map(|_| [SHARE_RANGE, SHARE_RANGE]))
        .collect();
    let objective = |x: &[f64]| {
        let table = table_of(x, &archs, &[], &[]);
        let cost = cost_of(table, Precision::Fp32);
        let misfit: f64 = points.iter().map(|p| log_error(p, &cost).powi(2)).sum();
        misfit + PRIOR_WEIGHT * prior(x, &ranges)
    };
    for _round in 0..8 {
        for i in 0..x.len() {
            x[i] = best_on_grid(&x, i, ranges[i], &objective);
        }
    }
    (x, archs)
}

/// Whether `s` is a single-GPU throughput the calibration fits to.
fn fitted(s: &Scenario) -> bool {
    s.role == Role::Calibration && s.metric == Metric::ImagesPerSecond && s.gpus() == 1
}

fn points(scenarios: &[Scenario]) -> Result<Vec<Point>> {
    scenarios
        .iter()
        .filter(|s| fitted(s) && s.relative_to.is_none())
        .map(|s| {
            let gpu = find_gpu(s.gpu).expect("scenario GPUs are in the catalog");
            let g = graph(s)?;
            let measured_us = f64::from(g.batch_size) / s.published * 1e6;
            Ok(Point {
                graph: g,
                arch: gpu.arch,
                gpu,
                measured_us,
                precision: s.precision,
            })
        })
        .collect()
}

/// The scenarios fitted relative to another GPU, each timed as its partner's simulated time
/// under `table` scaled by the published ratio; with the partner's architecture.
fn relative_points(scenarios: &[Scenario], table: &KernelTable) -> Result<Vec<(Point, Arch)>> {
    let mut out = Vec::new();
    for s in scenarios.iter().filter(|s| fitted(s)) {
        let Some(donor_gpu) = s.relative_to else {
            continue;
        };
        let partner = scenarios
            .iter()
            .find(|p| {
                p.gpu == donor_gpu
                    && p.gpus() == 1
                    && (
                        p.source,
                        p.model,
                        p.per_gpu,
                        p.precision,
                        p.framework,
                        p.seq,
                    ) == (
                        s.source,
                        s.model,
                        s.per_gpu,
                        s.precision,
                        s.framework,
                        s.seq,
                    )
            })
            .unwrap_or_else(|| panic!("{}: no run on {donor_gpu} to fit against", s.label()));
        let donor = find_gpu(donor_gpu).expect("scenario GPUs are in the catalog");
        let gpu = find_gpu(s.gpu).expect("scenario GPUs are in the catalog");
        let partner_us = cost_of(table.clone(), s.precision).serial_us(&graph(partner)?, donor);
        let g = graph(s)?;
        out.push((
            Point {
                graph: g,
                arch: gpu.arch,
                gpu,
                measured_us: partner_us * partner.published / s.published,
                precision: s.precision,
            },
            donor.arch,
        ));
    }
    Ok(out)
}

/// Each architecture measured relative to another, with its donor, once.
fn relative_archs(points: &[(Point, Arch)]) -> Vec<(Arch, Arch)> {
    let mut pairs: Vec<(Arch, Arch)> = points.iter().map(|(p, d)| (p.arch, *d)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// Stage three: `arch`'s row, the donor's with the convolution and tensor-core shares fitted.
fn fit_relative(
    points: &[(Point, Arch)],
    table: &KernelTable,
    arch: Arch,
    donor: Arch,
) -> KernelEfficiency {
    let base = *table.get(donor);
    let ranges = [SHARE_RANGE, TENSOR_RANGE, TENSOR_RANGE];
    let row = |x: &[f64]| KernelEfficiency {
        conv: x[0],
        tensor: x[1],
        tensor_conv: x[2],
        ..base
    };
    let objective = |x: &[f64]| {
        let t = table.clone().with_row(arch, row(x));
        let misfit: f64 = points
            .iter()
            .filter(|(p, _)| p.arch == arch)
            .map(|(p, _)| log_error(p, &cost_of(t.clone(), p.precision)).powi(2))
            .sum();
        misfit + PRIOR_WEIGHT * prior(x, &ranges)
    };
    let mut x = vec![base.conv, base.tensor, base.tensor_conv];
    for _round in 0..4 {
        for i in 0..x.len() {
            x[i] = best_on_grid(&x, i, ranges[i], &objective);
        }
    }
    row(&x)
}

/// The pull of each figure of `x` towards its range's neutral value: squared log ratios.
fn prior(x: &[f64], ranges: &[(f64, f64, f64)]) -> f64 {
    x.iter()
        .zip(ranges)
        .map(|(v, r)| (v / r.2).ln().powi(2))
        .sum()
}

fn log_error(p: &Point, cost: &CostModel) -> f64 {
    (cost.serial_us(&p.graph, p.gpu) / p.measured_us).ln()
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

/// The table of a parameter vector: four shared figures, then (GEMM, convolution) per arch of
/// `archs`; the tensor-core `shares` of `tensor_archs` (matrix products, convolutions), the mean
/// shares for the other architectures (0.6 with none fitted); the fallback for unmeasured
/// architectures takes the mean shares.
fn table_of(x: &[f64], archs: &[Arch], shares: &[f64], tensor_archs: &[Arch]) -> KernelTable {
    let mean_of = |j: usize| {
        let n = tensor_archs.len();
        if n == 0 {
            TENSOR_RANGE.2
        } else {
            (0..n).map(|k| shares[2 * k + j]).sum::<f64>() / n as f64
        }
    };
    let mean_tensor = (mean_of(0), mean_of(1));
    let tensor_of = |a: Arch| {
        tensor_archs
            .iter()
            .position(|&t| t == a)
            .map_or(mean_tensor, |k| (shares[2 * k], shares[2 * k + 1]))
    };
    let row = |gemm: f64, conv: f64, (tensor, tensor_conv): (f64, f64)| KernelEfficiency {
        gemm,
        conv,
        tensor,
        tensor_conv,
        winograd_speedup: x[0],
        fft_speedup: x[1],
        memory: x[2],
        launch_us: x[3],
    };
    let rows: Vec<(Arch, KernelEfficiency)> = archs
        .iter()
        .enumerate()
        .map(|(k, &a)| (a, row(x[4 + 2 * k], x[5 + 2 * k], tensor_of(a))))
        .collect();
    let n = archs.len().max(1) as f64;
    let mean = |j: usize| rows.iter().map(|r| [r.1.gemm, r.1.conv][j]).sum::<f64>() / n;
    let fallback = if rows.is_empty() {
        row(SHARE_RANGE.2, SHARE_RANGE.2, mean_tensor)
    } else {
        row(mean(0), mean(1), mean_tensor)
    };
    KernelTable::new(rows, fallback)
}
