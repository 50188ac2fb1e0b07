#!/bin/sh
# Regenerates every committed torch export (see datasets/README.md). Run from the repository root
# with a Python that has torch, torchvision, transformers and this package (`pip install .`).
set -e
PY=${PYTHON:-python3}
X="$PY datasets/export_torch.py"
$X --model torchvision:vgg19        --batch 96  --out datasets/torch/vgg19_b96.json.gz
$X --model torchvision:resnet101    --batch 96  --out datasets/torch/resnet101_b96.json.gz
$X --model torchvision:inception_v3 --batch 96  --out datasets/torch/inception_v3_b96.json.gz
$X --model torchvision:alexnet      --batch 128 --out datasets/torch/alexnet_b128.json.gz
$X --model torchvision:vgg16        --batch 96  --out datasets/torch/vgg16_b96.json.gz
$X --model transformers:bert-large-uncased --batch 16 --seq 128 --name bert-large --out datasets/torch/bert_large_b16_s128.json.gz
$X --model transformers:bert-small  --batch 96  --seq 128 --out datasets/torch/bert_small_b96_s128.json.gz
$X --model module:torch_models:transformer_base --tokens 32,32 --batch 480 --name transformer --out datasets/torch/transformer_b480_s32.json.gz
$X --model transformers:gpt2        --batch 8   --seq 1024 --out datasets/torch/gpt2_b8_s1024.json.gz
$X --model torchvision:efficientnet_b0 --batch 96 --out datasets/torch/efficientnet_b0_b96.json.gz
$X --model transformers:llama --config hidden_size=512,num_hidden_layers=4,num_attention_heads=8,num_key_value_heads=8,intermediate_size=1376,vocab_size=32000 \
   --batch 8 --seq 512 --name llama-small --out datasets/torch/llama_small_b8_s512.json.gz
$X --model torchvision:vit_b_16 --batch 32 --out datasets/torch/vit_b_16_b32.json.gz
# transformers' Llama with SDPA attention (fused op per layer and pass; grouped-query attention)
$X --model transformers:llama --config hidden_size=512,num_hidden_layers=4,num_attention_heads=8,num_key_value_heads=4,intermediate_size=1376,vocab_size=32000 \
   --batch 4 --seq 512 --attention sdpa --name llama-small-sdpa --out datasets/torch/llama_small_sdpa_b4_s512.json.gz
