//! Transformer-family models: Transformer-base (encoder-decoder), BERT pre-training, GPT-2.
//!
//! The ops follow the TensorFlow reference implementations these models were published with:
//! LayerNorm is `tf.contrib.layers.layer_norm` (moments + batch_normalization, ten primitive
//! ops), GELU is the tanh approximation of the BERT and GPT-2 code (eight ops), dropout is TF1's
//! `tf.nn.dropout` (random mask, floor, scale, multiply). Attention keeps its Reshape and
//! Transpose ops for splitting and merging heads.

use super::builder::{Net, Rule, T, unary};
use super::layers::{
    add, dense, dropout, gelu, layer_norm, linear, mul, relu, reshape, rms_norm, silu, transpose,
};
use super::{GptConfig, LlamaConfig};
use crate::graph::AttentionShape;

/// Shapes of one attention call, per sample.
#[derive(Debug, Clone, Copy)]
struct Dims {
    /// Query tokens.
    tq: usize,
    /// Key/value tokens.
    tk: usize,
    hidden: usize,
    heads: usize,
}

/// How attention scores are masked before the softmax.
#[derive(Debug, Clone, Copy)]
enum Mask {
    None,
    /// Add a precomputed additive mask (BERT padding mask, causal `-inf` mask).
    Adder(T),
    /// GPT-2: `w * b - 1e10 * (1 - b)` with constant lower-triangular `b` and its complement.
    Gpt {
        b: T,
        c: T,
    },
}

/// `[tokens, hidden]` -> `[heads, tokens, head_dim]`.
fn split_heads(net: &mut Net, p: &str, x: T) -> T {
    let r = reshape(net, p, x);
    transpose(net, p, r)
}

/// Scaled dot-product attention on projected `q`, `k`, `v` (each `[tokens, hidden]`), up to
/// and including the merge of heads; the output projection is the caller's.
fn attention_core(net: &mut Net, p: &str, q: T, k: T, v: T, d: Dims, mask: Mask) -> T {
    if net.framework().fuses_attention() {
        return fused_attention(net, p, [q, k, v], d, mask);
    }
    let q = split_heads(net, &format!("{p}/query"), q);
    let k = split_heads(net, &format!("{p}/key"), k);
    let v = split_heads(net, &format!("{p}/value"), v);
    let score_elems = (d.heads * d.tq * d.tk) as f64;
    let bmm_flops = 2.0 * (d.tq * d.tk * d.hidden) as f64;
    let rule = Rule::BatchMatMul { flops: bmm_flops };
    let mut s = net.op(
        "BatchMatMulV2",
        format!("{p}/scores/BatchMatMulV2"),
        &[q, k],
        score_elems,
        true,
        bmm_flops,
        rule,
    );
    s = net.op_like(
        "Mul",
        format!("{p}/scores/scale"),
        &[s],
        s,
        score_elems,
        unary("Mul", false, false, 1.0),
    );
    match mask {
        Mask::None => {}
        Mask::Adder(m) => {
            s = net.op_like(
                "AddV2",
                format!("{p}/scores/mask"),
                &[s, m],
                s,
                score_elems,
                Rule::Add,
            );
        }
        Mask::Gpt { b, c } => {
            s = net.op_like(
                "Mul",
                format!("{p}/scores/mask_mul"),
                &[s, b],
                s,
                score_elems,
                Rule::Mul,
            );
            s = net.op_like(
                "Sub",
                format!("{p}/scores/mask_sub"),
                &[s, c],
                s,
                score_elems,
                Rule::Sub,
            );
        }
    }
    let probs = net.op_like(
        "Softmax",
        format!("{p}/Softmax"),
        &[s],
        s,
        5.0 * score_elems,
        unary("SoftmaxGrad", false, true, 4.0),
    );
    let probs = dropout(net, &format!("{p}/attn_dropout"), probs);
    let ctx_elems = (d.tq * d.hidden) as f64;
    let rule = Rule::BatchMatMul { flops: bmm_flops };
    let ctx = net.op(
        "BatchMatMulV2",
        format!("{p}/context/BatchMatMulV2"),
        &[probs, v],
        ctx_elems,
        true,
        bmm_flops,
        rule,
    );
    let ctx = transpose(net, &format!("{p}/context"), ctx);
    reshape(net, &format!("{p}/context"), ctx)
}

