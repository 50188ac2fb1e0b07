//! The JSON form of a graph. Edges and gradient links refer to op ids, not positions, so a person
//! can edit the file; loading maps ids to indices and validates everything.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Edge, GradientLink, Graph, Op};
use crate::error::{Error, InputError, Result};
use crate::io::write_atomic;

/// Marks a file as a topoplace graph.
pub(crate) const GRAPH_FORMAT: &str = "topoplace-graph";
pub(crate) const GRAPH_VERSION: u32 = 1;

/// The file layout (see docs/file-formats.md, "Graph JSON").
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// Format marker; must be `"topoplace-graph"` (the default when absent).
    #[serde(default = "default_format")]
    pub format: String,
    /// File format version; only version 1 is read (the default when absent).
    #[serde(default = "default_version")]
    pub version: u32,
    /// The graph's name (the model, e.g. `vgg19`).
    pub name: String,
    /// Samples per iteration that the ops' FLOPs and bytes refer to.
    pub batch_size: u32,
    /// The ops, each with its file `id`.
    pub ops: Vec<Op>,
    /// Tensor edges, by op id, with their bytes.
    #[serde(default)]
    pub edges: Vec<EdgeRecord>,
    /// Gradient-to-optimizer links, by op id.
    #[serde(default)]
    pub gradients: Vec<GradientRecord>,
}

fn default_format() -> String {
    GRAPH_FORMAT.to_string()
}

fn default_version() -> u32 {
    GRAPH_VERSION
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeRecord {
    pub src: u64,
    pub dst: u64,
    /// Required: a file that leaves it out would otherwise read as free transfers. 0 is a
    /// control or resource-handle edge (TensorFlow's graphs have them).
    pub bytes: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradientRecord {
    pub grad: u64,
    pub optimizer: u64,
}

impl GraphFile {
    /// The file form of a graph: edges and gradient links written with op ids.
    pub fn from_graph(g: &Graph) -> GraphFile {
        let id = |i: usize| g.op(i).id;
        GraphFile {
            format: default_format(),
            version: GRAPH_VERSION,
            name: g.name.clone(),
            batch_size: g.batch_size,
            ops: g.ops().to_vec(),
            edges: g
                .edges()
                .iter()
                .map(|e| EdgeRecord {
                    src: id(e.src),
                    dst: id(e.dst),
                    bytes: e.bytes,
                })
                .collect(),
            gradients: g
                .gradients()
                .iter()
                .map(|l| GradientRecord {
                    grad: id(l.grad),
                    optimizer: id(l.optimizer),
                })
                .collect(),
        }
    }

    /// Resolve ids and validate. `source` names the file in errors.
    pub(crate) fn into_graph(self, source: &str) -> Result<Graph, InputError> {
        if self.format != GRAPH_FORMAT {
            return Err(InputError::new(
                source,
                "format",
                format!("expected \"{GRAPH_FORMAT}\", found \"{}\"", self.format),
            ));
        }
        if self.version != GRAPH_VERSION {
            return Err(InputError::new(
                source,
                "version",
                format!(
                    "version {} is not supported (this build reads {GRAPH_VERSION})",
                    self.version
                ),
            ));
        }
        super::validate::check_some_edges(source, self.ops.len(), self.edges.len())?;
        let mut index: HashMap<u64, usize> = HashMap::with_capacity(self.ops.len());
        for (i, op) in self.ops.iter().enumerate() {
            if let Some(first) = index.insert(op.id, i) {
                return Err(InputError::new(
                    source,
                    format!("ops[{i}].id"),
                    format!("duplicate id {} (also used by ops[{first}])", op.id),
                ));
            }
        }
        let lookup = |field: String, id: u64| {
            index
                .get(&id)
                .copied()
                .ok_or_else(|| InputError::new(source, field, format!("no op has id {id}")))
        };
        let mut edges = Vec::with_capacity(self.edges.len());
        for (k, e) in self.edges.iter().enumerate() {
            edges.push(Edge {
                src: lookup(format!("edges[{k}].src"), e.src)?,
                dst: lookup(format!("edges[{k}].dst"), e.dst)?,
                bytes: e.bytes,
            });
        }
        let mut gradients = Vec::with_capacity(self.gradients.len());
        for (k, l) in self.gradients.iter().enumerate() {
            gradients.push(GradientLink {
                grad: lookup(format!("gradients[{k}].grad"), l.grad)?,
                optimizer: lookup(format!("gradients[{k}].optimizer"), l.optimizer)?,
            });
        }
        let graph = Graph::new(
            source,
            self.name,
            self.batch_size,
            self.ops,
            edges,
            gradients,
        )?;
        super::validate::check_file_graph(source, &graph)?;
        Ok(graph)
    }
}

/// Parse graph JSON text; `source` names it in errors.
pub fn parse_graph(text: &str, source: &str) -> Result<Graph, InputError> {
    let file: GraphFile = crate::io::parse_json(text, source)?;
    file.into_graph(source)
}

/// Read and validate a graph JSON file (gzip-compressed or not); errors name the path.
pub fn load_graph(path: &Path) -> Result<Graph> {
    let source = path.display().to_string();
    let text = crate::io::read_text_file(path)?;
    Ok(parse_graph(&text, &source)?)
}

/// Write a graph as pretty JSON, atomically.
pub fn save_graph(g: &Graph, path: &Path) -> Result<()> {
    let text = serde_json::to_string_pretty(&GraphFile::from_graph(g))
        .map_err(|e| Error::serialise(format!("graph {}", g.name), e))?;
    write_atomic(path, text.as_bytes())
}
