//! [`GnnPolicy`]: a model with its hyper-parameters, saved as one file (a header line, a SHA-256
//! line over the rest, the hyper-parameters as JSON, then burn's burnpack record), so loading
//! rebuilds the module and any corruption of the file is an error naming it.

use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;

use super::device::cpu;
use super::features::{HeteroGraph, Slice};
use super::model::{GnnConfig, GnnModel};
use crate::assets;
use crate::checksum::sha256_hex;
use crate::error::{GnnError, Result};
use crate::io::write_atomic;

/// First line of a policy file.
const MAGIC: &str = "topoplace-gnn 2";
/// The first line of files written before checksums, refused with a pointer to `policy upgrade`.
const MAGIC_V1: &str = "topoplace-gnn 1";

/// A GNN with the hyper-parameters it was built with. A clone shares the weights' storage.
#[derive(Debug, Clone)]
pub struct GnnPolicy {
    /// The hyper-parameters the model was built with, saved as JSON in the policy file.
    pub config: GnnConfig,
    /// The network and its weights.
    pub model: GnnModel,
}

impl GnnPolicy {
    /// Untrained weights drawn from `seed`, on the CPU.
    pub fn init(config: GnnConfig, seed: u64) -> Result<GnnPolicy> {
        config.check().map_err(GnnError::Config)?;
        Ok(GnnPolicy {
            config,
            model: GnnModel::new(&config, seed, &cpu()),
        })
    }

