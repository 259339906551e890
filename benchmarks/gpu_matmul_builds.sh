#!/usr/bin/env bash
# llama.cpp's quantized matrix products on the GPU machine, its default MMQ kernels against dequantize + cuBLAS
# (-DGGML_CUDA_FORCE_CUBLAS=ON, with f16 and with bf16 compute), on the same 12B-shaped model: auto-approve steps,
# the op profile and the logits of a fixed prompt per build, one process each, back to back (MMQ first and last).
# Needs what benchmarks/gpu_run.sh needs in .dev/; both CUDA builds run at once (about 9 minutes on 16 cores).
#
#   setsid bash benchmarks/gpu_matmul_builds.sh >/tmp/matmul.log 2>&1 &   # results in $WORK/results
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd); cd "$ROOT"
W=${WORK:-/tmp/deskhand-matmul}; PY=${PYTHON:-python3}
mkdir -p "$W"/{common,cpu,mmq,cublas,wmmq,wcublas,model,results}
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/common" .dev/whl/*.whl
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/cpu" .dev/cpu/*.whl
build() {
  local src; src=$(mktemp -d); tar xzf .dev/lcp-src.tgz -C "$src"
  CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=off -DLLAMA_BUILD_TESTS=off \
-DLLAMA_BUILD_EXAMPLES=off $2" CMAKE_BUILD_PARALLEL_LEVEL=$(( $(nproc) / 2 )) \
    "$PY" -m pip wheel --no-deps --no-build-isolation -w "$W/w$1" "$src/src" >"$W/build-$1.log" 2>&1
}
build mmq "" & b1=$!
build cublas "-DGGML_CUDA_FORCE_CUBLAS=ON" & b2=$!
echo "$(date +%T) generating the model" >>"$W/progress"
PYTHONPATH="$W/cpu:$W/common:$ROOT" "$PY" -m tests.fixtures.gguf_models --preset 12b --out "$W/model" \
  --quantize Q4_K_M >"$W/model.json" 2>"$W/model.log"
field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$W/model.json" "$1"; }
text=$(field quantized); mmproj=$(field mmproj); rm -f "$(field text)"
wait $b1; echo "$(date +%T) MMQ build: $?" >>"$W/progress"
wait $b2; echo "$(date +%T) cuBLAS build: $?" >>"$W/progress"
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/mmq" "$W"/wmmq/*.whl
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$W/cublas" "$W"/wcublas/*.whl
run() {  # name, build, environment...
  env PYTHONUNBUFFERED=1 PYTHONPATH="$W/$2:$W/common:$ROOT" "${@:3}" "$PY" -m benchmarks.engine_step \
    --model "$text" --mmproj "$mmproj" --out "$W/results" --tag="-12b-$1" --logits-out "$W/results/logits-$1.npy" \
    --modes auto --no-levers --tile-budget 0 --load-repeats 1 --repeats 1 >"$W/bench-$1.log" 2>&1
  echo "$(date +%T) $1: $?" >>"$W/progress"
}
run mmq mmq
run cublas-bf16 cublas GGML_CUDA_CUBLAS_COMPUTE_TYPE=bf16
run cublas-f16 cublas
run mmq-again mmq
"$PY" -c '
import itertools, sys
import numpy as np
runs = {n: np.load(f"{sys.argv[1]}/logits-{n}.npy") for n in ("mmq", "cublas-bf16", "cublas-f16", "mmq-again")}
for a, b in itertools.combinations(runs, 2):
    x, y = runs[a], runs[b]
    top = len(set(np.argsort(-x)[:10]) & set(np.argsort(-y)[:10]))
    print(f"{a} vs {b}: cosine {x @ y / np.linalg.norm(x) / np.linalg.norm(y):.6f}, largest difference "
          f"{np.abs(x - y).max() / np.abs(x).max():.4f} of the largest logit, top 10 shared {top}")
' "$W/results" >"$W/results/logits-compared.txt"
echo "$(date +%T) done" >>"$W/progress"
