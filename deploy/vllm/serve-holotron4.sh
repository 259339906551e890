#!/usr/bin/env bash
# Holotron4-30B-A3B (H Company, 2026-09; NVIDIA Nemotron 3 Nano Omni architecture, NemotronH_Nano_Omni_Reasoning_V3)
# on vLLM for Deskhand agents.
#
# Sources: H Company publishes BF16 and FP8 checkpoints but no vLLM command line for Holotron4 that could be read
# here; the architecture's flags follow NVIDIA's commands for Nemotron 3 Nano (vLLM `--trust-remote-code
# --enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser-plugin nano_v3_reasoning_parser.py
# --reasoning-parser nano_v3`, as quoted for NVIDIA-Nemotron-3-Nano-30B-A3B) and the Holotron-12B script beside this
# one. The Omni architecture is registered natively from vLLM 0.20.0. Deskhand's holotron4 profile sends its tools
# with `tool_choice: "required"` and reads the calls the qwen3_coder parser returns. Flags marked [unverified] were not
# found for this model.
#
# Environment: MODEL (Hcompany/Holotron4-30B-A3B, -FP8), SERVED_NAME (the name selects Deskhand's holotron4 profile),
# PORT, MAX_MODEL_LEN, MAX_NUM_SEQS, TP, REASONING_PARSER_PLUGIN (NVIDIA's nano_v3_reasoning_parser.py, when thinking
# is used), VLLM_API_KEY, HF_TOKEN.
set -euo pipefail

MODEL=${MODEL:-Hcompany/Holotron4-30B-A3B}
args=(
  --served-model-name "${SERVED_NAME:-Hcompany/Holotron4-30B-A3B}"
  --host 0.0.0.0 --port "${PORT:-8000}"
  --trust-remote-code                        # custom config and processor (as for the Nemotron Nano VL models)
  --enable-auto-tool-choice                  # NVIDIA's Nemotron 3 Nano commands
  --tool-call-parser qwen3_coder             # NVIDIA's Nemotron 3 Nano commands: the template's XML tool calls
  --limit-mm-per-prompt '{"image": 3, "video": 0, "audio": 0}'  # Deskhand sends screenshots only [unverified keys]
  --max-model-len "${MAX_MODEL_LEN:-65536}"  # [sizing choice]
  --max-num-seqs "${MAX_NUM_SEQS:-128}"      # [unverified: tune]
  --tensor-parallel-size "${TP:-1}"
  --mamba-ssm-cache-dtype float32            # as for the Nemotron-H text models [unverified for this model]
)
if [ -n "${REASONING_PARSER_PLUGIN:-}" ]; then  # NVIDIA's parser file (published beside their checkpoints)
  args+=(--reasoning-parser-plugin "$REASONING_PARSER_PLUGIN" --reasoning-parser nano_v3)
fi
exec vllm serve "$MODEL" "${args[@]}" "$@"
