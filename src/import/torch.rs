//! Graphs exported from PyTorch by `datasets/export_torch.py`.
//!
//! The exporter writes topoplace graph JSON directly, plus one top-level `"torch"` object of
//! metadata that the graph format has no field for (model name, exact parameter count, trace
//! time, per-op shapes and dtypes). Reading one therefore means: take the `"torch"` object out,
//! check it, and read the rest as an ordinary topoplace graph, so every graph check (ids, units,
//! cycles, gradient links) applies unchanged.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{InputError, Result};
use crate::graph::{Graph, GraphFile, Phase};
use crate::io::parse_json;

/// The exporter's metadata. Only `model` and `params_total` are required; the rest is kept as is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchMeta {
    /// What was exported, e.g. `torchvision:resnet50`.
    pub model: String,
    /// Exact trainable parameter count of the model (Σ numel): the parameter ops must hold it.
    pub params_total: u64,
    /// Op types whose FLOPs the exporter had no formula for and estimated (one per output element):
    /// their costs are rough, and a user should know which.
    #[serde(default)]
    pub flops_estimated: Vec<String>,
    /// Everything else the exporter recorded (torch version, trace seconds, shapes, …).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A torch export: the graph and the exporter's metadata.
#[derive(Debug, Clone)]
pub struct TorchExport {
    pub graph: Graph,
    pub meta: TorchMeta,
}

/// Read a torch export (optionally gzipped).
pub fn import_torch(path: &Path) -> Result<TorchExport> {
    let source = path.display().to_string();
    Ok(parse_torch(&crate::io::read_text_file(path)?, &source)?)
}

/// Parse a torch export; `source` names it in errors.
pub fn parse_torch(text: &str, source: &str) -> Result<TorchExport, InputError> {
    let mut value: serde_json::Value = parse_json(text, source)?;
    // The document is read as a whole, where a key given twice keeps its last value unsaid: the
    // typed readers of every other format refuse it.
    if let Some(field) = crate::io::repeated_key(text) {
        return Err(InputError::new(source, field, "is given twice"));
    }
    let obj = value
        .as_object_mut()
        .ok_or_else(|| InputError::new(source, "", "a torch export must be a JSON object"))?;
    let meta_value = obj.remove("torch").ok_or_else(|| {
        InputError::new(
            source,
            "torch",
            "missing: a torch export carries a \"torch\" metadata object",
        )
    })?;
    if !meta_value.is_object() {
        return Err(InputError::new(
            source,
            "torch",
            "must be an object of export metadata (written by datasets/export_torch.py)",
        ));
    }
    let meta: TorchMeta = from_value(meta_value, source, "torch")?;
    let file: GraphFile = from_value(value, source, "")?;
    let graph = file.into_graph(source)?;
    check_params(&graph, &meta, source)?;
    check_batch(&graph, &meta, source)?;
    Ok(TorchExport { graph, meta })
}

/// One line naming the op types whose FLOPs are estimates, if there are any.
pub fn flops_estimated_warning(meta: &TorchMeta, source: &str) -> Option<String> {
    (!meta.flops_estimated.is_empty()).then(|| {
        format!(
            "warning: {source}: FLOPs of {} op type(s) are estimates (one per output element), \
             not formulas: {}",
            meta.flops_estimated.len(),
            meta.flops_estimated.join(", ")
        )
    })
}

/// Deserialize a JSON value, naming the failing field below `prefix`.
fn from_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    source: &str,
    prefix: &str,
) -> Result<T, InputError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = match (prefix.is_empty(), path == ".") {
            (true, true) => String::new(),
            (true, false) => path,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{path}"),
        };
        InputError::new(source, field, e.into_inner().to_string())
    })
}

/// The batch the exporter traced at, when it recorded one, is the graph's: the ops' costs are
/// for that batch, and a file edited to another one would re-batch nothing.
fn check_batch(graph: &Graph, meta: &TorchMeta, source: &str) -> Result<(), InputError> {
    match meta
        .extra
        .get("batch_size")
        .and_then(serde_json::Value::as_u64)
    {
        Some(traced) if traced != u64::from(graph.batch_size) => Err(InputError::new(
            source,
            "torch.batch_size",
            format!(
                "is {traced} but the graph's batch_size is {}: the ops' costs are for one batch",
                graph.batch_size
            ),
        )),
        _ => Ok(()),
    }
}

/// The parameter ops must hold exactly the model's parameter count, or the export lost some.
fn check_params(graph: &Graph, meta: &TorchMeta, source: &str) -> Result<(), InputError> {
    let held: u64 = graph
        .ops()
        .iter()
        .filter(|o| o.phase == Phase::Parameter)
        .fold(0u64, |sum, o| sum.saturating_add(o.params));
    if held != meta.params_total {
        return Err(InputError::new(
            source,
            "torch.params_total",
            format!(
                "is {} but the parameter ops hold {held} parameters",
                meta.params_total
            ),
        ));
    }
    Ok(())
}