/// PyTorch's `scaled_dot_product_attention`: heads split as views, one fused kernel (attention
/// dropout inside it; a causal mask skips half the score blocks), and the copy that merges the
/// heads back (`transpose(1, 2).reshape`).
fn fused_attention(net: &mut Net, p: &str, qkv: [T; 3], d: Dims, mask: Mask) -> T {
    let causal = matches!(mask, Mask::Gpt { .. });
    let products = 2.0 * 2.0 * (d.tq * d.tk * d.hidden) as f64;
    let flops = if causal { products / 2.0 } else { products };
    let mut inputs = qkv.to_vec();
    if let Mask::Adder(m) = mask {
        inputs.push(m);
    }
    let ctx_elems = (d.tq * d.hidden) as f64;
    let ctx = net.op(
        "ScaledDotProductAttention",
        format!("{p}/scaled_dot_product_attention"),
        &inputs,
        ctx_elems,
        true,
        flops,
        Rule::Attention { flops },
    );
    let shape = AttentionShape {
        seq_q: d.tq as u32,
        seq_k: d.tk as u32,
        head_dim: (d.hidden / d.heads) as u32,
        causal,
    };
    net.set_attention(ctx, Some(shape));
    transpose(net, &format!("{p}/context"), ctx)
}

/// Multi-head attention with separate query/key/value projections (BERT, torch.nn.Transformer).
fn attention(net: &mut Net, p: &str, xq: T, xkv: T, d: Dims, mask: Mask) -> T {
    let h = d.hidden;
    let q = dense(net, &format!("{p}/query"), xq, d.tq, h, h);
    let k = dense(net, &format!("{p}/key"), xkv, d.tk, h, h);
    let v = dense(net, &format!("{p}/value"), xkv, d.tk, h, h);
    let ctx = attention_core(net, p, q, k, v, d, mask);
    dense(net, &format!("{p}/output"), ctx, d.tq, h, h)
}

/// Post-LN residual: `LayerNorm(x + dropout(y))`.
fn residual_ln(net: &mut Net, p: &str, x: T, y: T, tokens: usize, hidden: usize) -> T {
    let y = dropout(net, &format!("{p}/dropout"), y);
    let s = add(net, p, x, y);
    layer_norm(net, &format!("{p}/LayerNorm"), s, tokens, hidden)
}

/// Token embedding lookup: `[tokens]` ids into a `[vocab, hidden]` table.
fn gather(
    net: &mut Net,
    p: &str,
    ids: T,
    table: T,
    tokens: usize,
    hidden: usize,
    batched: bool,
) -> T {
    let e = (tokens * hidden) as f64;
    net.op(
        "GatherV2",
        format!("{p}/GatherV2"),
        &[ids, table],
        e,
        batched,
        0.0,
        Rule::Gather,
    )
}

/// `x @ W` with a weight that already exists: the tied vocabulary projection (`x @ table^T`) or
/// the one-hot token-type lookup; `fin` inputs and `fout` outputs per row.
fn tied_dense(net: &mut Net, p: &str, x: T, w: T, rows: usize, fin: usize, fout: usize) -> T {
    let flops = 2.0 * (rows * fin * fout) as f64;
    let rule = Rule::Linear {
        dx: "MatMul",
        dw: "MatMul",
        flops,
    };
    net.op(
        "MatMul",
        format!("{p}/MatMul"),
        &[x, w],
        (rows * fout) as f64,
        true,
        flops,
        rule,
    )
}

/// What BERT's encoder output feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BertHead {
    /// `BertForPreTraining`: the pooler, the masked-LM head (transform, LayerNorm, decoder tied
    /// to the word embeddings) and next-sentence prediction. The masked-LM head runs on every
    /// position (`predictions: None`, as Hugging Face's computes scores for all tokens), or on
    /// that many positions per sequence gathered first (NVIDIA's scripts `index_select` the
    /// masked ones: at most 20 of 128 tokens, 80 of 512).
    PreTraining { predictions: Option<usize> },
    /// `BertForQuestionAnswering` (SQuAD): a linear layer from the hidden width to 2 at every
    /// position, its two columns the start and end logits, each a cross-entropy over the
    /// positions. No pooler: Hugging Face's builds none, and NVIDIA's computes one on the first
    /// token that no loss reads (no gradient, one token's work).
    Span,
}

