//! Built-in model zoo: full training iterations (forward, backward, Adam) of the models the TAG
//! paper evaluates, plus a few extras, generated op by op with TensorFlow-style op types.
//!
//! Every model is described forward-only in [`cnn`], [`inception`] or [`transformer`]; the
//! backward pass and the optimizer are derived by [`builder`]. Parameter counts match the
//! published implementations exactly; [`card`] records which implementation and the published
//! figures the tests check against.

mod builder;
mod cnn;
mod framework;
mod inception;
mod layers;
mod optimizer;
mod spec;
mod transformer;

use serde::Serialize;

use crate::error::InputError;
use crate::graph::Graph;
use builder::Net;
use transformer::{BertConfig, BertHead, TransformerConfig};

pub use framework::Framework;
pub use optimizer::Optimizer;
pub use spec::{LanguageModel, MAX_SEQ, ModelSpec, is_spec_file, load_spec, parse_spec};

/// The models [`build`] knows, in the order the CLI lists them.
pub const NAMES: &[&str] = &[
    "inception-v3",
    "resnet101",
    "vgg19",
    "transformer",
    "bert-small",
    "bert-large",
    "alexnet",
    "vgg16",
    "gpt",
    "mlp",
    "resnet50",
    "resnet152",
];

/// Batch of a named GPT or Llama size when none is given.
const GPT_SIZE_BATCH: u32 = 8;

/// Every name [`build`] knows: [`NAMES`], then the [`BERT_SQUAD`] models, the [`GPT_SIZES`] and
/// the [`LLAMA_SIZES`].
pub(crate) fn known_names() -> Vec<&'static str> {
    NAMES
        .iter()
        .copied()
        .chain(BERT_SQUAD.iter().copied())
        .chain(GPT_SIZES.iter().map(|(n, _)| *n))
        .chain(LLAMA_SIZES.iter().map(|(n, _)| *n))
        .collect()
}

/// BERT fine-tuned on SQuAD, each a [`build`] name of its own: `bert-small` and `bert-large`'s
/// encoder under a span head (`BertForQuestionAnswering`: a linear layer to start and end logits
/// at every position, their cross-entropies over the positions) instead of the pre-training
/// heads. Not in [`NAMES`], as the GPT and Llama sizes are not: the committed zoo graphs and
/// the every-model tests cover the pre-training graphs.
pub const BERT_SQUAD: &[&str] = &["bert-small-squad", "bert-large-squad"];

/// Whether `name` (with or without the `-inference` suffix) is one of the [`BERT_SQUAD`] models.
pub(crate) fn is_bert_squad(name: &str) -> bool {
    BERT_SQUAD.contains(&name.strip_suffix(INFERENCE_SUFFIX).unwrap_or(name))
}

/// Llama-family sizes: pre-RMSNorm decoder blocks with rotary positions, grouped-query attention
/// and a SwiGLU MLP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlamaConfig {
    /// Decoder blocks.
    pub layers: usize,
    /// Model width; a multiple of `heads`.
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention; `heads` for plain multi-head attention).
    pub kv_heads: usize,
    /// Width of the SwiGLU MLP's gate and up projections.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Tokens per sequence (rotary positions: no table to size).
    pub seq: usize,
    /// Whether the LM head is the token embedding (Llama 3.2 1B and 3B) or a matrix of its own.
    pub tied: bool,
}

/// Named Llama sizes, each a [`build`] name of its own, at the published shapes (Hugging Face's
/// `config.json` of each checkpoint): Llama 3.2 1B and 3B (tied head), Llama 2 7B, 13B and 70B
/// (4,096 tokens), Llama 3 8B and 70B (8,192 tokens).
#[rustfmt::skip]
pub const LLAMA_SIZES: &[(&str, LlamaConfig)] = &[
    ("llama-1b", llama(16, 2048, 32, 8, 8192, LLAMA3_VOCAB, 8192, true)),
    ("llama-3b", llama(28, 3072, 24, 8, 8192, LLAMA3_VOCAB, 8192, true)),
    ("llama-7b", llama(32, 4096, 32, 32, 11008, LLAMA2_VOCAB, 4096, false)),
    ("llama-8b", llama(32, 4096, 32, 8, 14336, LLAMA3_VOCAB, 8192, false)),
    ("llama-13b", llama(40, 5120, 40, 40, 13824, LLAMA2_VOCAB, 4096, false)),
    ("llama-70b", llama(80, 8192, 64, 8, 28672, LLAMA2_VOCAB, 4096, false)),
    ("llama3-70b", llama(80, 8192, 64, 8, 28672, LLAMA3_VOCAB, 8192, false)),
];

