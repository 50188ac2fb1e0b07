"""Model factories for ``export_torch.py --model module:torch_models:FACTORY``.

``transformer_base``: the zoo's ``transformer`` in PyTorch: ``torch.nn.Transformer()`` with its
defaults (d 512, 8 heads, 6 encoder + 6 decoder post-LN layers, FFN 2048, ReLU, dropout 0.1,
final encoder and decoder LayerNorms; 44,140,544 parameters) plus ONE 37,000 x 512 embedding
shared by source tokens, target tokens and the tied output projection (63,084,544 in all).
Embeddings are scaled by sqrt(d) and get sinusoidal positions (a buffer, not a parameter) and
dropout; the decoder self-attention is causal. It takes token ids and returns target logits,
so export it with ``--tokens SRC,TGT``:

    python datasets/export_torch.py --model module:torch_models:transformer_base --tokens 32,32 \\
        --batch 480 --out datasets/torch/transformer_b480_s32.json.gz
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn


def sinusoidal_positions(length: int, d: int) -> torch.Tensor:
    """Vaswani et al. 2017 positional encodings, ``[length, d]``."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(length, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class Seq2SeqTransformer(nn.Module):
    """``nn.Transformer`` with one embedding shared by source, target and the output projection.

    ``forward(src_ids [B, S], tgt_ids [B, T]) -> logits [B, T, vocab]``. ``vocab_size`` is read
    by the exporter's ``--tokens`` batches.
    """

    def __init__(self, vocab_size=37000, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, max_len=512):
        super().__init__()
        self.vocab_size, self.d_model = vocab_size, d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.transformer = nn.Transformer(d_model=d_model, nhead=nhead, num_encoder_layers=num_encoder_layers,
                                          num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward,
                                          dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("positions", sinusoidal_positions(max_len, d_model), persistent=False)

    def embed(self, ids):
        x = self.embedding(ids) * math.sqrt(self.d_model) + self.positions[: ids.shape[1]]
        return self.dropout(x)

    def forward(self, src_ids, tgt_ids):
        t = tgt_ids.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=tgt_ids.device)
        # tgt_is_causal=True: nn.Transformer would otherwise compare the mask with a causal one
        # (torch.equal), a data-dependent branch that fake tensors cannot take.
        y = self.transformer(self.embed(src_ids), self.embed(tgt_ids), tgt_mask=causal, tgt_is_causal=True)
        return y @ self.embedding.weight.t()  # tied output projection


def transformer_base():
    """The zoo's ``transformer``: 63,084,544 parameters."""
    return Seq2SeqTransformer()


def transformer_tiny():
    """A small one for tests: vocab 100, d 16, 2 heads, 1+1 layers, FFN 32."""
    return Seq2SeqTransformer(vocab_size=100, d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                              dim_feedforward=32, max_len=64)


def lstm():
    """A default ``nn.LSTM`` (biases, sequence-first), sized as Zaremba et al.'s medium word-level
    LSTM: 2 layers of 650 units over 650 features. Export with ``--sequence 35,650 --classes 650``."""
    return nn.LSTM(650, 650, num_layers=2)


def gru():
    """A default ``nn.GRU``, same sizes."""
    return nn.GRU(650, 650, num_layers=2)


def lstm_tiny():
    """For tests: 2 layers of 16 units over 8 features."""
    return nn.LSTM(8, 16, num_layers=2)


def gru_tiny():
    return nn.GRU(8, 16, num_layers=2)
