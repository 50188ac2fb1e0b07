"""What the exporter traces: a model, how to make a batch, and a scalar loss.

``topoplace.from_torch`` takes a module and an example batch (``example_workload``); the
command line's ``--model`` picks one of:

- ``torchvision:NAME``: any ``torchvision.models`` builder (images 224², or 299² for inception_v3
  with its auxiliary head weighted 0.4), cross-entropy over 1,000 classes;
- ``transformers:NAME``: any ``transformers`` config class by its ``model_type`` (``t5``,
  ``llama``, ``bert``, ``gpt2``, ``mistral``, ``bart``, ...) or a named size from ``PRESETS``
  (``t5-small``, ``llama-small``, ``bert-large-uncased``, ``gpt2-medium``, ...), with
  ``--config key=value,...`` overrides. Nothing is downloaded: weights are random and the
  tokenizer is not needed. Encoder-decoders train as sequence-to-sequence LMs, decoder-only
  models as causal LMs (with a prepared 4-D causal mask), BERT with its pre-training heads and
  other encoders as masked LMs;
- ``module:pkg.mod:factory``: your own model (see ``module_workload``).

Attention is the eager implementation (one explicit softmax(QKᵀ)V) unless ``--attention sdpa``
asks for ``F.scaled_dot_product_attention``, which exports as one fused op with its shape. Masks
are passed pre-built in 4-D additive form (none to an SDPA causal LM, which then runs with
``is_causal``): a 2-D padding mask makes transformers inspect its values (``mask.all()``), a
data-dependent branch that fake tensors cannot take.
"""

from __future__ import annotations

import importlib
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

# Named sizes: the checkpoints people mean by these names (config defaults are often another).
PRESETS = {
    "bert-large-uncased": ("bert", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                        intermediate_size=4096)),
    "bert-base-uncased": ("bert", dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                       intermediate_size=3072)),
    "bert-small": ("bert", dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048)),
    "bert-tiny": ("bert", dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)),
    "gpt2": ("gpt2", dict(n_embd=768, n_layer=12, n_head=12)),
    "gpt2-medium": ("gpt2", dict(n_embd=1024, n_layer=24, n_head=16)),
    "gpt2-tiny": ("gpt2", dict(n_embd=64, n_layer=2, n_head=2)),
    "t5-small": ("t5", dict(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_decoder_layers=6, num_heads=8,
                            vocab_size=32128)),
    "t5-base": ("t5", dict(d_model=768, d_ff=3072, d_kv=64, num_layers=12, num_decoder_layers=12, num_heads=12,
                           vocab_size=32128)),
    "t5-tiny": ("t5", dict(d_model=32, d_ff=64, d_kv=8, num_layers=1, num_decoder_layers=1, num_heads=4,
                           vocab_size=128)),
    "llama-small": ("llama", dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                                  intermediate_size=1376, vocab_size=32000)),
    "llama-tiny": ("llama", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                 intermediate_size=128, vocab_size=256)),
}

# Config defaults that name a size too large to trace by accident get no special treatment: a
# bare ``transformers:llama`` is Llama-2-7B's shape, as ``LlamaConfig()`` is.
BERT_VOCAB, GPT2_VOCAB = 30522, 50257


class Workload:
    """A model plus how to make a batch and a scalar loss from its output; ``batch`` is the
    example's size where the workload was made from an example batch."""

    def __init__(self, model, make_batch, loss, batch=None):
        self.model, self.make_batch, self.loss, self.batch = model, make_batch, loss, batch


def cross_entropy(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# --------------------------------------------------------------------------- images

def image_workload(model, batch_hw, classes, aux_weight=None, channels=3):
    def make_batch(b):
        return (torch.randn(b, channels, *batch_hw),), (torch.randint(0, classes, (b,)),)

    def loss(out, y):
        if aux_weight is not None and isinstance(out, tuple):  # inception (logits, aux_logits)
            return F.cross_entropy(out[0], y) + aux_weight * F.cross_entropy(out[1], y)
        return F.cross_entropy(out, y)

    return Workload(model, make_batch, loss)


def torchvision_workload(name):
    import torchvision
    if name == "inception_v3":
        model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=False)
        return image_workload(model, (299, 299), 1000, aux_weight=0.4)
    model = torchvision.models.get_model(name, weights=None)
    return image_workload(model, (224, 224), 1000)


# --------------------------------------------------------------------------- transformers