const LLAMA2_VOCAB: usize = 32000;
const LLAMA3_VOCAB: usize = 128_256;

#[allow(clippy::too_many_arguments)]
const fn llama(
    layers: usize,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    ffn: usize,
    vocab: usize,
    seq: usize,
    tied: bool,
) -> LlamaConfig {
    LlamaConfig {
        layers,
        hidden,
        heads,
        kv_heads,
        ffn,
        vocab,
        seq,
        tied,
    }
}

/// The sizes of a named Llama ([`LLAMA_SIZES`]), with or without the `-inference` suffix.
pub(crate) fn llama_size(name: &str) -> Option<LlamaConfig> {
    let base = name.strip_suffix(INFERENCE_SUFFIX).unwrap_or(name);
    LLAMA_SIZES
        .iter()
        .find(|(n, _)| *n == base)
        .map(|(_, c)| c.clone())
}

/// Suffix selecting the forward-only variant of a model.
pub const INFERENCE_SUFFIX: &str = "-inference";

/// GPT-2-style decoder sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GptConfig {
    /// Number of decoder blocks (attention + MLP).
    pub layers: usize,
    /// Model width (embedding size); must be a multiple of `heads`.
    pub hidden: usize,
    /// Attention heads per block.
    pub heads: usize,
    /// Context length; also the size of the learned position table.
    pub seq: usize,
    /// Vocabulary size: rows of the token embedding table.
    pub vocab: usize,
}

/// Named GPT sizes in the `gpt` model's GPT-2 layout, each a [`build`] name of its own: GPT-2
/// medium, large and XL (1,024 tokens), and GPT-3 1.3B, 2.7B, 6.7B and 13B (Brown et al. 2020,
/// Table 2.1: 2,048 tokens, the same vocabulary). Departures from that table, whose head counts
/// do not divide two of its widths: 1.3B with 16 heads of 128 (as Megatron-LM runs it), 13B at
/// width 5,120 with 40 heads of 128 (as OPT-13B).
pub const GPT_SIZES: &[(&str, GptConfig)] = &[
    ("gpt2-medium", gpt(24, 1024, 16, 1024)),
    ("gpt2-large", gpt(36, 1280, 20, 1024)),
    ("gpt2-xl", gpt(48, 1600, 25, 1024)),
    ("gpt3-1.3b", gpt(24, 2048, 16, 2048)),
    ("gpt3-2.7b", gpt(32, 2560, 32, 2048)),
    ("gpt3-6.7b", gpt(32, 4096, 32, 2048)),
    ("gpt3-13b", gpt(40, 5120, 40, 2048)),
];

const fn gpt(layers: usize, hidden: usize, heads: usize, seq: usize) -> GptConfig {
    GptConfig {
        layers,
        hidden,
        heads,
        seq,
        vocab: 50257,
    }
}

/// Query heads, key/value heads and default tokens per sequence of a language model: `gpt`, a
/// [`GPT_SIZES`] or a [`LLAMA_SIZES`] name, or a model-spec file ([`load_spec`]); `None` for any
/// other model, an error for a spec file that cannot be read or is wrong.
pub fn lm_shape(name: &str) -> Result<Option<(usize, usize, usize)>, InputError> {
    Ok(language_model(name)?.map(|m| m.shape()))
}

