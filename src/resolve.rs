//! Resolving the names a user gives on the command line or in a recipe: a model is a zoo name, a
//! model-spec file (`.toml`, a GPT or Llama at any size) or a graph file, a cluster is a config
//! file or the name of one shipped in `configs/`.

use std::path::Path;

use crate::assets;
use crate::autocast::autocast;
use crate::cluster::{Cluster, check_profile_key, load_cluster, parse_cluster};
use crate::error::{InputError, Result};
use crate::graph::{Graph, rebatch};
use crate::precision::Precision;
use crate::{import, zoo};

/// Whether `model` names a zoo model (optionally `-inference`).
pub fn is_zoo_model(model: &str) -> bool {
    zoo::NAMES.contains(&model.strip_suffix("-inference").unwrap_or(model))
        || zoo::is_bert_squad(model)
        || zoo::gpt_size(model).is_some()
        || zoo::llama_size(model).is_some()
}

/// A zoo name or a model-spec file (at its default batch, or `batch`), or else a graph file in any
/// importable format (re-batched linearly to `batch` when one is given).
pub fn load_model(model: &str, batch: Option<u32>) -> Result<Graph> {
    let opts = zoo::ZooOptions {
        batch_size: batch,
        ..zoo::ZooOptions::default()
    };
    load_model_as(model, &opts)
}

/// [`load_model`] with a zoo model built as `opts` says (batch, framework, sequence length); a
/// graph file is what its exporter recorded, whatever the framework asked, and refuses a
/// sequence length.
pub fn load_model_as(model: &str, opts: &zoo::ZooOptions) -> Result<Graph> {
    let batch = opts.batch_size;
    if batch == Some(0) {
        return Err(InputError::new("<cli>", "--batch", "must be at least 1").into());
    }
    let path = Path::new(model);
    // A missing spec file is a bad `--model` as a missing graph file is (exit 2), not a read error.
    if is_zoo_model(model) || (zoo::is_spec_file(model) && path.exists()) {
        return Ok(zoo::build(model, opts)?);
    }
    if !path.exists() {
        return Err(InputError::new(
            "<cli>",
            "--model",
            format!(
                "\"{model}\" is neither a zoo model ({}) nor an existing file",
                zoo::known_names().join(", ")
            ),
        )
        .into());
    }
    if opts.seq.is_some() {
        return Err(InputError::new(
            "<cli>",
            "--seq",
            format!(
                "\"{model}\" is a graph file: its sequence length is the one it was exported at"
            ),
        )
        .into());
    }
    let graph = import_model(path, None)?;
    match batch {
        // An imported graph is re-batched linearly (see graph::rebatch for what that assumes).
        Some(batch) if batch != graph.batch_size => Ok(rebatch(&graph, batch, model)?),
        _ => Ok(graph),
    }
}

/// [`load_model_as`], then autocast to `precision`: the graph as the model trains in it.
pub fn load_trained(model: &str, opts: &zoo::ZooOptions, precision: Precision) -> Result<Graph> {
    let graph = load_model_as(model, opts)?;
    Ok(autocast(&graph, precision, model)?)
}

/// A graph file in `format` (or the one detected), whose profiled times each name a GPU of the
/// catalog, a family of them ("V100") or `cpu` (the PyTorch exporter's host timings, which no
/// simulation uses): a time under a name nothing matches would be ignored without a word.
pub fn import_model(path: &Path, format: Option<import::Format>) -> Result<Graph> {
    let graph = import::import(path, format)?;
    let source = path.display().to_string();
    for (i, op) in graph.ops().iter().enumerate() {
        for key in op.profiled_us.keys() {
            check_profile_key(key).map_err(|why| {
                InputError::new(
                    &source,
                    format!("ops[{i}].profiled_us.{key} (op {} \"{}\")", op.id, op.name),
                    why,
                )
            })?;
        }
    }
    Ok(graph)
}

/// A cluster config file, or the name of a config shipped in `configs/`.
pub fn load_named_cluster(name: &str, field: &str) -> Result<Cluster> {
    let path = Path::new(name);
    if path.exists() {
        return load_cluster(path);
    }
    if let Some(text) = assets::config(name) {
        return Ok(parse_cluster(text, &format!("configs/{name}.toml"))?);
    }
    Err(InputError::new(
        "<cli>",
        field,
        format!(
            "\"{name}\" is neither a config file nor a shipped config ({})",
            assets::config_names().join(", ")
        ),
    )
    .into())
}
