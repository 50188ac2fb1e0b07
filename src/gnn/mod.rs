//! TAG's GNN policy (§4.2.1): a heterogeneous graph attention network over op groups and device
//! groups whose decoder gives the MCTS its prior probabilities `G(s, a)`.
//!
//! - [`features`]: the heterogeneous graph of a search vertex (TAG Table 1) and how it is
//!   normalised.
//! - [`model`]: the GNN and decoder in burn (flex CPU backend; wgpu with the `wgpu` feature).
//! - [`GnnPolicy`]: a model with its hyper-parameters; saved as one file (a header line, the
//!   hyper-parameters as JSON, then burn's burnpack record), so `load` rebuilds the module.
//! - [`VertexPriors`]: what the search calls at expansion.
//! - [`cross_entropy`] and [`adam_step`]: one training step (training itself is not built).

pub mod features;
pub mod model;

use std::path::Path;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::prelude::*;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;

use crate::baselines::Problem;
use crate::compile::RouteTable;
use crate::error::{Error, Result, write_atomic};
use crate::sim::Evaluation;
use crate::strategy::GroupDecision;

pub use features::{Feedback, HeteroGraph, Slice, StaticFeatures};
pub use model::{GnnConfig, GnnModel, to_vec};

/// The shipped policy, relative to the crate's root.
pub const SHIPPED_POLICY: &str = "models/tag-default.gnn";

/// Where the shipped policy lives in this checkout; `None` in a checkout without one.
pub fn shipped_policy_path() -> Option<std::path::PathBuf> {
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(SHIPPED_POLICY)).filter(|p| p.exists())
}

/// First line of a policy file.
const MAGIC: &str = "topoplace-gnn 1";

/// The CPU device the GNN runs on by default: burn's pure-Rust flex backend.
pub fn cpu() -> Device {
    Device::flex()
}

/// The GPU device (burn wgpu), with the `wgpu` feature.
#[cfg(feature = "wgpu")]
pub fn gpu() -> Device {
    Device::wgpu(Default::default())
}

/// The device called `name`: `cpu` (flex) or `wgpu` (only in builds with the `wgpu` feature).
pub fn device_named(name: &str) -> Result<Device> {
    match name {
        "cpu" => Ok(cpu()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(gpu()),
        #[cfg(not(feature = "wgpu"))]
        "wgpu" => Err(Error::Other(
            "the GNN device wgpu needs a build with `--features wgpu`".into(),
        )),
        other => Err(Error::Other(format!(
            "unknown GNN device \"{other}\" (known: cpu, wgpu)"
        ))),
    }
}

/// A GNN with the hyper-parameters it was built with.
#[derive(Debug)]
pub struct GnnPolicy {
    pub config: GnnConfig,
    pub model: GnnModel,
}

impl GnnPolicy {
    /// Untrained weights drawn from `seed`, on the CPU.
    pub fn init(config: GnnConfig, seed: u64) -> Result<GnnPolicy> {
        config.check().map_err(Error::Other)?;
        Ok(GnnPolicy {
            config,
            model: GnnModel::new(&config, seed, &cpu()),
        })
    }

    /// Write the policy file: header, config JSON, burnpack record.
    pub fn save(&self, path: &Path) -> Result<()> {
        let shown = path.display().to_string();
        let config = serde_json::to_string(&self.config)
            .map_err(|e| Error::Other(format!("{shown}: {e}")))?;
        let record = self
            .model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| Error::Other(format!("{shown}: serialising the GNN: {e}")))?;
        let mut out = format!("{MAGIC}\n{config}\n").into_bytes();
        out.extend_from_slice(&record);
        write_atomic(path, &out)
    }

    /// Read a policy file onto the CPU; every failure names the file.
    pub fn load(path: &Path) -> Result<GnnPolicy> {
        Self::load_on(path, &cpu())
    }

    /// Read a policy file onto `device`.
    pub fn load_on(path: &Path, device: &Device) -> Result<GnnPolicy> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Other(format!("{shown}: cannot read the GNN policy: {e}")))?;
        let bad = |why: String| Error::Other(format!("{shown}: not a topoplace GNN policy: {why}"));
        let (header, rest) = split_line(&bytes).ok_or_else(|| bad("no header line".into()))?;
        if header != MAGIC.as_bytes() {
            return Err(bad(format!("the first line is not \"{MAGIC}\"")));
        }
        let (config, record) = split_line(rest).ok_or_else(|| bad("no config line".into()))?;
        let config: GnnConfig =
            serde_json::from_slice(config).map_err(|e| bad(format!("config: {e}")))?;
        config.check().map_err(|e| bad(format!("config: {e}")))?;
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
            .map_err(|e| bad(format!("weights: {e}")))?;
        let model = GnnModel::new(&config, 0, device)
            .try_load_record(record)
            .map_err(|e| bad(format!("weights: {e}")))?;
        Ok(GnnPolicy { config, model })
    }

    /// Priors over `slices` for op group `group` of graph `g`.
    pub fn priors(&self, g: &HeteroGraph, group: usize, slices: &[Slice]) -> Vec<f32> {
        self.model.priors(g, group, slices)
    }
}