/// BERT / Transformer sizes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertConfig {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub max_pos: usize,
    pub type_vocab: usize,
    pub seq: usize,
    pub head: BertHead,
}

impl BertConfig {
    pub(crate) const LARGE: BertConfig = BertConfig {
        layers: 24,
        hidden: 1024,
        heads: 16,
        ffn: 4096,
        vocab: 30522,
        max_pos: 512,
        type_vocab: 2,
        seq: 128,
        head: BertHead::PreTraining { predictions: None },
    };
    pub(crate) const SMALL: BertConfig = BertConfig {
        layers: 4,
        hidden: 512,
        heads: 8,
        ffn: 2048,
        ..BertConfig::LARGE
    };
}

/// Post-LN feed-forward block with the given activation.
fn ffn(
    net: &mut Net,
    p: &str,
    x: T,
    tokens: usize,
    hidden: usize,
    inner: usize,
    use_gelu: bool,
) -> T {
    let h = dense(net, &format!("{p}/intermediate"), x, tokens, hidden, inner);
    let h = if use_gelu {
        gelu(net, &format!("{p}/gelu"), h)
    } else {
        relu(net, &format!("{p}/intermediate"), h)
    };
    let h = if use_gelu {
        h
    } else {
        dropout(net, &format!("{p}/inner_dropout"), h)
    };
    dense(net, &format!("{p}/output"), h, tokens, inner, hidden)
}

/// HF `BertForPreTraining` (embeddings, encoder, pooler, MLM head with a tied decoder, NSP
/// head), or the encoder under a SQuAD span head ([`BertHead`]).
pub(crate) fn bert(net: &mut Net, c: BertConfig) {
    let (s, h) = (c.seq, c.hidden);
    let ids = net.input("input_ids", s as f64);
    let types = net.input("token_type_ids", s as f64);
    let mask_in = net.input("input_mask", s as f64);
    let p = "bert/embeddings";
    let word = net.param(&format!("{p}/word_embeddings"), c.vocab * h);
    let type_table = net.param(&format!("{p}/token_type_embeddings"), c.type_vocab * h);
    let pos_table = net.param(&format!("{p}/position_embeddings"), c.max_pos * h);
    // As the TF reference embedding_lookup: flatten ids, gather, reshape to [B, S, H]; token
    // types through a one-hot MatMul; positions a slice of the table added by broadcast.
    let flat = reshape(net, &format!("{p}/word/ids"), ids);
    let we = gather(net, &format!("{p}/word"), flat, word, s, h, true);
    let we = reshape(net, &format!("{p}/word"), we);
    let flat = reshape(net, &format!("{p}/token_type/ids"), types);
    let one_hot = net.op(
        "OneHot",
        format!("{p}/token_type/one_hot"),
        &[flat],
        (s * c.type_vocab) as f64,
        true,
        0.0,
        Rule::Leaf,
    );
    let te = tied_dense(
        net,
        &format!("{p}/token_type"),
        one_hot,
        type_table,
        s,
        c.type_vocab,
        h,
    );
    let te = reshape(net, &format!("{p}/token_type"), te);
    let pe = net.op(
        "Slice",
        format!("{p}/position/Slice"),
        &[pos_table],
        (s * h) as f64,
        false,
        0.0,
        unary("Pad", false, false, 0.0),
    );
    let pe = reshape(net, &format!("{p}/position"), pe);
    let e = add(net, &format!("{p}/type"), we, te);
    let e = add(net, &format!("{p}/position"), e, pe);
    let e = layer_norm(net, &format!("{p}/LayerNorm"), e, s, h);
    let x = dropout(net, &format!("{p}/dropout"), e);

    let x = if net.framework().fuses_layers() {
        bert_encoder_fused(net, &c, x, mask_in)
    } else {
        bert_encoder_tf1(net, &c, x, mask_in)
    };

    match c.head {
        BertHead::PreTraining { predictions } => {
            pre_training_heads(net, &c, x, word, predictions);
        }
        BertHead::Span => span_head(net, &c, x),
    }
}

