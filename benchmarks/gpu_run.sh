#!/usr/bin/env bash
# The whole GPU benchmark on a machine with an NVIDIA GPU and no internet, from this checkout alone:
# builds llama-cpp-python with CUDA, generates the 12B-shaped random-weight model, quantizes it to Q4_K_M,
# and runs benchmarks/engine_step.py. Everything happens under $WORK; results land in $WORK/results.
#
#   bash benchmarks/gpu_run.sh start    # start it in the background (setsid) and return
#   bash benchmarks/gpu_run.sh wait N   # wait up to N seconds for it to finish, printing progress
#
# The Holo3.1 family (qwen35): FIXTURE=qwen35_models PRESET=9b (or 4b) BENCH_ARGS="--thinking both", which measures
# the steps with reasoning off and on (its budget) in the same run. CUDA_WHEELS=DIR reuses a CUDA wheel an earlier
# run built there (a second model on the same machine), instead of building it again.
#
# It expects in .dev/ (ignored by git, carried to the machine): lcp-src.tgz (shared/tools/strip-sdist.sh),
# build-cuda-wheel.sh, whl/*.whl (gguf, diskcache, and platformdirs for the closing `app propose`; Python 3.12),
# cpu/llama_cpp_python-*.whl (a CPU build, used to generate and quantize while the CUDA build runs). With
# internet, `pip install gguf diskcache platformdirs`
# and a CUDA build of llama-cpp-python (installers/source/install.sh --cuda) replace all of that.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/deskhand-bench}
LOGS=${LOGS:-$WORK}  # progress and logs (point it at a folder that is collected if the run may be cut short)
PY=${PYTHON:-python3}
cmd=${1:-start}

run_all() {
  cd "$ROOT"
  mkdir -p "$WORK"/{common,cpu,cuda,wheels,model,results}
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/common" .dev/whl/*.whl
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/cpu" .dev/cpu/*.whl
  if [ "${CPU_ONLY:-0}" = 1 ]; then  # a dry run of this script on a machine without a GPU
    cp .dev/cpu/*.whl "$WORK/wheels/"; ( true ) & build=$!
  elif [ -n "${CUDA_WHEELS:-}" ]; then  # built by an earlier run on this machine
    cp "$CUDA_WHEELS"/llama_cpp_python-*.whl "$WORK/wheels/"; ( true ) & build=$!
  else
    ( bash .dev/build-cuda-wheel.sh .dev/lcp-src.tgz "$WORK/wheels" >"$WORK/build.log" 2>&1 ) & build=$!
  fi
  echo "$(date +%T) generating the ${PRESET:-12b}-shaped model (${FIXTURE:-gguf_models})" >>"$LOGS/progress"
  PYTHONPATH="$WORK/cpu:$WORK/common:$ROOT" "$PY" -m "tests.fixtures.${FIXTURE:-gguf_models}" --preset "${PRESET:-12b}" \
    --out "$WORK/model" --quantize Q4_K_M >"$WORK/model.json" 2>"$WORK/model.log"
  text=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["quantized"])' "$WORK/model.json")
  mmproj=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["mmproj"])' "$WORK/model.json")
  f16=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$WORK/model.json")
  rm -f "$f16"
  echo "$(date +%T) model ready: $text + $mmproj; waiting for the CUDA build" >>"$LOGS/progress"
  wait "$build" || { echo "$(date +%T) CUDA build failed" >>"$LOGS/progress"; tail -40 "$WORK/build.log" >>"$LOGS/progress"; return 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/cuda" "$WORK"/wheels/llama_cpp_python-*.whl
  echo "$(date +%T) benchmark starting" >>"$LOGS/progress"
  PYTHONUNBUFFERED=1 PYTHONPATH="$WORK/cuda:$WORK/common:$ROOT" "$PY" -m benchmarks.engine_step \
    --model "$text" --mmproj "$mmproj" --out "$WORK/results" ${BENCH_ARGS:-} >"$LOGS/bench.log" 2>&1 \
    || { echo "$(date +%T) benchmark failed" >>"$LOGS/progress"; tail -30 "$LOGS/bench.log" >>"$LOGS/progress"; }
  # the command line on the same files: one proposal from a real screenshot-sized image, on the GPU
  PYTHONPATH="$WORK/cuda:$WORK/common:$ROOT" "$PY" -c 'from PIL import Image; Image.new("RGB", (1920, 1080), (90, 120, 160)).save("'"$WORK"'/screen.png")'
  PYTHONPATH="$WORK/cuda:$WORK/common:$ROOT" "$PY" -m app propose --model "$text" --mmproj "$mmproj" \
    --screenshot "$WORK/screen.png" --task "Open the settings" --max-tokens 1500 >"$LOGS/propose-gpu.txt" 2>&1 || true
  echo "$(date +%T) done" >>"$LOGS/progress"
}

case "$cmd" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    setsid bash -c "'$0' run >'$WORK/run.log' 2>&1; echo \$? >'$WORK/exit'" </dev/null >/dev/null 2>&1 &
    echo "started; progress in $WORK/progress" ;;
  run) run_all ;;
  wait)
    limit=${2:-540}; t=0
    while [ ! -f "$WORK/exit" ] && [ "$t" -lt "$limit" ]; do sleep 10; t=$((t + 10)); done
    cat "$LOGS/progress" 2>/dev/null || true
    tail -5 "$LOGS/bench.log" 2>/dev/null || true
    if [ -f "$WORK/exit" ]; then echo "finished with status $(cat "$WORK/exit")"; else echo "still running after ${limit}s"; fi ;;
esac
