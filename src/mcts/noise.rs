//! Exploration at the root of a self-play search (AlphaZero, as expert iteration uses it): the
//! policy's root priors are flattened by a temperature and mixed with Dirichlet noise, so a
//! game also visits root actions the policy already dismisses and its visit targets do not
//! merely echo the policy's own choices. Only self-play sets it; `place` searches without.

use rand::RngExt;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

/// The root's exploration: `P = (1 − fraction) · p^(1/temperature) / Σ + fraction · η`, with
/// `η ~ Dir(alpha, …, alpha)` over the root's actions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootNoise {
    /// Dirichlet concentration (AlphaZero: 0.3 for chess, 0.03 for Go; smaller for more
    /// actions).
    pub alpha: f64,
    /// Weight of the noise in the mixture (AlphaZero: 0.25).
    #[serde(default = "default_fraction")]
    pub fraction: f64,
    /// Temperature applied to the priors before the mixture (1: as they are; above 1 flatter).
    #[serde(default = "default_temperature")]
    pub temperature: f64,
}

fn default_fraction() -> f64 {
    0.25
}

fn default_temperature() -> f64 {
    1.0
}

impl RootNoise {
    /// The field and the reason when these settings cannot be used.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if !positive(self.alpha) {
            Some((
                "alpha",
                format!("{}: must be a positive number", self.alpha),
            ))
        } else if !(self.fraction.is_finite() && (0.0..=1.0).contains(&self.fraction)) {
            Some(("fraction", format!("{}: must lie in [0, 1]", self.fraction)))
        } else if !positive(self.temperature) {
            Some((
                "temperature",
                format!("{}: must be a positive number", self.temperature),
            ))
        } else {
            None
        }
    }

    /// `priors` (a distribution) tempered and mixed with noise drawn from `rng`.
    pub fn apply(&self, priors: &[f64], rng: &mut StdRng) -> Vec<f64> {
        let tempered: Vec<f64> = priors
            .iter()
            .map(|&p| p.max(0.0).powf(1.0 / self.temperature))
            .collect();
        let total: f64 = tempered.iter().sum();
        let uniform = 1.0 / priors.len().max(1) as f64;
        let noise = dirichlet(rng, self.alpha, priors.len());
        tempered
            .iter()
            .zip(noise)
            .map(|(&p, eta)| {
                let p = if total > 0.0 { p / total } else { uniform };
                (1.0 - self.fraction) * p + self.fraction * eta
            })
            .collect()
    }
}

/// A draw of the symmetric Dirichlet distribution `Dir(alpha)` over `n` components: normalised
/// Gamma(alpha, 1) draws.
pub fn dirichlet(rng: &mut StdRng, alpha: f64, n: usize) -> Vec<f64> {
    let draws: Vec<f64> = (0..n).map(|_| gamma(rng, alpha)).collect();
    let total: f64 = draws.iter().sum();
    if total > 0.0 {
        draws.iter().map(|g| g / total).collect()
    } else {
        // Every draw underflowed (tiny alpha): the limit is all mass on one component.
        let mut one = vec![0.0; n];
        if n > 0 {
            one[rng.random_range(0..n)] = 1.0;
        }
        one
    }
}

/// A Gamma(shape, 1) draw: Marsaglia and Tsang's squeeze method for shape ≥ 1, and for shape < 1
/// a Gamma(shape + 1) draw times `U^(1/shape)`.
fn gamma(rng: &mut StdRng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = standard_normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A standard normal draw (Box–Muller; one of the pair is used).
fn standard_normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}