/// The pooler, the masked-LM head on `predictions` positions per sequence (every one when
/// `None`) and the next-sentence head, on the encoder output `x`; `word` is the embedding table
/// the decoder is tied to.
fn pre_training_heads(net: &mut Net, c: &BertConfig, x: T, word: T, predictions: Option<usize>) {
    let (s, h) = (c.seq, c.hidden);
    // Pooler: dense + tanh on the first token.
    let first = net.op(
        "StridedSlice",
        "bert/pooler/strided_slice",
        &[x],
        h as f64,
        true,
        0.0,
        unary("StridedSliceGrad", false, false, 0.0),
    );
    let pooled = dense(net, "bert/pooler/dense", first, 1, h, h);
    let pooled = net.op_like(
        "Tanh",
        "bert/pooler/Tanh",
        &[pooled],
        pooled,
        4.0 * h as f64,
        unary("TanhGrad", false, true, 2.0),
    );

    // Masked-LM head over every position (HF computes prediction scores for all tokens), or
    // over the masked positions gathered first (NVIDIA's `index_select`; its gradient scatters
    // them back into a zeroed encoder-output gradient).
    let p = "cls/predictions";
    let (rows, x) = match predictions {
        None => (s, x),
        Some(k) => {
            let positions = net.input(&format!("{p}/masked_lm_positions"), k as f64);
            let picked = net.op(
                "IndexSelect",
                format!("{p}/masked_positions/IndexSelect"),
                &[x, positions],
                (k * h) as f64,
                true,
                0.0,
                unary("IndexSelectBackward", false, false, 0.0),
            );
            (k, picked)
        }
    };
    let t = dense(net, &format!("{p}/transform/dense"), x, rows, h, h);
    let t = gelu(net, &format!("{p}/transform/gelu"), t);
    let t = layer_norm(net, &format!("{p}/transform/LayerNorm"), t, rows, h);
    let logits = tied_dense(net, &format!("{p}/decoder"), t, word, rows, h, c.vocab);
    let bias = net.param(&format!("{p}/output_bias"), c.vocab);
    let logits = net.op_like(
        "BiasAdd",
        format!("{p}/BiasAdd"),
        &[logits, bias],
        logits,
        (rows * c.vocab) as f64,
        Rule::Bias,
    );
    net.xent_loss("cls/predictions/loss", logits, rows as f64, c.vocab as f64);

    // Next-sentence prediction.
    let nsp = dense(net, "cls/seq_relationship", pooled, 1, h, 2);
    net.xent_loss("cls/seq_relationship/loss", nsp, 1.0, 2.0);
}

/// SQuAD's span head on the encoder output `x`: `qa_outputs`, hidden → 2 at every position;
/// the start and end logits (its two columns) each a softmax cross-entropy over the positions,
/// one loss op of two rows of `seq` classes per sample.
fn span_head(net: &mut Net, c: &BertConfig, x: T) {
    let (s, h) = (c.seq, c.hidden);
    let logits = dense(net, "qa_outputs", x, s, h, 2);
    net.xent_loss("qa_outputs/loss", logits, 2.0, s as f64);
}

