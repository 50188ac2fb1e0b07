//! Fitting measured times (TAG §4.1.2).
//!
//! Op times are linear in the batch: a per-sample part plus a fixed part (kernel launches, weight
//! reads). Transfer and collective times measured at sizes from 1 KB to 1 GB are piecewise linear
//! in the size: small messages are latency-bound, large ones bandwidth-bound, with protocol
//! changes in between, so TAG fits a segmented linear regression.
//!
//! The tool itself scales a profiled time from its one point (`LinearBatchModel::from_single`);
//! the fits are compiled for their tests only until an importer of measured profiles calls them.

/// time(batch) = fixed_us + per_sample_us · batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearBatchModel {
    /// Time per sample of the batch, µs.
    pub per_sample_us: f64,
    /// Time independent of the batch (launches, weight reads), µs.
    pub fixed_us: f64,
}

impl LinearBatchModel {
    #[cfg(test)]
    /// Least-squares fit to (batch, time µs) points. `None` unless there are two distinct batches.
    pub(crate) fn fit(points: &[(f64, f64)]) -> Option<LinearBatchModel> {
        let (slope, intercept) = least_squares(points)?;
        Some(LinearBatchModel {
            per_sample_us: slope,
            fixed_us: intercept,
        })
    }

    /// From one profile point: the fixed part is the launch overhead (capped at the measured time
    /// so the per-sample part is never negative), the rest scales with the batch.
    pub(crate) fn from_single(
        batch: f64,
        time_us: f64,
        launch_overhead_us: f64,
    ) -> LinearBatchModel {
        let fixed_us = launch_overhead_us.min(time_us).max(0.0);
        LinearBatchModel {
            per_sample_us: (time_us - fixed_us) / batch,
            fixed_us,
        }
    }

    #[cfg(test)]
    /// [`fit`](Self::fit) when the points allow it, else [`from_single`](Self::from_single) on the
    /// largest batch. `None` for no points.
    pub(crate) fn fit_with_overhead(
        points: &[(f64, f64)],
        launch_overhead_us: f64,
    ) -> Option<LinearBatchModel> {
        Self::fit(points).or_else(|| {
            let &(b, t) = points.iter().max_by(|p, q| p.0.total_cmp(&q.0))?;
            Some(Self::from_single(b, t, launch_overhead_us))
        })
    }

    /// The fitted time at `batch` samples, µs.
    pub fn eval(&self, batch: f64) -> f64 {
        self.fixed_us + self.per_sample_us * batch
    }
}

#[cfg(test)]
/// Ordinary least squares y = slope·x + intercept, centred for accuracy with sizes up to 1e9.
/// `None` with fewer than two distinct x.
pub(crate) fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

#[cfg(test)]
/// The message sizes TAG profiles transfers and collectives at: 1 KiB to 1 GiB, doubling.
pub(crate) fn profile_sizes() -> Vec<f64> {
    (0..=20).map(|k| 1024.0 * f64::from(1u32 << k)).collect()
}

#[cfg(test)]
/// A piecewise-linear function: segment k covers x < breakpoints[k] (and x ≥ breakpoints[k−1]);
/// the last segment covers everything beyond the last breakpoint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SegmentedLinear {
    /// Increasing; one fewer than segments.
    pub breakpoints: Vec<f64>,
    /// (slope, intercept) per segment.
    pub segments: Vec<(f64, f64)>,
}

#[cfg(test)]
impl SegmentedLinear {
    pub(crate) fn eval(&self, x: f64) -> f64 {
        let k = self.breakpoints.iter().take_while(|&&b| x >= b).count();
        let (slope, intercept) = self.segments[k];
        slope * x + intercept
    }
}

