"""``python -m topoplace.torch_export``: export a named or factory-made model from the shell."""

from __future__ import annotations

import argparse
import sys

from . import capture
from .workloads import build_workload


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="python -m topoplace.torch_export", description=capture.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="torchvision:NAME | transformers:MODEL_TYPE or preset (t5-small, llama-small, "
                    "bert-large-uncased, gpt2, ...) | module:pkg.mod:factory")
    ap.add_argument("--batch", type=positive, required=True)
    ap.add_argument("--seq", type=positive, default=128, help="sequence length for transformers models")
    ap.add_argument("--image", default="3,224,224", help="C,H,W of the input for module: models returning a bare nn.Module")
    ap.add_argument("--tokens", help="SRC,TGT (or N): token-id inputs of these lengths for module: models "
                    "returning a bare nn.Module (it must have vocab_size; loss = CE over the last input's tokens)")
    ap.add_argument("--sequence", help="T,F: float sequences of T steps and F features for module: models returning "
                    "a bare nn.Module (an RNN; batch-first unless the module has batch_first = False)")
    ap.add_argument("--classes", type=positive, default=1000, help="classes for module: image and sequence models")
    ap.add_argument("--attention", choices=["eager", "sdpa"], default="eager",
                    help="transformers: models' attention: eager (softmax(QKᵀ)V as separate ops, the "
                    "default) or sdpa (F.scaled_dot_product_attention: one fused op with its shape)")
    ap.add_argument("--config", help="key=value,... overrides of a transformers: config (e.g. num_hidden_layers=4)")
    ap.add_argument("--out", required=True, help="output JSON path (.json.gz to compress)")
    ap.add_argument("--name", help="graph name (default: the model name)")
    ap.add_argument("--profile", action="store_true", help="measure per-op CPU times (profiled_us.cpu)")
    ap.add_argument("--profile-runs", type=positive, default=5)
    ap.add_argument("--no-op-info", dest="op_info", action="store_false", help="omit per-op shapes/dtypes metadata")
    return ap.parse_args(argv)


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv=None):
    """Exports, writes ``--out``, prints a one-line summary; returns the graph document."""
    args = parse(argv)
    try:
        w = build_workload(args)
    except ValueError as e:
        sys.exit(f"error: {e}")
    doc = capture.export(
        w, args.batch, args.name or args.model.split(":")[-1], args.model,
        seq=args.seq if args.model.startswith("transformers:") else None,
        tokens=[int(v) for v in args.tokens.split(",")] if args.tokens else None,
        profile_runs=args.profile_runs if args.profile else 0, op_info=args.op_info)
    capture.write(doc, args.out)
    print(capture.summary(doc))
    capture.warn(doc)
    return doc


if __name__ == "__main__":
    main()
