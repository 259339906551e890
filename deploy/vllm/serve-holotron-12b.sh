#!/usr/bin/env bash
# Holotron-12B on vLLM for a fleet of Deskhand agents (`deskhand run --engine http://HOST:8000/v1`).
#
# Sources: H Company's model page shows only `vllm serve "Hcompany/Holotron-12B"`; its blog
# (huggingface.co/blog/Hcompany/holotron-12b) measured 8.9k tokens/s at 100 concurrent workers on one H100 with
# vLLM v0.14.1. The architecture is NVIDIA's Nemotron-Nano-12B-v2-VL (NemotronH_Nano_VL_V2): its flags come from
# NVIDIA's vLLM blog post "Run Multimodal Reasoning Agents with NVIDIA Nemotron on vLLM" and the vLLM recipe
# docs.vllm.ai/projects/recipes/en/stable/NVIDIA/Nemotron-Nano-12B-v2-VL.html. Flags marked [unverified] were
# not found for this model in any of them; check them against your vLLM version (`vllm serve --help`).
#
# Environment: MODEL, SERVED_NAME, PORT, MAX_MODEL_LEN, MAX_NUM_SEQS, TP (GPUs per replica), VLLM_API_KEY
# (vLLM reads it itself: clients must then send it, Deskhand from DESKHAND_API_KEY), HF_TOKEN.
set -euo pipefail

MODEL=${MODEL:-Hcompany/Holotron-12B}
args=(
  --served-model-name "${SERVED_NAME:-Hcompany/Holotron-12B}"
  --host 0.0.0.0 --port "${PORT:-8000}"
  --trust-remote-code                        # custom config and processor (model card; NVIDIA's commands)
  --dtype bfloat16                           # NVIDIA's BF16 command line
  --video-pruning-rate 0                     # NVIDIA's command lines; Deskhand sends no video
  --limit-mm-per-prompt '{"image": 3, "video": 0}'  # Deskhand keeps the last 3 screenshots (profile image_budget)
  --max-model-len "${MAX_MODEL_LEN:-65536}"  # trained on ~131k; a step needs ~16k (3 screenshots of <=3,328 tokens + text) [sizing choice]
  --max-num-seqs "${MAX_NUM_SEQS:-128}"      # concurrent agents per replica; H measured 100 [unverified: tune]
  --tensor-parallel-size "${TP:-1}"
  --mamba-ssm-cache-dtype float32            # "required for accuracy" for the Nemotron-H text models [unverified for VL]
)
# Per request, Deskhand sends mm_processor_kwargs {"max_num_tiles": <tile budget>} (12 by default, as the
# processor's own default) and structured_outputs {"json": <the profile's schema>} (vLLM >= 0.10.2).
exec vllm serve "$MODEL" "${args[@]}" "$@"