def parse_overrides(text):
    """``key=value,...``: values are JSON where they parse (numbers, true, null), else strings."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config: expected key=value, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def transformers_config(name, overrides=None, attention="eager"):
    """A config by preset name or ``model_type``, with overrides; ``attention`` is transformers'
    ``attn_implementation`` (``eager`` or ``sdpa``)."""
    from transformers import AutoConfig
    model_type, sizes = PRESETS.get(name, (name, {}))
    if model_type == "bert":
        sizes = dict(vocab_size=BERT_VOCAB, max_position_embeddings=512, type_vocab_size=2, **sizes)
    if model_type == "gpt2":
        sizes = dict(vocab_size=GPT2_VOCAB, n_positions=1024, **sizes)
    try:
        cfg = AutoConfig.for_model(model_type, **{**sizes, **(overrides or {})})
    except ValueError as e:
        raise ValueError(f"transformers:{name}: {e} (named sizes: {', '.join(PRESETS)})") from e
    cfg._attn_implementation = attention
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    return cfg


def bert_config(name):
    return transformers_config(name)


def gpt2_config(name):
    return transformers_config(name)


def additive_mask(rows, cols, causal, dtype=torch.float32):
    """``[1, 1, rows, cols]`` additive mask: 0 where visible, the dtype's minimum where not."""
    if not causal:
        return torch.zeros(1, 1, rows, cols, dtype=dtype)
    return torch.full((rows, cols), torch.finfo(dtype).min, dtype=dtype).triu(1)[None, None]


def transformers_workload(name, seq, overrides=None, attention="eager"):
    cfg = transformers_config(name, overrides, attention)
    if cfg.model_type == "bert":
        return bert_pretraining_workload(cfg, seq)
    if getattr(cfg, "is_encoder_decoder", False):
        return seq2seq_workload(cfg, seq)
    from transformers import AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if cfg.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return causal_lm_workload(AutoModelForCausalLM.from_config(cfg), cfg.vocab_size, seq,
                                  prepared_mask=attention == "eager")
    return masked_lm_workload(cfg, seq)


def bert_pretraining_workload(cfg, seq):
    """BERT with its pre-training heads: masked-LM plus next-sentence losses."""
    from transformers import BertForPreTraining
    model = BertForPreTraining(cfg)

    def make_batch(b):
        ids = torch.randint(0, cfg.vocab_size, (b, seq))
        types = torch.zeros(b, seq, dtype=torch.long)
        mask = torch.zeros(b, 1, 1, seq)
        mlm = torch.randint(0, cfg.vocab_size, (b, seq))
        nsp = torch.randint(0, 2, (b,))
        return (ids, mask, types), (mlm, nsp)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.bert = inner

        def forward(self, ids, mask, types):
            out = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.prediction_logits, out.seq_relationship_logits

    def loss(out, mlm, nsp):
        logits, nsp_logits = out
        return cross_entropy(logits, mlm) + F.cross_entropy(nsp_logits, nsp)

    return Workload(Wrapped(model), make_batch, loss)


def causal_lm_workload(model, vocab, seq, prepared_mask=True):
    """Decoder-only LM: cross-entropy over every position against random next-token labels (the
    label shift of HF's own loss is left out: same shapes, same cost). Without ``prepared_mask``
    no mask is passed, so SDPA attention runs with ``is_causal`` and no mask tensor."""

    def make_batch(b):
        return (torch.randint(0, vocab, (b, seq)),), (torch.randint(0, vocab, (b, seq)),)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.lm = inner

        def forward(self, ids):
            s = ids.shape[1]
            if prepared_mask:
                return self.lm(input_ids=ids, attention_mask=additive_mask(s, s, causal=True),
                               use_cache=False).logits
            # Without a mask transformers looks for sequences packed into one row by reading the
            # position ids' values, a data-dependent branch fake tensors cannot take; each row
            # here is one sequence, which is the answer it would reach.
            from unittest import mock
            with mock.patch("transformers.masking_utils.find_packed_sequence_indices", lambda _: None):
                return self.lm(input_ids=ids, use_cache=False).logits

    return Workload(Wrapped(model), make_batch, cross_entropy)


def seq2seq_workload(cfg, seq):
    """Encoder-decoder LM (T5, BART, ...): ``seq`` source and ``seq`` target tokens, loss over
    the decoder's logits; the decoder's causal mask is built by the model."""
    from transformers import AutoModelForSeq2SeqLM
    model = AutoModelForSeq2SeqLM.from_config(cfg)

    def make_batch(b):
        src = torch.randint(0, cfg.vocab_size, (b, seq))
        tgt = torch.randint(0, cfg.vocab_size, (b, seq))
        return (src, tgt), (torch.randint(0, cfg.vocab_size, (b, seq)),)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.lm = inner

        def forward(self, src, tgt):
            return self.lm(input_ids=src, decoder_input_ids=tgt, use_cache=False).logits

    return Workload(Wrapped(model), make_batch, cross_entropy)


def masked_lm_workload(cfg, seq):
    """Any other encoder: masked-LM head, every position labelled."""
    from transformers import AutoModelForMaskedLM
    model = AutoModelForMaskedLM.from_config(cfg)

    def make_batch(b):
        ids = torch.randint(0, cfg.vocab_size, (b, seq))
        return (ids, additive_mask(seq, seq, causal=False).expand(b, 1, seq, seq)), \
            (torch.randint(0, cfg.vocab_size, (b, seq)),)

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.lm = inner

        def forward(self, ids, mask):
            return self.lm(input_ids=ids, attention_mask=mask).logits

    return Workload(Wrapped(model), make_batch, cross_entropy)


# --------------------------------------------------------------------------- your own module