    /// Write the policy file: header, config JSON, burnpack record.
    pub fn save(&self, path: &Path) -> Result<()> {
        let shown = path.display().to_string();
        let config = serde_json::to_string(&self.config).map_err(|e| GnnError::Save {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let record = self.record_bytes().map_err(|message| GnnError::Save {
            path: shown.clone(),
            message,
        })?;
        write_atomic(path, &encode(&config, &record))
    }

    /// Read a policy file onto the CPU; every failure names the file.
    pub fn load(path: &Path) -> Result<GnnPolicy> {
        Self::load_on(path, &cpu())
    }

    /// Read a policy file onto `device`.
    pub fn load_on(path: &Path, device: &Device) -> Result<GnnPolicy> {
        let shown = path.display().to_string();
        let bytes = crate::io::read_bounded(path).map_err(|source| GnnError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_bytes(&bytes, &shown, device)
    }

    /// The policy shipped in the binary ([`crate::assets::SHIPPED_POLICY`]), onto `device`.
    pub fn shipped_on(device: &Device) -> Result<GnnPolicy> {
        Self::from_bytes(assets::SHIPPED_POLICY_BYTES, assets::SHIPPED_POLICY, device)
    }

    /// The shipped policy on the CPU.
    pub fn shipped() -> Result<GnnPolicy> {
        Self::shipped_on(&cpu())
    }

    /// A policy from the bytes of a policy file; `shown` names the file in errors.
    pub(crate) fn from_bytes(bytes: &[u8], shown: &str, device: &Device) -> Result<GnnPolicy> {
        let bad = |why: String| GnnError::NotAPolicy {
            kind: "GNN policy",
            path: shown.to_string(),
            why,
        };
        if split_line(bytes).is_some_and(|(header, _)| header == MAGIC_V1.as_bytes()) {
            return Err(bad(format!(
                "written before policy files carried a checksum; `topoplace policy upgrade {shown}` \
                 adds one"
            ))
            .into());
        }
        let (config, record) = checked_body(bytes, MAGIC).map_err(bad)?;
        let config: GnnConfig =
            serde_json::from_slice(config).map_err(|e| bad(format!("config: {e}")))?;
        config.check().map_err(|e| bad(format!("config: {e}")))?;
        let model =
            model_from_record(&config, record, device).map_err(|e| bad(format!("weights: {e}")))?;
        // A checksum vouches for the bytes, not for what they mean: a run that diverged saved
        // NaN weights under a valid checksum, and every prior they gave was NaN.
        if let Some(weight) = first_weight(&model, |w| !w.is_finite()) {
            return Err(bad(format!(
                "weights: a weight of {weight}; a policy's weights must be finite (the run that \
                 wrote it diverged)"
            ))
            .into());
        }
        Ok(GnnPolicy { config, model })
    }

    /// The same weights on `device`, through their serialised record: exact, and it crosses
    /// backends (the trainer's wgpu weights become the CPU policy its searches read).
    pub fn copied_to(&self, device: &Device) -> Result<GnnPolicy> {
        let failed = |message: String| GnnError::Save {
            path: "(the policy in memory)".into(),
            message,
        };
        let record = self.record_bytes().map_err(failed)?;
        let model = model_from_record(&self.config, &record, device).map_err(failed)?;
        Ok(GnnPolicy {
            config: self.config,
            model,
        })
    }

    /// The weights as burn's burnpack record: what a policy file holds after its header.
    fn record_bytes(&self) -> std::result::Result<Bytes, String> {
        let bytes = self.model.clone().into_record().into_bytes();
        bytes.map_err(|e| format!("serialising the GNN: {e}"))
    }

    /// Priors over `slices` for op group `group` of graph `g`.
    pub fn priors(&self, g: &HeteroGraph, group: usize, slices: &[Slice]) -> Vec<f32> {
        self.model.priors(g, group, slices)
    }
}

/// A model of `config` on `device` holding the weights of a serialised record.
fn model_from_record(
    config: &GnnConfig,
    record: &[u8],
    device: &Device,
) -> std::result::Result<GnnModel, String> {
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(record.to_vec()))
        .map_err(|e| e.to_string())?;
    // burn's own message lists every tensor with its shape in Rust's debug form.
    GnnModel::new(config, 0, device)
        .try_load_record(record)
        .map_err(|_| {
            format!(
                "the weights are not those of the config line's network (width {}, {} heads, \
                 {} layers)",
                config.width, config.heads, config.layers
            )
        })
}

/// The file's bytes: header, checksum of the rest, config line, record.
fn encode(config: &str, record: &[u8]) -> Vec<u8> {
    encode_with(MAGIC, config, record)
}

/// A policy file's bytes under the header `magic`: header, checksum of the rest, config line,
/// record.
pub(crate) fn encode_with(magic: &str, config: &str, record: &[u8]) -> Vec<u8> {
    let mut body = format!("{config}\n").into_bytes();
    body.extend_from_slice(record);
    let mut out = format!("{magic}\nsha256 {}\n", sha256_hex(&body)).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The largest weight magnitude [`upgrade_v1`] accepts. Trained and freshly drawn weights stay
/// within ±10; a flipped exponent bit sends a float past 1e4 or to NaN.
const PLAUSIBLE_WEIGHT: f32 = 1e4;
/// The run of zero bytes at the end of a record that [`upgrade_v1`] takes for a zeroed or
/// zero-filled tail: eight exact-zero floats, which no trained or drawn weights end in.
const ZEROED_TAIL: usize = 32;

/// A policy file of the format before checksums rewritten with one (the weights unchanged).
/// `None` when `bytes` is not such a file; an error, naming `shown`, when its weights show
/// damage. That format carried no checksum, so what can be checked is checked before a new
/// checksum vouches for the file: the config parses, the record decodes into the network, every
/// weight is finite and plausible, no block of weights was zeroed, and the record does not end in
/// zeros. A flip of a low mantissa bit or of a sign passes all of these and cannot be found.
pub fn upgrade_v1(bytes: &[u8], shown: &str) -> Result<Option<Vec<u8>>> {
    let Some((header, rest)) = split_line(bytes) else {
        return Ok(None);
    };
    if header != MAGIC_V1.as_bytes() {
        return Ok(None);
    }
    let bad = |why: String| GnnError::NotAPolicy {
        kind: "GNN policy",
        path: shown.to_string(),
        why,
    };
    let (config, record) = split_line(rest).ok_or_else(|| bad("no config line".into()))?;
    let text = std::str::from_utf8(config).map_err(|_| bad("config: not UTF-8".into()))?;
    let zeros = record.iter().rev().take_while(|&&b| b == 0).count();
    if zeros >= ZEROED_TAIL {
        return Err(bad(format!(
            "the weights end in {zeros} zero bytes: the file was truncated or zeroed; not upgraded"
        ))
        .into());
    }
    // Read back as every policy file is read: the config parses and checks, the record decodes.
    let upgraded = encode(text, record);
    let policy = GnnPolicy::from_bytes(&upgraded, shown, &cpu())?;
    if let Some(weight) = implausible_weight(&policy.model) {
        return Err(bad(format!(
            "a weight of {weight} (finite weights within ±{PLAUSIBLE_WEIGHT} expected): the file \
             is damaged; not upgraded"
        ))
        .into());
    }
    if let Some(run) = zeroed_block(&policy.model) {
        return Err(bad(format!(
            "{run} weights in a row are exactly zero inside a tensor that is not all zeros: a \
             block of the file was zeroed; not upgraded"
        ))
        .into());
    }
    // The decoder stops at the weights the config asks for: bytes after them (a file appended
    // to, or two files run together) would be sealed into the new checksum unread.
    let holds = policy.record_bytes().map_err(bad)?.len();
    if record.len() > holds {
        return Err(bad(format!(
            "{} bytes after the weights' {holds}: the file is damaged; not upgraded",
            record.len() - holds
        ))
        .into());
    }
    Ok(Some(upgraded))
}

/// The first weight of `model` that is not finite or exceeds [`PLAUSIBLE_WEIGHT`].
fn implausible_weight(model: &GnnModel) -> Option<f32> {
    first_weight(model, |w| !w.is_finite() || w.abs() > PLAUSIBLE_WEIGHT)
}

/// The longest run of exact zeros, of at least [`ZEROED_TAIL`] bytes' worth, inside a tensor of
/// `model` that also holds other values. Drawn and trained weights are never exactly zero eight
/// times in a row; a tensor all zeros is a bias as initialised, so it passes.
fn zeroed_block(model: &GnnModel) -> Option<usize> {
    first_in_tensors(model, |values| {
        let longest = longest_zero_run(values);
        (longest >= ZEROED_TAIL / 4 && longest < values.len()).then_some(longest)
    })
}

/// The longest run of exactly-zero values in `values`.
fn longest_zero_run(values: &[f32]) -> usize {
    let (mut longest, mut run) = (0, 0);
    for &v in values {
        run = if v == 0.0 { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// The first weight of `model` for which `bad` holds.
fn first_weight(model: &GnnModel, bad: fn(f32) -> bool) -> Option<f32> {
    first_in_tensors(model, |values| values.iter().copied().find(|&w| bad(w)))
}

/// What `find` reports of the first tensor of `model` it reports anything of, tensors in the
/// module's order.
fn first_in_tensors<T>(model: &GnnModel, find: impl Fn(&[f32]) -> Option<T>) -> Option<T> {
    struct Finder<T, F>(Option<T>, F);
    impl<T, F: Fn(&[f32]) -> Option<T>> ModuleVisitor for Finder<T, F> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if self.0.is_some() {
                return;
            }
            let values = param
                .val()
                .into_data()
                .try_to_vec::<f32>()
                .unwrap_or_default();
            self.0 = (self.1)(&values);
        }
    }
    let mut finder = Finder(None, find);
    model.visit(&mut finder);
    finder.0
}

/// The config line and the record of a policy file under the header `magic`, once its header and
/// checksum are checked; why not otherwise.
pub(crate) fn checked_body<'a>(
    bytes: &'a [u8],
    magic: &str,
) -> std::result::Result<(&'a [u8], &'a [u8]), String> {
    let (header, rest) = split_line(bytes).ok_or("no header line")?;
    if header != magic.as_bytes() {
        return Err(format!("the first line is not \"{magic}\""));
    }
    let (sum, rest) = split_line(rest).ok_or("no checksum line")?;
    let expected = std::str::from_utf8(sum)
        .ok()
        .and_then(|s| s.strip_prefix("sha256 "))
        .ok_or("the second line is not \"sha256 <hex>\"")?;
    if sha256_hex(rest) != expected {
        return Err("checksum mismatch: the file is corrupt or was edited".into());
    }
    split_line(rest).ok_or_else(|| "no config line".into())
}

/// The bytes before the first newline and those after it.
pub(crate) fn split_line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..n], &bytes[n + 1..]))
}