/// BERT's encoder as the TF reference builds it: the `[B, S, S]` mask built once and turned
/// into an additive mask again in every layer.
fn bert_encoder_tf1(net: &mut Net, c: &BertConfig, x: T, mask_in: T) -> T {
    let (s, h) = (c.seq, c.hidden);
    let mut x = x;
    // create_attention_mask_from_input_mask: [B, S] -> [B, S, S], built once.
    let ss = (s * s) as f64;
    let m = net.op_like(
        "Cast",
        "bert/encoder/Cast",
        &[mask_in],
        mask_in,
        s as f64,
        Rule::Identity,
    );
    let m = net.op_like(
        "Reshape",
        "bert/encoder/Reshape",
        &[m],
        m,
        0.0,
        Rule::Identity,
    );
    let mask = net.op(
        "Mul",
        "bert/encoder/mul",
        &[m],
        ss,
        true,
        ss,
        Rule::Identity,
    );

    let d = Dims {
        tq: s,
        tk: s,
        hidden: h,
        heads: c.heads,
    };
    for l in 0..c.layers {
        let p = format!("bert/encoder/layer_{l}");
        // Per-layer additive mask, as the reference code recomputes it in every attention layer.
        let a = net.op_like(
            "ExpandDims",
            format!("{p}/attention/ExpandDims"),
            &[mask],
            mask,
            0.0,
            Rule::Identity,
        );
        let a = net.op_like(
            "Cast",
            format!("{p}/attention/Cast"),
            &[a],
            a,
            0.0,
            Rule::Identity,
        );
        let a = net.op_like(
            "Sub",
            format!("{p}/attention/sub"),
            &[a],
            a,
            ss,
            Rule::Identity,
        );
        let adder = net.op_like(
            "Mul",
            format!("{p}/attention/mul"),
            &[a],
            a,
            ss,
            Rule::Identity,
        );
        let att = attention(
            net,
            &format!("{p}/attention/self"),
            x,
            x,
            d,
            Mask::Adder(adder),
        );
        x = residual_ln(net, &format!("{p}/attention/output"), x, att, s, h);
        let f = ffn(net, &p, x, s, h, c.ffn, true);
        x = residual_ln(net, &format!("{p}/output"), x, f, s, h);
    }
    x
}

/// BERT's encoder as PyTorch runs it: the `[B, S]` padding mask is broadcast inside the fused
/// attention kernel, or added to the scores by broadcasting in eager attention.
fn bert_encoder_fused(net: &mut Net, c: &BertConfig, x: T, mask_in: T) -> T {
    let (s, h) = (c.seq, c.hidden);
    let d = Dims {
        tq: s,
        tk: s,
        hidden: h,
        heads: c.heads,
    };
    let mut x = x;
    for l in 0..c.layers {
        let p = format!("bert/encoder/layer_{l}");
        let att = attention(
            net,
            &format!("{p}/attention/self"),
            x,
            x,
            d,
            Mask::Adder(mask_in),
        );
        x = residual_ln(net, &format!("{p}/attention/output"), x, att, s, h);
        let f = ffn(net, &p, x, s, h, c.ffn, true);
        x = residual_ln(net, &format!("{p}/output"), x, f, s, h);
    }
    x
}

/// Transformer-base sizes (torch.nn.Transformer defaults) plus the shared vocabulary.
pub(crate) struct TransformerConfig {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub src_len: usize,
    pub tgt_len: usize,
}

impl TransformerConfig {
    pub(crate) const BASE: TransformerConfig = TransformerConfig {
        layers: 6,
        hidden: 512,
        heads: 8,
        ffn: 2048,
        vocab: 37000,
        src_len: 32,
        tgt_len: 32,
    };
}

/// Embed token ids with the shared table, scale by sqrt(d), add sinusoidal positions, dropout.
fn embed_tokens(net: &mut Net, p: &str, ids: T, table: T, tokens: usize, hidden: usize) -> T {
    let e = gather(net, p, ids, table, tokens, hidden, true);
    let n = (tokens * hidden) as f64;
    let e = net.op_like(
        "Mul",
        format!("{p}/scale"),
        &[e],
        e,
        n,
        unary("Mul", false, false, 1.0),
    );
    let pe = net.constant(&format!("{p}/positional_encoding"), n);
    let e = add(net, &format!("{p}/position"), e, pe);
    dropout(net, &format!("{p}/dropout"), e)
}

