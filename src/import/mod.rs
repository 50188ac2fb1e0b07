//! Importers: turn graphs written by other tools into a validated [`Graph`].
//!
//! Four inputs are understood (see `docs/formats.md`):
//! - [`Format::Topoplace`]: topoplace's own graph JSON ([`crate::graph::load_graph`]).
//! - [`Format::Torch`]: the JSON written by `datasets/export_torch.py`. It *is* topoplace graph
//!   JSON plus one optional top-level `"torch"` object of exporter metadata (model, exact
//!   parameter count, trace time, per-op shapes); the importer checks and strips that object and
//!   reads the rest exactly like a topoplace graph, so the two formats cannot drift apart.
//! - [`Format::Quickp`]: QuickP's profiled TensorFlow graphs, networkx node-link JSON.
//! - [`Format::Csv`]: a directory holding `ops.csv`, `edges.csv` and optionally `gradients.csv`.
//!
//! Any JSON file may be gzip-compressed (`.gz`); it is decompressed transparently.

mod csv;
mod quickp;
mod torch;

pub use quickp::QUICKP_DEVICE;
pub(crate) use quickp::import_quickp;
pub use quickp::parse_quickp;

pub use torch::flops_estimated_warning;
pub use torch::import_torch;
pub use torch::parse_torch;

pub(crate) use self::csv::import_csv;

use std::path::Path;

use crate::error::{InputError, Result};
use crate::graph::{Graph, parse_graph};
use crate::io::read_text_file;

/// Which reader a file needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// topoplace's own graph JSON.
    Topoplace,
    /// Graph JSON from `datasets/export_torch.py`, with its `"torch"` metadata object.
    Torch,
    /// QuickP's profiled TensorFlow graph, networkx node-link JSON.
    Quickp,
    /// A directory of `ops.csv`, `edges.csv` and optionally `gradients.csv`.
    Csv,
}

impl Format {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [Format; 4] = [
        Format::Topoplace,
        Format::Torch,
        Format::Quickp,
        Format::Csv,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Topoplace => "topoplace",
            Format::Torch => "torch",
            Format::Quickp => "quickp",
            Format::Csv => "csv",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = InputError;
    fn from_str(s: &str) -> Result<Format, InputError> {
        parse_format(s)
    }
}

/// Parse a `--format` value: `torch`, `quickp`, `csv` or `topoplace` (case-insensitive).
pub fn parse_format(name: &str) -> Result<Format, InputError> {
    let wanted = name.trim().to_ascii_lowercase();
    Format::ALL
        .into_iter()
        .find(|f| f.name() == wanted)
        .ok_or_else(|| {
            InputError::new(
                "<cli>",
                "--format",
                format!("unknown format \"{name}\" (expected torch, quickp, csv or topoplace)"),
            )
        })
}

/// Guess the format of `path`: a directory or a file named `*.csv` is the CSV layout; a JSON file
/// (optionally `.gz`) is sniffed: `"nodes"` and `"links"`/`"edges"` keys make it node-link
/// (QuickP), a top-level `"torch"` object makes it a torch export, `"ops"` a topoplace graph.
pub fn detect(path: &Path) -> Result<Format> {
    if path.is_dir() || has_extension(path, "csv") {
        return Ok(Format::Csv);
    }
    let text = read_text_file(path)?;
    let source = path.display().to_string();
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| InputError::new(&source, "", format!("not CSV and not valid JSON: {e}")))?;
    let obj = value.as_object().ok_or_else(|| {
        InputError::new(
            &source,
            "",
            "a graph file must hold a JSON object at the top level",
        )
    })?;
    if obj.contains_key("nodes") && (obj.contains_key("links") || obj.contains_key("edges")) {
        Ok(Format::Quickp)
    } else if obj.contains_key("torch") {
        Ok(Format::Torch)
    } else if obj.contains_key("ops") {
        Ok(Format::Topoplace)
    } else {
        Err(InputError::new(
            &source,
            "",
            "cannot tell the format: no \"ops\" (topoplace/torch) and no \"nodes\"+\"links\" \
             (QuickP node-link); `topoplace import --format` converts a graph of a named format",
        )
        .into())
    }
}

/// Read `path` in `format` (or the detected one) and return the validated graph.
pub fn import(path: &Path, format: Option<Format>) -> Result<Graph> {
    let format = match format {
        Some(f) => f,
        None => detect(path)?,
    };
    match format {
        Format::Topoplace => {
            let source = path.display().to_string();
            Ok(parse_graph(&read_text_file(path)?, &source)?)
        }
        Format::Torch => Ok(import_torch(path)?.graph),
        Format::Quickp => import_quickp(path),
        Format::Csv => import_csv(path),
    }
}

pub(super) fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// Deserialize JSON text into `T`, naming the failing field path in the error.
fn from_json<T: serde::de::DeserializeOwned>(text: &str, source: &str) -> Result<T, InputError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        InputError::new(source, field, e.into_inner().to_string())
    })
}
