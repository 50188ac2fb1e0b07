//! A language model described in a small TOML file, given where a model name goes (`--model
//! my-llama.toml`): a Llama or a GPT-2-layout decoder at any size, either a named size with some
//! fields changed (`base = "llama-8b"`, `layers = 16`) or every size given (`family = "llama"`).
//!
//! ```toml
//! # Llama 3 8B cut to 16 layers and 4,096 tokens
//! base = "llama-8b"
//! layers = 16
//! seq = 4096
//! ```

use std::path::Path;

use serde::Deserialize;

use super::{GptConfig, LlamaConfig, gpt_size, llama_size};
use crate::error::{Error, InputError};

/// The suffix that marks a model name as a spec file rather than a zoo name or a graph file.
pub(crate) const SPEC_SUFFIX: &str = ".toml";

/// Whether `model` names a model-spec file (by its `.toml` suffix).
pub fn is_spec_file(model: &str) -> bool {
    model.ends_with(SPEC_SUFFIX)
}

/// The architectures a spec file can describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LanguageModel {
    /// Pre-RMSNorm decoder with rotary positions, grouped-query attention and SwiGLU.
    Llama(LlamaConfig),
    /// GPT-2 layout: learned positions, pre-LayerNorm blocks, a 4·h GELU MLP, tied head.
    Gpt(GptConfig),
}

impl LanguageModel {
    /// Model width.
    pub fn hidden(&self) -> usize {
        match self {
            LanguageModel::Llama(c) => c.hidden,
            LanguageModel::Gpt(c) => c.hidden,
        }
    }

    /// Every size by its spec field name: the five both families have, then Llama's own.
    fn sizes(&self) -> Vec<(&'static str, usize)> {
        let (layers, heads, vocab, seq) = match self {
            LanguageModel::Llama(c) => (c.layers, c.heads, c.vocab, c.seq),
            LanguageModel::Gpt(c) => (c.layers, c.heads, c.vocab, c.seq),
        };
        let mut sizes = vec![
            ("layers", layers),
            ("hidden", self.hidden()),
            ("heads", heads),
            ("vocab", vocab),
            ("seq", seq),
        ];
        if let LanguageModel::Llama(c) = self {
            sizes.extend([("kv_heads", c.kv_heads), ("ffn", c.ffn)]);
        }
        sizes
    }

    /// Width of the MLP's hidden layer (Llama's `ffn`, GPT's 4·h): what tensor parallelism
    /// splits its column-parallel products into.
    pub fn mlp_width(&self) -> usize {
        match self {
            LanguageModel::Llama(c) => c.ffn,
            LanguageModel::Gpt(c) => 4 * c.hidden,
        }
    }

    /// Trainable parameters, in closed form ([`super::gpt_params`], [`super::llama_params`]):
    /// what the built graph's parameter ops hold, without building it.
    pub fn params(&self) -> u64 {
        match self {
            LanguageModel::Llama(c) => super::llama_params(c),
            LanguageModel::Gpt(c) => super::gpt_params(c),
        }
    }

    /// Query heads, key/value heads and tokens per sequence.
    pub fn shape(&self) -> (usize, usize, usize) {
        match self {
            LanguageModel::Llama(c) => (c.heads, c.kv_heads, c.seq),
            LanguageModel::Gpt(c) => (c.heads, c.heads, c.seq),
        }
    }
}

/// A model read from a spec file: its name (the `name` field, else the file's stem) and sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// What reports call the model.
    pub name: String,
    /// The architecture and its sizes.
    pub model: LanguageModel,
}

/// The file as written: every size optional, since a `base` supplies the ones left out.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    name: Option<String>,
    family: Option<String>,
    base: Option<String>,
    layers: Option<usize>,
    hidden: Option<usize>,
    heads: Option<usize>,
    kv_heads: Option<usize>,
    ffn: Option<usize>,
    vocab: Option<usize>,
    seq: Option<usize>,
    tied: Option<bool>,
}

/// Upper bounds on each size, far above any model trained today (Llama 3 405B: 126 layers, width
/// 16,384, MLP 53,248, vocabulary 128,256), so that a typo cannot ask for a graph that fills
/// memory.
const LIMITS: &[(&str, usize)] = &[
    ("layers", 1_024),
    ("hidden", 131_072),
    ("heads", 4_096),
    ("kv_heads", 4_096),
    ("ffn", 1_048_576),
    ("vocab", 4_194_304),
    ("seq", MAX_SEQ),
];

/// The longest sequence any zoo language model or spec takes, tokens: 1M, where products of the
/// sequence length (attention's s² FLOPs and bytes) stay far from overflowing.
pub const MAX_SEQ: usize = 1_048_576;

/// GPT-2's vocabulary, the default of a `family = "gpt"` spec.
const GPT2_VOCAB: usize = 50_257;