def token_workload(model, tokens):
    """``--tokens SRC,TGT`` (or ``--tokens N``): ``model(*ids)`` takes one [B, n] token-id tensor
    per length and returns logits [B, last length, vocab]; loss = cross-entropy of those logits
    against random target ids. Ids are drawn below ``model.vocab_size``."""
    lengths = [int(v) for v in tokens.split(",")]
    vocab = getattr(model, "vocab_size", None)
    if not isinstance(vocab, int):
        raise ValueError("--tokens needs the module to have an integer attribute vocab_size")

    def make_batch(b):
        ids = tuple(torch.randint(0, vocab, (b, n)) for n in lengths)
        return ids, (torch.randint(0, vocab, (b, lengths[-1])),)

    return Workload(model, make_batch, cross_entropy)


def sequence_workload(model, shape, classes):
    """``--sequence T,F``: ``model(x)`` takes a float sequence of T steps of F features, batch
    first unless the module says ``batch_first = False`` (a bare ``nn.LSTM``/``nn.GRU``), and
    returns logits (or an RNN's ``(output, state)``); the last step's first ``--classes`` values
    are the class logits of a cross-entropy against random classes, so ``--classes`` must not
    exceed the output width."""
    steps, features = (int(v) for v in shape.split(","))
    batch_first = getattr(model, "batch_first", True)

    def make_batch(b):
        x = torch.randn(b, steps, features) if batch_first else torch.randn(steps, b, features)
        return (x,), (torch.randint(0, classes, (b,)),)

    def loss(out, y):
        if isinstance(out, tuple):  # nn.LSTM / nn.GRU return (output, state)
            out = out[0]
        if out.dim() == 3:
            out = out[:, -1] if batch_first else out[-1]
        return F.cross_entropy(out[:, :classes], y)

    return Workload(model, make_batch, loss)


def example_workload(model, inputs, targets=(), loss=None):
    """A module with one example batch: ``inputs`` (and ``targets``) are tensors whose first
    dimension is the batch. A batch of another size repeats the example's rows cyclically, so
    token ids stay valid indices. ``loss(output, *targets)`` defaults to cross-entropy against
    integer targets, mean squared error against float ones, and the mean of the squared output
    without targets (a stand-in that keeps the whole backward pass)."""
    inputs, targets = _tensor_tuple(inputs, "inputs"), _tensor_tuple(targets, "targets")
    if not inputs:
        raise ValueError("inputs: give at least one example tensor (its first dimension is the batch)")
    sizes = {t.shape[0] for t in inputs + targets if t.dim() > 0}
    if any(t.dim() == 0 for t in inputs + targets) or len(sizes) != 1:
        raise ValueError("inputs/targets: every tensor needs the same batch size as its first dimension, "
                         f"got shapes {[tuple(t.shape) for t in inputs + targets]}")

    example = next(iter(sizes))

    def make_batch(b):
        rows = torch.arange(b) % example
        return (tuple(t.index_select(0, rows) for t in inputs),
                tuple(t.index_select(0, rows) for t in targets))

    return Workload(model, make_batch, loss or _default_loss(targets), batch=example)


def _tensor_tuple(value, what):
    if value is None:
        return ()
    if isinstance(value, torch.Tensor):
        return (value,)
    value = tuple(value)
    if not all(isinstance(t, torch.Tensor) for t in value):
        raise TypeError(f"{what}: expected a tensor or a sequence of tensors, got "
                        f"{[type(t).__name__ for t in value]}")
    return value


def _default_loss(targets):
    def output_tensor(out):
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"loss: the module returns {type(out).__name__}, not a tensor: pass loss=f(output, *targets)")
        return out

    if not targets:
        return lambda out: output_tensor(out).float().square().mean()
    if targets[0].is_floating_point():
        return lambda out, *ys: F.mse_loss(output_tensor(out), ys[0])
    return lambda out, *ys: cross_entropy(output_tensor(out), ys[0])


def module_workload(spec):
    """``module:pkg.mod:factory``: factory() returns an nn.Module taking images (``--image``),
    token ids (``--tokens``) or float sequences (``--sequence``), or a dict ``{"model",
    "make_batch": f(b) -> (inputs, targets), "loss": f(out, *targets)}``."""
    mod_name, _, fn = spec.partition(":")
    made = getattr(importlib.import_module(mod_name), fn)()
    if isinstance(made, nn.Module):
        return None, made
    return Workload(made["model"], made["make_batch"], made["loss"]), None


def build_workload(args):
    kind, _, name = args.model.partition(":")
    if kind == "torchvision":
        return torchvision_workload(name)
    if kind == "transformers":
        return transformers_workload(name, args.seq, parse_overrides(args.config),
                                     getattr(args, "attention", "eager"))
    if kind == "module":
        w, model = module_workload(name)
        if w is not None:
            return w
        if args.tokens:
            return token_workload(model, args.tokens)
        if args.sequence:
            return sequence_workload(model, args.sequence, args.classes)
        c, h, wd = (int(v) for v in args.image.split(","))
        return image_workload(model, (h, wd), args.classes, channels=c)
    raise ValueError(f"--model must be torchvision:NAME, transformers:CONFIG or module:path.to:factory, not {args.model!r}")
