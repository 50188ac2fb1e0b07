#!/usr/bin/env python3
"""Exports a PyTorch model's training iteration as a topoplace graph: the shell face of
``topoplace.torch_export`` (``pip install .`` first; needs torch), with ``datasets/`` on the
import path so ``--model module:torch_models:FACTORY`` finds the factories kept here.

    python datasets/export_torch.py --model torchvision:vgg19 --batch 96 --out vgg19.json.gz
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topoplace.torch_export.__main__ import main  # noqa: E402

if __name__ == "__main__":
    main()