/// The language model `name` builds: `gpt`, a [`GPT_SIZES`] or a [`LLAMA_SIZES`] name, or a
/// model-spec file; `None` for any other model.
pub fn language_model(name: &str) -> Result<Option<LanguageModel>, InputError> {
    // A spec file that is not there is none: the model's loader says `--model` names nothing.
    if is_spec_file(name) && std::path::Path::new(name).exists() {
        return Ok(Some(load_spec(std::path::Path::new(name))?.model));
    }
    let base = name.strip_suffix(INFERENCE_SUFFIX).unwrap_or(name);
    Ok(if base == "gpt" {
        Some(LanguageModel::Gpt(GptConfig::default()))
    } else {
        named_language_model(base)
    })
}

/// The sizes of a named GPT ([`GPT_SIZES`]), with or without the `-inference` suffix.
pub(crate) fn gpt_size(name: &str) -> Option<GptConfig> {
    let base = name.strip_suffix(INFERENCE_SUFFIX).unwrap_or(name);
    GPT_SIZES
        .iter()
        .find(|(n, _)| *n == base)
        .map(|(_, c)| c.clone())
}

/// Trainable parameters of a GPT-2-layout model, the LM head tied to the token embedding: token
/// and position tables, per block 12·h² + 13·h (QKV, projection, MLP, their biases, two
/// LayerNorms), and the final LayerNorm.
pub fn gpt_params(c: &GptConfig) -> u64 {
    let (v, s, h, l) = (
        c.vocab as u64,
        c.seq as u64,
        c.hidden as u64,
        c.layers as u64,
    );
    v * h + s * h + l * (12 * h * h + 13 * h) + 2 * h
}

/// Trainable parameters of a Llama-family model: the token table, per block the query and output
/// projections (h² each), the key and value projections (h × the key/value heads' width each),
/// the SwiGLU MLP's three matrices (h × ffn each) and two RMSNorm gains, the final RMSNorm, and
/// an LM head of its own unless tied.
pub fn llama_params(c: &LlamaConfig) -> u64 {
    let (v, h, f, l) = (
        c.vocab as u64,
        c.hidden as u64,
        c.ffn as u64,
        c.layers as u64,
    );
    let kv = (c.kv_heads * (c.hidden / c.heads)) as u64;
    let head = if c.tied { 0 } else { v * h };
    v * h + l * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h + head
}

impl Default for GptConfig {
    /// GPT-2 small (124M).
    fn default() -> GptConfig {
        GptConfig {
            layers: 12,
            hidden: 768,
            heads: 12,
            seq: 1024,
            vocab: 50257,
        }
    }
}

/// Knobs for [`build`].
#[derive(Debug, Clone, Default)]
pub struct ZooOptions {
    /// Samples per iteration; the model's [`ModelCard::default_batch`] when `None`.
    pub batch_size: Option<u32>,
    /// Forward pass only: no loss, backward or optimizer ops.
    pub inference: bool,
    /// Sizes of the `gpt` model.
    pub gpt: GptConfig,
    /// Whose kernels the graph reproduces (transformer layers; the CNNs are the same in both).
    pub framework: Framework,
    /// Tokens per sequence of the models that read sequences: `bert-small`, `bert-large` and
    /// their [`BERT_SQUAD`] variants (default 128, at most their 512 positions) and the GPTs (default their context; the
    /// learned position table grows or shrinks with it). Refused for the other models.
    pub seq: Option<usize>,
    /// The optimizer whose updates end the graph (Adam by default).
    pub optimizer: Optimizer,
    /// Positions per sequence the masked-LM head of `bert-small` and `bert-large` predicts,
    /// gathered from the encoder output first, as NVIDIA's DeepLearningExamples scripts do (the
    /// masked ones: at most 20 of 128 tokens, 80 of 512); every position without one, as Hugging
    /// Face's `BertForPreTraining`. Refused for the other models.
    pub masked_positions: Option<usize>,
}