/// `torch.nn.Transformer()` (post-LN, ReLU FFN, final encoder/decoder LayerNorms) with one
/// embedding shared by source, target and the output projection.
pub(crate) fn transformer(net: &mut Net, c: &TransformerConfig) {
    let (h, sl, tl) = (c.hidden, c.src_len, c.tgt_len);
    let src_ids = net.input("source_ids", sl as f64);
    let tgt_ids = net.input("target_ids", tl as f64);
    let table = net.param("shared_embedding", c.vocab * h);

    let mut x = embed_tokens(net, "encoder/embedding", src_ids, table, sl, h);
    let enc = Dims {
        tq: sl,
        tk: sl,
        hidden: h,
        heads: c.heads,
    };
    for l in 0..c.layers {
        let p = format!("encoder/layer_{l}");
        let a = attention(net, &format!("{p}/self_attn"), x, x, enc, Mask::None);
        x = residual_ln(net, &format!("{p}/norm1"), x, a, sl, h);
        let f = ffn(net, &p, x, sl, h, c.ffn, false);
        x = residual_ln(net, &format!("{p}/norm2"), x, f, sl, h);
    }
    let memory = layer_norm(net, "encoder/norm", x, sl, h);

    let mut y = embed_tokens(net, "decoder/embedding", tgt_ids, table, tl, h);
    let causal = net.constant("decoder/causal_mask", (tl * tl) as f64);
    let self_d = Dims {
        tq: tl,
        tk: tl,
        hidden: h,
        heads: c.heads,
    };
    let cross_d = Dims { tk: sl, ..self_d };
    for l in 0..c.layers {
        let p = format!("decoder/layer_{l}");
        let a = attention(
            net,
            &format!("{p}/self_attn"),
            y,
            y,
            self_d,
            Mask::Adder(causal),
        );
        y = residual_ln(net, &format!("{p}/norm1"), y, a, tl, h);
        let a = attention(
            net,
            &format!("{p}/cross_attn"),
            y,
            memory,
            cross_d,
            Mask::None,
        );
        y = residual_ln(net, &format!("{p}/norm2"), y, a, tl, h);
        let f = ffn(net, &p, y, tl, h, c.ffn, false);
        y = residual_ln(net, &format!("{p}/norm3"), y, f, tl, h);
    }
    let y = layer_norm(net, "decoder/norm", y, tl, h);
    let logits = tied_dense(net, "output_projection", y, table, tl, h, c.vocab);
    net.xent_loss("loss", logits, tl as f64, c.vocab as f64);
}

/// The causal mask's constants (GPT-2's lower-triangular `b` and its complement) and the shapes
/// of self-attention over `s` tokens of width `h` in `heads` heads.
fn causal_self_attention(net: &mut Net, s: usize, h: usize, heads: usize) -> (Mask, Dims) {
    let b = net.constant("model/causal_b", (s * s) as f64);
    let c = net.constant("model/causal_c", (s * s) as f64);
    let d = Dims {
        tq: s,
        tk: s,
        hidden: h,
        heads,
    };
    (Mask::Gpt { b, c }, d)
}

/// GPT-2: learned positions, pre-LN blocks with a fused QKV projection, final LN, tied LM head.
pub(crate) fn gpt(net: &mut Net, c: &GptConfig) {
    let (s, h) = (c.seq, c.hidden);
    let ids = net.input("input_ids", s as f64);
    let wte = net.param("model/wte", c.vocab * h);
    let wpe = net.param("model/wpe", s * h);
    let pos_ids = net.constant("model/position_ids", s as f64);
    let te = gather(net, "model/wte", ids, wte, s, h, true);
    let pe = gather(net, "model/wpe", pos_ids, wpe, s, h, false);
    let x = add(net, "model/embed", te, pe);
    let mut x = dropout(net, "model/embed_dropout", x);
    let (mask, d) = causal_self_attention(net, s, h, c.heads);
    for l in 0..c.layers {
        let p = format!("model/h{l}");
        let a = layer_norm(net, &format!("{p}/ln_1"), x, s, h);
        let qkv = dense(net, &format!("{p}/attn/c_attn"), a, s, h, 3 * h);
        // tf.split into q, k, v: three slices whose gradients are summed back into qkv.
        let slice = |net: &mut Net, k: usize| {
            let name = format!("{p}/attn/split_{k}");
            net.op(
                "StridedSlice",
                name,
                &[qkv],
                (s * h) as f64,
                true,
                0.0,
                unary("StridedSliceGrad", false, false, 0.0),
            )
        };
        let (q, k, v) = (slice(net, 0), slice(net, 1), slice(net, 2));
        let ctx = attention_core(net, &format!("{p}/attn"), q, k, v, d, mask);
        let a = dense(net, &format!("{p}/attn/c_proj"), ctx, s, h, h);
        let a = dropout(net, &format!("{p}/attn/resid_dropout"), a);
        x = add(net, &format!("{p}/attn"), x, a);
        let m = layer_norm(net, &format!("{p}/ln_2"), x, s, h);
        let m = dense(net, &format!("{p}/mlp/c_fc"), m, s, h, 4 * h);
        let m = gelu(net, &format!("{p}/mlp/gelu"), m);
        let m = dense(net, &format!("{p}/mlp/c_proj"), m, s, 4 * h, h);
        let m = dropout(net, &format!("{p}/mlp/resid_dropout"), m);
        x = add(net, &format!("{p}/mlp"), x, m);
    }
    let x = layer_norm(net, "model/ln_f", x, s, h);
    let logits = tied_dense(net, "model/lm_head", x, wte, s, h, c.vocab);
    net.xent_loss("loss", logits, s as f64, c.vocab as f64);
}