/// The bytes before the first newline and those after it.
fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..n], &bytes[n + 1..]))
}

/// Cross-entropy `−Σ_a π_a ln G(a)` between the GNN's prior over `group`'s slices and a target
/// distribution `target` (TAG trains on `π = softmax ln N` of the search's visit counts). A
/// one-element tensor, differentiable when the model lives on an autodiff device.
pub fn cross_entropy(
    model: &GnnModel,
    g: &HeteroGraph,
    group: usize,
    slices: &[Slice],
    target: &[f32],
) -> Tensor<1> {
    let log = model.forward(g, group, slices);
    let pi = Tensor::<1>::from_data(
        TensorData::new(target.to_vec(), [target.len()]),
        &model.device(),
    );
    (log * pi).sum().neg()
}

/// One optimiser step (e.g. Adam from `burn::optim::AdamConfig::new().init()`) on `loss`.
pub fn adam_step(
    model: GnnModel,
    optimizer: &mut ModuleOptimizer,
    loss: Tensor<1>,
    learning_rate: f64,
) -> GnnModel {
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optimizer.step(learning_rate, model, grads)
}

/// The search's view of a policy: the static part of the features for one problem and the
/// model, turning a vertex's simulated completion into priors for its next op group.
pub struct VertexPriors<'a> {
    policy: &'a GnnPolicy,
    features: StaticFeatures,
    op_group: Vec<u32>,
}

impl<'a> VertexPriors<'a> {
    pub fn new(
        policy: &'a GnnPolicy,
        p: &Problem,
        routes: &RouteTable,
        op_group: &[u32],
        actions: &[GroupDecision],
        dp_us: f64,
    ) -> VertexPriors<'a> {
        VertexPriors {
            policy,
            features: StaticFeatures::new(p, routes, op_group, actions, dp_us),
            op_group: op_group.to_vec(),
        }
    }

    /// The runtime feedback of a simulated completion.
    pub fn feedback(&self, e: &Evaluation) -> Feedback {
        Feedback::new(&self.op_group, self.features.groups(), e)
    }

    /// The heterogeneous graph of a vertex that decided `decided` groups, completed to `choice`.
    pub fn graph(&self, choice: &[u16], decided: usize, feedback: &Feedback) -> HeteroGraph {
        self.features.graph(choice, decided, feedback)
    }

    /// Priors over every action for op group `decided` (the vertex's next group).
    pub fn priors(&self, choice: &[u16], decided: usize, feedback: &Feedback) -> Vec<f64> {
        let g = self.graph(choice, decided, feedback);
        self.policy
            .priors(&g, decided, &self.features.slices)
            .into_iter()
            .map(f64::from)
            .collect()
    }
}