/// What a zoo model is and the published figures it is checked against.
#[derive(Debug, Clone, Serialize)]
pub struct ModelCard {
    /// The zoo name (one of [`NAMES`]), without the `-inference` suffix.
    pub name: &'static str,
    /// The exact implementation the graph reproduces.
    pub variant: &'static str,
    /// Batch size of the TAG evaluation (QuickP's for vgg16).
    pub default_batch: u32,
    /// Published trainable parameter count.
    pub reference_params: u64,
    /// Where `reference_params` is published (implementation and how it was counted).
    pub reference_params_source: &'static str,
    /// Published forward multiply-adds per sample (0 if none is published).
    pub reference_fwd_macs_per_sample: f64,
    /// Where `reference_fwd_macs_per_sample` is published, and what it covers.
    pub reference_macs_source: &'static str,
}

/// The card of a zoo model (`name` may carry the `-inference` suffix).
pub fn card(name: &str) -> Option<ModelCard> {
    let base = name.strip_suffix(INFERENCE_SUFFIX).unwrap_or(name);
    CARDS.iter().find(|c| c.name == base).cloned()
}

const TORCHVISION_DOCS: &str =
    "torchvision model documentation (weights table: params, GFLOPS = multiply-adds)";

const CARDS: &[ModelCard] = &[
    ModelCard {
        name: "inception-v3",
        variant: "torchvision inception_v3 with auxiliary head (aux_logits=True), 299x299; conv without bias, \
                  BatchNorm with gamma+beta; the aux head (and its loss, in training) is part of the graph",
        default_batch: 96,
        reference_params: 27_161_264,
        reference_params_source: "torchvision inception_v3(aux_logits=True): 27,161,264 trainable parameters",
        reference_fwd_macs_per_sample: 5.71e9,
        reference_macs_source: "torchvision docs: 5.71 GFLOPS, main path only (the aux head adds ~6 MMAC, 0.1%)",
    },
    ModelCard {
        name: "resnet101",
        variant: "torchvision resnet101 (bottleneck v1.5, stride on the 3x3 conv), 224x224",
        default_batch: 96,
        reference_params: 44_549_160,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 7.80e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "resnet50",
        variant: "torchvision resnet50 (bottleneck v1.5, stride on the 3x3 conv), 224x224",
        default_batch: 64,
        reference_params: 25_557_032,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 4.09e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "resnet152",
        variant: "torchvision resnet152 (bottleneck v1.5, stride on the 3x3 conv), 224x224",
        default_batch: 64,
        reference_params: 60_192_808,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 11.51e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "vgg19",
        variant: "torchvision vgg19 (no batch norm), 224x224",
        default_batch: 96,
        reference_params: 143_667_240,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 19.63e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "transformer",
        variant: "Transformer-base = torch.nn.Transformer() defaults (d 512, 8 heads, 6+6 post-LN layers, FFN 2048 \
                  ReLU, final encoder/decoder LayerNorms) + one 37000x512 embedding shared by source, target and the \
                  tied output projection; 32 source and 32 target tokens per sentence; TF-style LayerNorm/dropout ops",
        default_batch: 480,
        reference_params: 63_084_544,
        reference_params_source: "torch.nn.Transformer() body 44,140,544 + 37000x512 shared embedding \
                                  (Vaswani et al. 2017 quote ~65M)",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per attention",
    },
    ModelCard {
        name: "bert-small",
        variant: "Turc et al. BERT-Small (L=4, H=512, A=8, FFN 2048, vocab 30522, 512 positions) as HF \
                  BertForPreTraining (pooler, MLM transform+LN, decoder tied to word embeddings, NSP); seq 128; \
                  TF-reference ops (tanh GELU, decomposed LayerNorm, TF1 dropout)",
        default_batch: 96,
        reference_params: 29_058_876,
        reference_params_source: "computed: BertModel 28,763,648 (closed form) + pre-training heads 295,228",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per layer",
    },
    ModelCard {
        name: "bert-large",
        variant: "HF BertForPreTraining bert-large-uncased (L=24, H=1024, A=16, FFN 4096, vocab 30522, 512 positions, \
                  2 token types; MLM transform+LN, decoder tied to word embeddings + 30522 bias, NSP 1024x2, \
                  pooler); seq 128; TF-reference ops (tanh GELU, decomposed LayerNorm, TF1 dropout)",
        default_batch: 16,
        reference_params: 336_226_108,
        reference_params_source: "HF transformers BertForPreTraining.from_pretrained(\"bert-large-uncased\")",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per layer",
    },
    ModelCard {
        name: "bert-small-squad",
        variant: "bert-small's encoder (Turc et al. BERT-Small, HF BertModel without the pooler) under HF \
                  BertForQuestionAnswering's span head (qa_outputs 512x2 at every position, start and end \
                  cross-entropy over the positions); seq 128; TF-reference ops",
        default_batch: 96,
        reference_params: 28_502_018,
        reference_params_source: "computed: BertModel 28,763,648 less the pooler 262,656, plus qa_outputs 1,026",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per layer",
    },
    ModelCard {
        name: "bert-large-squad",
        variant: "bert-large-uncased's encoder (HF BertModel without the pooler) under HF BertForQuestionAnswering's \
                  span head (qa_outputs 1024x2 at every position, start and end cross-entropy over the positions), \
                  as SQuAD v1.1 fine-tuning runs it; seq 128; TF-reference ops",
        default_batch: 16,
        reference_params: 334_094_338,
        reference_params_source: "computed: BertModel 335,141,888 (bert-large-uncased) less the pooler 1,049,600, \
                                  plus qa_outputs 2,050",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per layer",
    },
    ModelCard {
        name: "alexnet",
        variant: "torchvision alexnet (single-tower variant), 224x224",
        default_batch: 128,
        reference_params: 61_100_840,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 0.714e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "vgg16",
        variant: "torchvision vgg16 (no batch norm), 224x224",
        default_batch: 96,
        reference_params: 138_357_544,
        reference_params_source: TORCHVISION_DOCS,
        reference_fwd_macs_per_sample: 15.47e9,
        reference_macs_source: TORCHVISION_DOCS,
    },
    ModelCard {
        name: "gpt",
        variant: "GPT-2 layout (learned positions, pre-LN blocks, fused QKV, tanh GELU, final LN, LM head tied to \
                  the token embedding); GPT-2 small by default (12 layers, 768 hidden, 12 heads, 1024 tokens, \
                  vocab 50257); other sizes via GptConfig (the reference count is for the default)",
        default_batch: 8,
        reference_params: 124_439_808,
        reference_params_source: "HF transformers GPT2LMHeadModel \"gpt2\" (tied head counted once)",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published; tests use the closed form weights x tokens + 2 seq^2 d per layer",
    },
    ModelCard {
        name: "mlp",
        variant: "784-512-256-10 perceptron with biases and ReLU, for tests",
        default_batch: 32,
        reference_params: 535_818,
        reference_params_source: "closed form 784*512+512 + 512*256+256 + 256*10+10",
        reference_fwd_macs_per_sample: 0.0,
        reference_macs_source: "none published",
    },
];

