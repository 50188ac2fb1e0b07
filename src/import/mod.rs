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

pub use self::csv::csv_files;
pub(crate) use self::csv::import_csv;

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::IgnoredAny;

use crate::error::{InputError, Result};
use crate::graph::validate::check_file_graph;
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
    // Only the top-level keys tell the format: the values are skipped, not built (a graph file
    // of 10⁵ ops is tens of megabytes; its format's reader parses it once, into its own types).
    let obj: BTreeMap<String, IgnoredAny> = match serde_json::from_str(&text) {
        Ok(keys) => keys,
        // Valid JSON that is not an object (checked in full only on this rare path).
        Err(e)
            if e.classify() == serde_json::error::Category::Data
                && serde_json::from_str::<serde_json::Value>(&text).is_ok() =>
        {
            return Err(InputError::new(
                &source,
                "",
                "a graph file must hold a JSON object at the top level",
            )
            .into());
        }
        Err(e) => {
            // An object that fails part-way (a number out of range, a NaN) is told by the keys
            // read before the fault: its format's reader then names the field at fault
            // (`edges[0].bytes`), where this parse could only give a line and column.
            return match format_of_keys(&keys_before_fault(&text)) {
                Some(format) => Ok(format),
                None => {
                    Err(
                        InputError::new(&source, "", format!("not CSV and not valid JSON: {e}"))
                            .into(),
                    )
                }
            };
        }
    };
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

/// The format that the top-level keys of an object read up to a fault point to: any key of
/// node-link JSON QuickP, `"torch"` a torch export, any other key of graph JSON a topoplace graph
/// (the fault may come before `"ops"`, or `"torch"`, is read: the keys are in any order).
fn format_of_keys(keys: &[String]) -> Option<Format> {
    const NODE_LINK: [&str; 5] = ["nodes", "links", "directed", "multigraph", "graph"];
    const GRAPH: [&str; 7] = [
        "ops",
        "edges",
        "gradients",
        "name",
        "batch_size",
        "format",
        "version",
    ];
    let has = |names: &[&str]| keys.iter().any(|k| names.contains(&k.as_str()));
    if has(&NODE_LINK) {
        Some(Format::Quickp)
    } else if has(&["torch"]) {
        Some(Format::Torch)
    } else if has(&GRAPH) {
        Some(Format::Topoplace)
    } else {
        None
    }
}

/// The top-level keys of a JSON object read before the text's first fault in its syntax (none
/// when the text is no object); values are skipped unread, so a number out of range is no fault
/// here. A torch export read as a topoplace graph fails at the same fault with the same field, so
/// which of the two the keys point to before `"torch"` is read does not matter.
fn keys_before_fault(text: &str) -> Vec<String> {
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> serde::de::Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                self.0.push(key);
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut keys = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    // The fault is expected: the keys gathered up to it are the answer.
    let _ = serde::Deserializer::deserialize_map(&mut de, Keys(&mut keys));
    keys
}

/// Read `path` in `format` (or the detected one) and return the validated graph.
pub fn import(path: &Path, format: Option<Format>) -> Result<Graph> {
    let format = match format {
        Some(f) => f,
        None => detect(path)?,
    };
    let source = path.display().to_string();
    let graph = match format {
        Format::Topoplace => parse_graph(&read_text_file(path)?, &source)?,
        Format::Torch => import_torch(path)?.graph,
        Format::Quickp => import_quickp(path)?,
        Format::Csv => import_csv(path)?,
    };
    // What `import` writes is read back by the graph loader: a graph it would refuse must be
    // refused here, naming the input rather than the written file.
    check_file_graph(&source, &graph)?;
    Ok(graph)
}

pub(super) fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}
