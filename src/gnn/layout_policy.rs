//! [`LayoutPolicy`]: the network that gives the hybrid layout tree its priors
//! ([`crate::hybrid::layout_search`]). Each action of a decision is described by the features of
//! the partial layout it leads to ([`crate::hybrid::layout_features`]); a dense network scores
//! each, and a softmax over the decision's actions gives the priors. Saved as a GNN policy is (a
//! header line, a SHA-256 line over the rest, the hyper-parameters as JSON, burn's burnpack
//! record) under its own header.

use std::path::Path;

use burn::module::Module;
use burn::nn::Linear;
use burn::prelude::*;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use burn::tensor::activation::{log_softmax, silu};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::device::cpu;
use super::model::{dense, to_vec};
use super::policy::{checked_body, encode_with};
use crate::assets;
use crate::error::{GnnError, Result};
use crate::hybrid::{LAYOUT_FEATURES, LayoutPriors};
use crate::io::write_atomic;

/// First line of a layout policy file.
const MAGIC: &str = "topoplace-layout-policy 1";

/// The hyper-parameters a saved layout policy carries; unknown keys are refused, as a GNN
/// policy's are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutPolicyConfig {
    /// Width of the two hidden layers.
    pub width: usize,
}

impl Default for LayoutPolicyConfig {
    fn default() -> LayoutPolicyConfig {
        LayoutPolicyConfig { width: 64 }
    }
}

/// The largest hidden width a layout policy may have.
pub const MAX_LAYOUT_WIDTH: usize = 4096;

impl LayoutPolicyConfig {
    fn check(&self) -> std::result::Result<(), String> {
        if self.width == 0 || self.width > MAX_LAYOUT_WIDTH {
            return Err(format!(
                "width must be 1 to {MAX_LAYOUT_WIDTH}: {}",
                self.width
            ));
        }
        Ok(())
    }
}

/// The scoring network: features → width → width → score.
#[derive(Module, Debug)]
pub struct LayoutModel {
    input: Linear,
    hidden: Linear,
    score: Linear,
}

impl LayoutModel {
    /// Fresh weights from `seed` on `device`.
    pub fn new(config: &LayoutPolicyConfig, seed: u64, device: &Device) -> LayoutModel {
        let w = config.width;
        let mut rng = StdRng::seed_from_u64(seed);
        LayoutModel {
            input: dense(&mut rng, LAYOUT_FEATURES, w, true, device),
            hidden: dense(&mut rng, w, w, true, device),
            score: dense(&mut rng, w, 1, true, device),
        }
    }

    fn device(&self) -> Device {
        self.input.weight.val().device()
    }

    /// Log-probabilities `[A]` of a decision's actions.
    pub fn log_priors(&self, actions: &[[f32; LAYOUT_FEATURES]]) -> Tensor<1> {
        let a = actions.len();
        let x: Vec<f32> = actions.iter().flatten().copied().collect();
        let x = Tensor::<2>::from_data(TensorData::new(x, [a, LAYOUT_FEATURES]), &self.device());
        let h = silu(self.hidden.forward(silu(self.input.forward(x))));
        log_softmax(self.score.forward(h).reshape([a]), 0)
    }

    /// The cross-entropy `−ln G(taken)` of a decision whose expert took action `taken`.
    pub fn cross_entropy(&self, actions: &[[f32; LAYOUT_FEATURES]], taken: usize) -> Tensor<1> {
        let index =
            Tensor::<1, Int>::from_data(TensorData::new(vec![taken as i64], [1]), &self.device());
        self.log_priors(actions).select(0, index).sum().neg()
    }
}

/// A layout network with its hyper-parameters.
#[derive(Debug)]
pub struct LayoutPolicy {
    /// The hyper-parameters the network was built with.
    pub config: LayoutPolicyConfig,
    /// The network.
    pub model: LayoutModel,
}

impl LayoutPolicy {
    /// Untrained weights drawn from `seed` on `device`.
    pub fn init(config: LayoutPolicyConfig, seed: u64, device: &Device) -> Result<LayoutPolicy> {
        config.check().map_err(GnnError::Config)?;
        Ok(LayoutPolicy {
            config,
            model: LayoutModel::new(&config, seed, device),
        })
    }