/// A Llama of any size ([`LlamaConfig`], its `seq` the tokens), named `name`: what the named
/// sizes build, for shapes the zoo does not name (a checkpoint's `config.json`, a small test
/// model). `opts.seq` is not read; the batch is `opts.batch_size` (8 without one), a forward-only
/// graph with `opts.inference`.
///
/// ```
/// use topoplace::zoo::{LlamaConfig, ZooOptions, build_llama};
/// let tiny = LlamaConfig { layers: 2, hidden: 64, heads: 4, kv_heads: 2, ffn: 128, vocab: 256,
///                          seq: 16, tied: false };
/// let g = build_llama("llama-tiny", &tiny, &ZooOptions::default()).unwrap();
/// let params: u64 = g.ops().iter().map(|o| o.params).sum();
/// // Embedding and head 2·256·64; per layer q and o 64², k and v 64·32, the MLP 3·64·128 and
/// // two norms; the final norm.
/// assert_eq!(params, 2 * 256 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64) + 64);
/// ```
pub fn build_llama(
    name: &str,
    config: &LlamaConfig,
    opts: &ZooOptions,
) -> Result<Graph, InputError> {
    let mut net = net_for(
        opts.batch_size.unwrap_or(GPT_SIZE_BATCH),
        opts.inference,
        opts,
    );
    transformer::llama(&mut net, config);
    net.finish(name)
}