#[cfg(test)]
/// Fit at most `max_segments` linear pieces to `samples` (any order) minimising the total squared
/// error, exactly, by dynamic programming over contiguous runs of the sorted samples; each piece
/// covers at least two samples. Among piece counts, the smallest whose error ties the best
/// (within 1e-10 of the data's variance) wins, so noiseless data does not get spurious pieces.
/// A breakpoint sits where neighbouring lines cross, clamped between the last sample of the
/// left piece and the first of the right one. Fewer than two samples: a constant.
pub(crate) fn fit_segmented(samples: &[(f64, f64)], max_segments: usize) -> SegmentedLinear {
    let mut pts = samples.to_vec();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = pts.len();
    let max_k = max_segments.max(1).min(n / 2).max(1);
    if n < 2 {
        let c = pts.first().map_or(0.0, |p| p.1);
        return SegmentedLinear {
            breakpoints: Vec::new(),
            segments: vec![(0.0, c)],
        };
    }
    let sse = run_errors(&pts);
    let table = dp(&sse, n, max_k);
    let best = (1..=max_k)
        .map(|k| table[k][n])
        .fold(f64::INFINITY, f64::min);
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let tol = 1e-10 * pts.iter().map(|p| (p.1 - my).powi(2)).sum::<f64>() + 1e-12;
    let k = (1..=max_k)
        .find(|&k| table[k][n] <= best + tol)
        .unwrap_or(1);
    let runs = backtrack(&sse, &table, n, k);
    assemble(&pts, &runs)
}

#[cfg(test)]
/// sse[i][j]: squared error of the best line through pts[i..j] (j exclusive), for j − i ≥ 2.
/// Residuals are summed directly: the Syy − Sxy²/Sxx shortcut cancels badly at 1e9 sizes.
fn run_errors(pts: &[(f64, f64)]) -> Vec<Vec<f64>> {
    let n = pts.len();
    let mut sse = vec![vec![f64::INFINITY; n + 1]; n + 1];
    for i in 0..n {
        for j in i + 2..=n {
            let run = &pts[i..j];
            sse[i][j] = match least_squares(run) {
                Some((s, c)) => run.iter().map(|p| (p.1 - s * p.0 - c).powi(2)).sum(),
                None => f64::INFINITY, // all x equal: not a usable piece
            };
        }
    }
    sse
}

#[cfg(test)]
/// table[k][j]: least error covering pts[..j] with exactly k pieces.
fn dp(sse: &[Vec<f64>], n: usize, max_k: usize) -> Vec<Vec<f64>> {
    let mut table = vec![vec![f64::INFINITY; n + 1]; max_k + 1];
    table[0][0] = 0.0;
    for k in 1..=max_k {
        for j in 2..=n {
            table[k][j] = (0..j - 1)
                .map(|i| table[k - 1][i] + sse[i][j])
                .fold(f64::INFINITY, f64::min);
        }
    }
    table
}

#[cfg(test)]
/// The runs [start, end) of an optimal k-piece cover, left to right.
fn backtrack(sse: &[Vec<f64>], table: &[Vec<f64>], n: usize, k: usize) -> Vec<(usize, usize)> {
    let mut runs = Vec::with_capacity(k);
    let mut j = n;
    for level in (1..=k).rev() {
        let i = (0..j - 1)
            .min_by(|&a, &b| {
                (table[level - 1][a] + sse[a][j]).total_cmp(&(table[level - 1][b] + sse[b][j]))
            })
            .expect("a run has at least two samples");
        runs.push((i, j));
        j = i;
    }
    runs.reverse();
    runs
}

#[cfg(test)]
fn assemble(pts: &[(f64, f64)], runs: &[(usize, usize)]) -> SegmentedLinear {
    let segments: Vec<(f64, f64)> = runs
        .iter()
        .map(|&(i, j)| least_squares(&pts[i..j]).expect("runs have distinct x"))
        .collect();
    let breakpoints = runs
        .windows(2)
        .zip(segments.windows(2))
        .map(|(r, s)| {
            let (lo, hi) = (pts[r[0].1 - 1].0, pts[r[1].0].0);
            // Where the lines cross, kept between the runs (rounding can put an exact crossing
            // at a sample a hair outside); parallel lines have no crossing.
            let crossing = (s[1].1 - s[0].1) / (s[0].0 - s[1].0);
            if crossing.is_finite() {
                crossing.clamp(lo, hi)
            } else {
                hi
            }
        })
        .collect();
    SegmentedLinear {
        breakpoints,
        segments,
    }
}