    /// Write the policy file.
    pub fn save(&self, path: &Path) -> Result<()> {
        let shown = path.display().to_string();
        let failed = |message: String| GnnError::Save {
            path: shown.clone(),
            message,
        };
        let config = serde_json::to_string(&self.config).map_err(|e| failed(e.to_string()))?;
        let record = self
            .model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| failed(format!("serialising the layout policy: {e}")))?;
        write_atomic(path, &encode_with(MAGIC, &config, &record))
    }

    /// Read a policy file onto the CPU; every failure names the file.
    pub fn load(path: &Path) -> Result<LayoutPolicy> {
        let shown = path.display().to_string();
        let bytes = crate::io::read_bounded(path).map_err(|source| GnnError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_bytes(&bytes, &shown, &cpu())
    }

    /// The layout policy shipped in the binary ([`crate::assets::SHIPPED_LAYOUT_POLICY`]), on the
    /// CPU.
    pub fn shipped() -> Result<LayoutPolicy> {
        Self::from_bytes(
            assets::SHIPPED_LAYOUT_POLICY_BYTES,
            assets::SHIPPED_LAYOUT_POLICY,
            &cpu(),
        )
    }

    /// A policy from a file's bytes onto `device`; `shown` names the file in errors.
    pub fn from_bytes(bytes: &[u8], shown: &str, device: &Device) -> Result<LayoutPolicy> {
        let bad = |why: String| GnnError::NotAPolicy {
            kind: "layout policy",
            path: shown.to_string(),
            why,
        };
        let (config, record) = checked_body(bytes, MAGIC).map_err(bad)?;
        let config: LayoutPolicyConfig =
            serde_json::from_slice(config).map_err(|e| bad(format!("config: {e}")))?;
        config.check().map_err(|e| bad(format!("config: {e}")))?;
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
            .map_err(|e| bad(format!("weights: {e}")))?;
        // burn's own message lists every tensor with its shape in Rust's debug form.
        let model = LayoutModel::new(&config, 0, device)
            .try_load_record(record)
            .map_err(|_| bad("weights: not those of the config line's network".to_string()))?;
        Ok(LayoutPolicy { config, model })
    }

    /// The same weights on `device` (exact, through the record).
    pub fn copied_to(&self, device: &Device) -> Result<LayoutPolicy> {
        let failed = |message: String| GnnError::Save {
            path: "(the layout policy in memory)".into(),
            message,
        };
        let record = self
            .model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| failed(e.to_string()))?;
        let record = ModuleRecord::from_bytes(record).map_err(|e| failed(e.to_string()))?;
        let model = LayoutModel::new(&self.config, 0, device)
            .try_load_record(record)
            .map_err(|e| failed(e.to_string()))?;
        Ok(LayoutPolicy {
            config: self.config,
            model,
        })
    }
}

impl LayoutPriors for LayoutPolicy {
    fn priors(&self, actions: &[[f32; LAYOUT_FEATURES]]) -> Vec<f64> {
        to_vec(self.model.log_priors(actions).exp())
            .into_iter()
            .map(f64::from)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions() -> Vec<[f32; LAYOUT_FEATURES]> {
        (0..5)
            .map(|i| {
                let mut f = [0.1f32; LAYOUT_FEATURES];
                f[i] = 1.0;
                f[LAYOUT_FEATURES - 1] = i as f32 / 5.0;
                f
            })
            .collect()
    }

    #[test]
    fn priors_are_a_distribution_and_survive_a_round_trip_through_the_file() {
        let policy = LayoutPolicy::shipped().unwrap();
        let p = policy.priors(&actions());
        assert_eq!(p.len(), 5);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        assert!(p.iter().all(|&x| x > 0.0));
        let dir = std::env::temp_dir().join(format!("layout-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.policy");
        policy.save(&path).unwrap();
        assert_eq!(LayoutPolicy::load(&path).unwrap().priors(&actions()), p);
        // One flipped byte in the weights is refused, naming the file.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 9;
        bytes[last] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let e = LayoutPolicy::load(&path).unwrap_err().to_string();
        assert!(e.contains("p.policy") && e.contains("checksum"), "{e}");
        // A GNN policy is not a layout policy.
        let e = LayoutPolicy::from_bytes(crate::assets::SHIPPED_POLICY_BYTES, "gnn", &cpu())
            .unwrap_err()
            .to_string();
        assert!(e.contains("topoplace-layout-policy 1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cross_entropy_is_minus_the_log_prior_of_the_action_taken() {
        let policy = LayoutPolicy::init(LayoutPolicyConfig { width: 8 }, 3, &cpu()).unwrap();
        let p = policy.priors(&actions());
        let ce = to_vec(policy.model.cross_entropy(&actions(), 2))[0];
        assert!(
            (f64::from(ce) + p[2].ln()).abs() < 1e-5,
            "{ce} against {}",
            -p[2].ln()
        );
    }
}
