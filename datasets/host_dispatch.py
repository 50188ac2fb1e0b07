"""Host (CPU) time of one eager PyTorch training step, by phase.

The model has the zoo's transformer layer structure (four linear projections, scaled-dot-product
attention, dropout, residual adds, two LayerNorms, a GELU MLP; embeddings and a vocabulary head)
but tensors one element wide per head, so the kernels cost next to nothing and what is timed is
what PyTorch's host side costs per op: Python module calls, the dispatcher, autocast's casts,
autograd's recording and engine. It runs on the CPU (no GPU needed); src/cost/host_dispatch.rs
divides the medians by the zoo graph's forward and backward op counts (`topoplace info`).

    python3 datasets/host_dispatch.py --layers 24 --heads 16            # BERT-large's shape
    python3 datasets/host_dispatch.py --layers 48 --heads 25 --causal   # GPT-2 XL's
    python3 datasets/host_dispatch.py --layers 24 --heads 16 --fp32     # without autocast
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, width, heads, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.drop = nn.Dropout(0.1)

    def split(self, t):
        b, n, w = t.shape
        return t.view(b, n, self.heads, w // self.heads).transpose(1, 2)

    def forward(self, x, mask):
        b, n, w = x.shape
        a = F.scaled_dot_product_attention(
            self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x)),
            attn_mask=None if self.causal else mask, dropout_p=0.1, is_causal=self.causal)
        x = self.norm1(x + self.drop(self.o(a.transpose(1, 2).reshape(b, n, w))))
        return self.norm2(x + self.drop(self.down(F.gelu(self.up(x)))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--fp32", action="store_true", help="no autocast")
    p.add_argument("--steps", type=int, default=15)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    width, vocab, tokens = a.heads, 64, 4
    embed, position = nn.Embedding(vocab, width), nn.Embedding(tokens, width)
    body = nn.ModuleList(Layer(width, a.heads, a.causal) for _ in range(a.layers))
    head = nn.Linear(width, vocab)
    model = nn.ModuleList([embed, position, body, head])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.zeros(1, tokens, dtype=torch.long)
    mask = torch.ones(1, 1, tokens, tokens, dtype=torch.bool)
    positions = torch.arange(tokens)

    def loss():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not a.fp32):
            x = embed(ids) + position(positions)
            for layer in body:
                x = layer(x, mask)
            return F.cross_entropy(head(x).float().view(-1, vocab), ids.view(-1))

    times = {"forward": [], "backward": [], "optimizer": []}
    for step in range(a.steps + 2):
        t0 = time.perf_counter()
        value = loss()
        t1 = time.perf_counter()
        value.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if step >= 2:  # the first steps allocate the optimizer state
            for phase, ms in zip(times, ((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)):
                times[phase].append(ms)
    mode = "fp32" if a.fp32 else "autocast bf16"
    print(f"{a.layers} layers, {a.heads} heads, {mode}, torch {torch.__version__}")
    for phase, ms in times.items():
        print(f"  {phase:9s} median {statistics.median(ms):7.2f} ms  min {min(ms):7.2f} ms")


if __name__ == "__main__":
    main()