/// Build a zoo model's training graph (or forward-only graph with `-inference` or
/// `opts.inference`).
pub fn build(name: &str, opts: &ZooOptions) -> Result<Graph, InputError> {
    let (base, suffixed) = match name.strip_suffix(INFERENCE_SUFFIX) {
        Some(b) => (b, true),
        None => (name, false),
    };
    let inference = opts.inference || suffixed;
    // `card` and the size tables strip the suffix too: a second one would reach a builder as
    // `mlp-inference`, which none has.
    if base.ends_with(INFERENCE_SUFFIX) {
        return Err(InputError::new(
            "<zoo>",
            "model",
            format!("\"{name}\": the {INFERENCE_SUFFIX} suffix is given twice"),
        ));
    }
    if opts.masked_positions.is_some() && !matches!(base, "bert-small" | "bert-large") {
        return Err(InputError::new(
            "<zoo>",
            "masked_positions",
            format!(
                "{base} has no masked-LM head: masked positions apply to bert-small and \
                 bert-large"
            ),
        ));
    }
    if is_spec_file(base) {
        let spec = load_spec(std::path::Path::new(base))?;
        return build_language_model(&spec.name, &spec.model, inference, opts);
    }
    if let Some(model) = named_language_model(base) {
        return build_language_model(base, &model, inference, opts);
    }
    let graph_name = suffixed_name(base, inference);
    let Some(card) = card(base) else {
        return Err(InputError::new(
            "<zoo>",
            "model",
            format!(
                "unknown model \"{name}\"; known: {}",
                known_names().join(", ")
            ),
        ));
    };
    let gpt_config = gpt_at(opts.gpt.clone(), opts)?;
    if base == "gpt" {
        check_gpt(&gpt_config)?;
    } else if opts.seq.is_some() && !base.starts_with("bert") {
        return Err(InputError::new(
            "<zoo>",
            "seq",
            format!(
                "{base} reads no sequences: a sequence length applies to BERT, the GPTs and \
                 the Llamas"
            ),
        ));
    }
    let batch = opts.batch_size.unwrap_or(card.default_batch);
    let mut net = net_for(batch, inference, opts);
    match base {
        "inception-v3" => inception::inception_v3(&mut net),
        "resnet101" => cnn::resnet(&mut net, &[3, 4, 23, 3]),
        "resnet50" => cnn::resnet(&mut net, &[3, 4, 6, 3]),
        "resnet152" => cnn::resnet(&mut net, &[3, 8, 36, 3]),
        "vgg19" => cnn::vgg(&mut net, &[2, 2, 4, 4, 4]),
        "vgg16" => cnn::vgg(&mut net, &[2, 2, 3, 3, 3]),
        "alexnet" => cnn::alexnet(&mut net),
        "transformer" => transformer::transformer(&mut net, &TransformerConfig::BASE),
        "bert-small" => transformer::bert(&mut net, bert_at(BertConfig::SMALL, opts)?),
        "bert-large" => transformer::bert(&mut net, bert_at(BertConfig::LARGE, opts)?),
        "bert-small-squad" => transformer::bert(&mut net, squad(bert_at(BertConfig::SMALL, opts)?)),
        "bert-large-squad" => transformer::bert(&mut net, squad(bert_at(BertConfig::LARGE, opts)?)),
        "gpt" => transformer::gpt(&mut net, &gpt_config),
        "mlp" => cnn::mlp(&mut net),
        other => unreachable!("model {other} has a card but no builder"),
    }
    net.finish(&graph_name)
}

/// A named GPT or Llama size ([`GPT_SIZES`], [`LLAMA_SIZES`]).
fn named_language_model(name: &str) -> Option<LanguageModel> {
    llama_size(name)
        .map(LanguageModel::Llama)
        .or_else(|| gpt_size(name).map(LanguageModel::Gpt))
}

