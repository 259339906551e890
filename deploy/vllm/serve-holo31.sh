#!/usr/bin/env bash
# Holo3.1 (H Company, Qwen3.5-based) on vLLM for Deskhand agents.
#
# Sources: H Company's self-hosting guide (repo hcompai/holo-desktop-cli, docs/self-hosting.md: `--served-model-name`,
# `--enable-prefix-caching --chat-template-content-format openai --reasoning-parser qwen3 --limit-mm-per-prompt
# '{"image": 5, "video": 0}'`), H's "Local inference" page as quoted second-hand (the same flags), and H's agent
# loop (hub.hcompany.ai/agent-loop.md: structured output through `structured_outputs`, thinking through
# `chat_template_kwargs`, at most 3 screenshots in context). Deskhand needs a Holo3.1 profile for its prompt
# (resources/profiles/); the tool-calling flags of H's guide are not needed for structured output.
#
# Environment: MODEL (Hcompany/Holo-3.1-35B-A3B-FP8, -35B-A3B, -9B, -4B, -0.8B), SERVED_NAME, PORT, MAX_MODEL_LEN,
# MAX_NUM_SEQS, TP, VLLM_API_KEY, HF_TOKEN.
set -euo pipefail

MODEL=${MODEL:-Hcompany/Holo-3.1-35B-A3B-FP8}
args=(
  --served-model-name "${SERVED_NAME:-holo3-1-35b-a3b}"
  --host 0.0.0.0 --port "${PORT:-8000}"
  --max-model-len "${MAX_MODEL_LEN:-65536}"  # H's guide uses 262144 for Holo4 and 65537 for Holo3 [unverified: sizing choice]
  --enable-prefix-caching                    # H's guide
  --chat-template-content-format openai      # H's guide: the Qwen3.5 template reads content lists
  --reasoning-parser qwen3                   # H's guide: thinking goes to `reasoning`, the answer stays JSON
  --limit-mm-per-prompt '{"image": 5, "video": 0}'  # H's guide (Deskhand sends at most 3)
  --max-num-seqs "${MAX_NUM_SEQS:-128}"      # [unverified: tune to the GPU; H's single-user guide uses 1]
  --tensor-parallel-size "${TP:-1}"
)
exec vllm serve "$MODEL" "${args[@]}" "$@"
