#!/usr/bin/env bash
# Holo4 (H Company, 2026-09: Holo4-35B-A3B, Qwen3.6-based; Holo4-27B, Qwen3.8-based, NON-COMMERCIAL licence) on vLLM
# for Deskhand agents.
#
# Sources: H Company's self-hosting guide (repo hcompai/holo-desktop-cli, docs/self-hosting.md): `vllm serve
# Hcompany/Holo4-35B-A3B-FP8 --served-model-name holo4-35b-a3b --max-model-len 262144 --enable-prefix-caching
# --chat-template-content-format openai --enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser
# qwen3 --limit-mm-per-prompt '{"image": 5, "video": 0}'`. Holo4 answers with native tool calls: Deskhand's holo4
# profile sends its tools with `tool_choice: "required"` and reads the calls vLLM's qwen3_coder parser returns; the
# reasoning comes back separately (qwen3 reasoning parser) and is kept in the history (`chat_template_kwargs:
# {"preserve_thinking": true}`, H's agent setting).
#
# Environment: MODEL (Hcompany/Holo4-35B-A3B-FP8, -35B-A3B, Hcompany/Holo4-27B-FP8, -27B), SERVED_NAME (holo4-35b-a3b,
# holo4-27b: the name selects Deskhand's holo4 profile), PORT, MAX_MODEL_LEN, MAX_NUM_SEQS, TP, VLLM_API_KEY, HF_TOKEN.
set -euo pipefail

MODEL=${MODEL:-Hcompany/Holo4-35B-A3B-FP8}
args=(
  --served-model-name "${SERVED_NAME:-holo4-35b-a3b}"
  --host 0.0.0.0 --port "${PORT:-8000}"
  --max-model-len "${MAX_MODEL_LEN:-65536}"  # H's guide: 262144; a Deskhand step needs far less [sizing choice]
  --enable-prefix-caching                    # H's guide
  --chat-template-content-format openai      # H's guide: the Qwen3.5/3.6 template reads content lists
  --enable-auto-tool-choice                  # H's guide: native tool calls
  --tool-call-parser qwen3_coder             # H's guide: the Qwen3-Coder XML calls the template renders
  --reasoning-parser qwen3                   # H's guide: thinking goes to `reasoning`
  --limit-mm-per-prompt '{"image": 5, "video": 0}'  # H's guide; Deskhand's holo4 profile shows at most 5
  --max-num-seqs "${MAX_NUM_SEQS:-128}"      # [unverified: tune to the GPU; H's single-user guide uses 1]
  --tensor-parallel-size "${TP:-1}"
)
exec vllm serve "$MODEL" "${args[@]}" "$@"