/// `model` (a named size or a spec file's) built as `name`, at `opts`' batch (8 without one)
/// and sequence length (the model's without one).
fn build_language_model(
    name: &str,
    model: &LanguageModel,
    inference: bool,
    opts: &ZooOptions,
) -> Result<Graph, InputError> {
    let name = suffixed_name(name, inference);
    match model {
        LanguageModel::Llama(c) => {
            let config = LlamaConfig {
                seq: seq_or(opts, c.seq)?,
                ..c.clone()
            };
            let opts = ZooOptions {
                inference,
                ..opts.clone()
            };
            build_llama(&name, &config, &opts)
        }
        LanguageModel::Gpt(c) => {
            let config = gpt_at(c.clone(), opts)?;
            let mut net = net_for(opts.batch_size.unwrap_or(GPT_SIZE_BATCH), inference, opts);
            transformer::gpt(&mut net, &config);
            net.finish(&name)
        }
    }
}

/// `base` with the forward-only suffix when the graph is for inference.
fn suffixed_name(base: &str, inference: bool) -> String {
    if inference {
        format!("{base}{INFERENCE_SUFFIX}")
    } else {
        base.to_string()
    }
}

/// A net of `batch` samples (forward only when `inference`) building `opts`' framework and
/// optimizer.
fn net_for(batch: u32, inference: bool, opts: &ZooOptions) -> Net {
    Net::new(batch, !inference)
        .with_framework(opts.framework)
        .with_optimizer(opts.optimizer)
}

/// The sequence length `opts` asks for, else `default`; refused at 0.
fn seq_or(opts: &ZooOptions, default: usize) -> Result<usize, InputError> {
    match opts.seq {
        Some(0) => Err(InputError::new("<zoo>", "seq", "must be at least 1 token")),
        // Unchecked, 2³² tokens wrapped the attention FLOPs of a Llama.
        Some(seq) if seq > MAX_SEQ => Err(InputError::new(
            "<zoo>",
            "seq",
            format!("{seq} tokens: at most {MAX_SEQ}"),
        )),
        seq => Ok(seq.unwrap_or(default)),
    }
}

/// `config` at the sequence length `opts` asks for.
fn gpt_at(config: GptConfig, opts: &ZooOptions) -> Result<GptConfig, InputError> {
    Ok(GptConfig {
        seq: seq_or(opts, config.seq)?,
        ..config
    })
}

/// `config` at the sequence length `opts` asks for, within its position table, its masked-LM
/// head on the masked positions `opts` asks for (at most the tokens).
fn bert_at(config: BertConfig, opts: &ZooOptions) -> Result<BertConfig, InputError> {
    let seq = opts.seq.unwrap_or(config.seq);
    if seq == 0 || seq > config.max_pos {
        return Err(InputError::new(
            "<zoo>",
            "seq",
            format!("{seq} tokens: BERT takes 1 to {}", config.max_pos),
        ));
    }
    let head = match opts.masked_positions {
        None => config.head,
        Some(k) if k == 0 || k > seq => {
            return Err(InputError::new(
                "<zoo>",
                "masked_positions",
                format!("{k} positions: the masked-LM head takes 1 to the {seq} tokens"),
            ));
        }
        Some(k) => BertHead::PreTraining {
            predictions: Some(k),
        },
    };
    Ok(BertConfig {
        seq,
        head,
        ..config
    })
}

/// `config` under SQuAD's span head instead of the pre-training heads.
fn squad(config: BertConfig) -> BertConfig {
    BertConfig {
        head: BertHead::Span,
        ..config
    }
}

/// Refuse GPT sizes that cannot form a model, as a spec file's are refused ([`spec`]).
fn check_gpt(c: &GptConfig) -> Result<(), InputError> {
    spec::check(&LanguageModel::Gpt(c.clone()), &|field, why| {
        InputError::new("<zoo>", format!("gpt.{field}"), why)
    })
}