/// Rotary position embedding applied to `x` (`[tokens, width]`): `x·cos + rotate_half(x)·sin`
/// as one kernel; linear in x, so its gradient needs only the tables.
fn rotary(net: &mut Net, p: &str, x: T) -> T {
    let e = net.elems(x);
    let grad = unary("RotaryEmbeddingBackward", false, false, 3.0);
    net.op_like(
        "RotaryEmbedding",
        format!("{p}/rotary"),
        &[x],
        x,
        3.0 * e,
        grad,
    )
}

/// Llama (Touvron et al. 2023; Llama 2 and 3): pre-RMSNorm blocks, rotary positions, grouped-query
/// attention (`kv_heads` key/value heads shared by the query heads), a SwiGLU MLP, no biases, a
/// final RMSNorm and an LM head tied to the embedding or not.
pub(crate) fn llama(net: &mut Net, c: &LlamaConfig) {
    let (s, h) = (c.seq, c.hidden);
    let kv = c.kv_heads * (h / c.heads);
    let ids = net.input("input_ids", s as f64);
    let table = net.param("model/embed_tokens", c.vocab * h);
    let mut x = gather(net, "model/embed_tokens", ids, table, s, h, true);
    let (mask, d) = causal_self_attention(net, s, h, c.heads);
    for l in 0..c.layers {
        let p = format!("model/layers_{l}");
        let a = rms_norm(net, &format!("{p}/input_layernorm"), x, h);
        let q = linear(net, &format!("{p}/self_attn/q_proj"), a, s, h, h);
        let k = linear(net, &format!("{p}/self_attn/k_proj"), a, s, h, kv);
        let v = linear(net, &format!("{p}/self_attn/v_proj"), a, s, h, kv);
        let q = rotary(net, &format!("{p}/self_attn/q"), q);
        let k = rotary(net, &format!("{p}/self_attn/k"), k);
        let ctx = attention_core(net, &format!("{p}/self_attn"), q, k, v, d, mask);
        let a = linear(net, &format!("{p}/self_attn/o_proj"), ctx, s, h, h);
        x = add(net, &format!("{p}/attn"), x, a);
        let m = rms_norm(net, &format!("{p}/post_attention_layernorm"), x, h);
        let gate = linear(net, &format!("{p}/mlp/gate_proj"), m, s, h, c.ffn);
        let up = linear(net, &format!("{p}/mlp/up_proj"), m, s, h, c.ffn);
        let gate = silu(net, &format!("{p}/mlp/act"), gate);
        let m = mul(net, &format!("{p}/mlp/gate_up"), gate, up);
        let m = linear(net, &format!("{p}/mlp/down_proj"), m, s, c.ffn, h);
        x = add(net, &format!("{p}/mlp"), x, m);
    }
    let x = rms_norm(net, "model/norm", x, h);
    let logits = if c.tied {
        tied_dense(net, "lm_head", x, table, s, h, c.vocab)
    } else {
        linear(net, "lm_head", x, s, h, c.vocab)
    };
    net.xent_loss("loss", logits, s as f64, c.vocab as f64);
}