/// Read and check the spec file at `path`; a file that cannot be read is an error naming it.
pub fn load_spec(path: &Path) -> Result<ModelSpec, InputError> {
    let shown = path.display().to_string();
    let text = crate::io::read_text_file(path).map_err(|e| match e {
        Error::Input(e) => e,
        Error::Io { source, .. } => InputError::new(&shown, "", source.to_string()),
        other => InputError::new(&shown, "", other.to_string()),
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| shown.clone());
    parse_spec(&text, &shown, &stem)
}

/// Parse and check a spec; `source` names the file in errors, `default_name` names the model
/// when the file does not.
pub fn parse_spec(text: &str, source: &str, default_name: &str) -> Result<ModelSpec, InputError> {
    let file: SpecFile = crate::io::parse_toml(text, source)?;
    let err = |field: &str, message: String| InputError::new(source, field, message);
    let model = match (&file.family, &file.base) {
        (Some(_), Some(_)) => {
            return Err(err(
                "base",
                "give `family` or `base`, not both: a base's family is its own".into(),
            ));
        }
        (None, None) => {
            return Err(err(
                "family",
                "missing: give `family = \"llama\"` or `\"gpt\"` with every size, or `base` \
                 naming a zoo size to start from"
                    .into(),
            ));
        }
        (Some(family), None) => from_family(family, &file, &err)?,
        (None, Some(base)) => from_base(base, &file, &err)?,
    };
    check(&model, &err)?;
    let name = file
        .name
        .clone()
        .unwrap_or_else(|| default_name.to_string());
    if crate::error::is_blank(&name) {
        return Err(err("name", "must not be empty".into()));
    }
    if let Some(why) = crate::error::unprintable(&name) {
        return Err(err("name", why));
    }
    Ok(ModelSpec { name, model })
}

/// Makes the error for a field of the spec and why it is wrong.
pub(super) type ErrFn<'a> = dyn Fn(&str, String) -> InputError + 'a;

/// Every size from the file, for a spec with no base.
fn from_family(family: &str, f: &SpecFile, err: &ErrFn) -> Result<LanguageModel, InputError> {
    let need = |field: &str, v: Option<usize>| {
        v.ok_or_else(|| {
            err(
                field,
                format!("missing: a `family = \"{family}\"` spec gives it"),
            )
        })
    };
    match family {
        "llama" => {
            let heads = need("heads", f.heads)?;
            Ok(LanguageModel::Llama(LlamaConfig {
                layers: need("layers", f.layers)?,
                hidden: need("hidden", f.hidden)?,
                heads,
                kv_heads: f.kv_heads.unwrap_or(heads),
                ffn: need("ffn", f.ffn)?,
                vocab: need("vocab", f.vocab)?,
                seq: need("seq", f.seq)?,
                tied: f.tied.unwrap_or(false),
            }))
        }
        "gpt" => {
            refuse_llama_only(f, err)?;
            Ok(LanguageModel::Gpt(GptConfig {
                layers: need("layers", f.layers)?,
                hidden: need("hidden", f.hidden)?,
                heads: need("heads", f.heads)?,
                seq: need("seq", f.seq)?,
                vocab: f.vocab.unwrap_or(GPT2_VOCAB),
            }))
        }
        other => Err(err(
            "family",
            format!("\"{other}\" is not a family: \"llama\" or \"gpt\""),
        )),
    }
}

/// A named size with the file's fields laid over it.
fn from_base(base: &str, f: &SpecFile, err: &ErrFn) -> Result<LanguageModel, InputError> {
    if base.ends_with(super::INFERENCE_SUFFIX) {
        // A spec describes a model to train; the forward-only variant has no spec form.
        return Err(err(
            "base",
            format!(
                "\"{base}\" is a forward-only variant: name the model itself (a spec is trained)"
            ),
        ));
    }
    if let Some(c) = llama_size(base) {
        return Ok(LanguageModel::Llama(LlamaConfig {
            layers: f.layers.unwrap_or(c.layers),
            hidden: f.hidden.unwrap_or(c.hidden),
            heads: f.heads.unwrap_or(c.heads),
            kv_heads: f.kv_heads.unwrap_or(c.kv_heads),
            ffn: f.ffn.unwrap_or(c.ffn),
            vocab: f.vocab.unwrap_or(c.vocab),
            seq: f.seq.unwrap_or(c.seq),
            tied: f.tied.unwrap_or(c.tied),
        }));
    }
    if let Some(c) = gpt_size(base).or_else(|| (base == "gpt").then(GptConfig::default)) {
        refuse_llama_only(f, err)?;
        return Ok(LanguageModel::Gpt(GptConfig {
            layers: f.layers.unwrap_or(c.layers),
            hidden: f.hidden.unwrap_or(c.hidden),
            heads: f.heads.unwrap_or(c.heads),
            seq: f.seq.unwrap_or(c.seq),
            vocab: f.vocab.unwrap_or(c.vocab),
        }));
    }
    let known: Vec<&str> = std::iter::once("gpt")
        .chain(super::GPT_SIZES.iter().map(|(n, _)| *n))
        .chain(super::LLAMA_SIZES.iter().map(|(n, _)| *n))
        .collect();
    Err(err(
        "base",
        format!(
            "\"{base}\" is not a zoo language model; known: {}",
            known.join(", ")
        ),
    ))
}

/// The GPT-2 layout has no key/value heads of its own, its MLP is 4·h wide and its head is tied.
fn refuse_llama_only(f: &SpecFile, err: &ErrFn) -> Result<(), InputError> {
    let given = [
        ("kv_heads", f.kv_heads.is_some()),
        ("ffn", f.ffn.is_some()),
        ("tied", f.tied.is_some()),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(err(
            field,
            "a Llama size: the GPT-2 layout has every head its own key/value, a 4·hidden MLP and \
             a tied head"
                .into(),
        )),
        None => Ok(()),
    }
}

/// Sizes that form a model: each at least 1 and within [`LIMITS`], heads dividing the width and
/// key/value heads dividing the heads. `err` names the file and field of a failure.
pub(super) fn check(model: &LanguageModel, err: &ErrFn) -> Result<(), InputError> {
    for (field, value) in model.sizes() {
        let limit = LIMITS
            .iter()
            .find(|(f, _)| *f == field)
            .map_or(usize::MAX, |(_, l)| *l);
        if value == 0 || value > limit {
            return Err(err(field, format!("{value}: must be 1 to {limit}")));
        }
    }
    let (heads, kv_heads, _) = model.shape();
    let hidden = model.hidden();
    if !hidden.is_multiple_of(heads) {
        return Err(err(
            "heads",
            format!("{heads} heads do not divide hidden size {hidden}"),
        ));
    }
    if !heads.is_multiple_of(kv_heads) {
        return Err(err(
            "kv_heads",
            format!("{kv_heads} key/value heads do not divide {heads} query heads"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ModelSpec, InputError> {
        parse_spec(text, "m.toml", "m")
    }

    #[test]
    fn a_base_with_no_changes_is_the_named_size() {
        let spec = parse("base = \"llama-70b\"").unwrap();
        assert_eq!(
            spec.model,
            LanguageModel::Llama(llama_size("llama-70b").unwrap())
        );
        assert_eq!(spec.name, "m");
    }

    #[test]
    fn fields_override_the_base() {
        let spec =
            parse("name = \"half-8b\"\nbase = \"llama-8b\"\nlayers = 16\nseq = 2048").unwrap();
        let LanguageModel::Llama(c) = spec.model else {
            panic!("a Llama base gives a Llama")
        };
        assert_eq!((c.layers, c.seq, c.hidden, c.kv_heads), (16, 2048, 4096, 8));
        assert_eq!(spec.name, "half-8b");
    }

    #[test]
    fn a_family_spec_needs_every_size() {
        let e =
            parse("family = \"llama\"\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 10\nseq = 8")
                .unwrap_err();
        assert_eq!((e.file.as_str(), e.field.as_str()), ("m.toml", "ffn"));
        let gpt = parse("family = \"gpt\"\nlayers = 2\nhidden = 64\nheads = 4\nseq = 8").unwrap();
        assert_eq!(
            gpt.model,
            LanguageModel::Gpt(GptConfig {
                layers: 2,
                hidden: 64,
                heads: 4,
                seq: 8,
                vocab: GPT2_VOCAB
            })
        );
    }

    #[test]
    fn bad_specs_name_the_field() {
        let cases = [
            ("base = \"llama-8b\"\nkv_heads = 3", "kv_heads"),
            ("base = \"llama-8b\"\nheads = 7", "heads"),
            ("base = \"llama-8b\"\nlayers = 0", "layers"),
            ("base = \"llama-8b\"\nlayers = 100000", "layers"),
            ("base = \"gpt3-1.3b\"\nffn = 8192", "ffn"),
            ("base = \"llama-9b\"", "base"),
            ("base = \"llama-1b-inference\"", "base"),
            ("family = \"bert\"", "family"),
            ("family = \"gpt\"\nbase = \"gpt\"", "base"),
            ("layers = 2", "family"),
            ("base = \"gpt\"\nwidth = 5", "width"),
            ("base = \"gpt\"\nname = \" \"", "name"),
            ("base = \"gpt\"\nname = \"a\\nb\"", "name"),
            ("base = \"gpt\"\nlayers = -1", "layers"),
        ];
        for (text, field) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.file, "m.toml", "{text}");
            assert!(e.field.contains(field), "{text}: {e}");
        }
    }
}
