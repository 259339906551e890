#!/usr/bin/env bash
# Deskhand's llama.cpp patches (installers/llama-patches) on a GPU machine, side by side with the plain build:
# builds llama-cpp-python with CUDA from the plain source, then patches the same tree and rebuilds it in the same
# build folder (only the patched files compile again); meanwhile generates the 12B-shaped (Holotron) and the
# 4B-shaped (Holo3.1) random-weight models with a CPU build. Then, one process each, alternating builds:
# benchmarks/engine_step.py (12B approval + auto, 4B auto), benchmarks/encoder_probe.py (tiles one by one against
# batched, flash attention in clip on and off), benchmarks/matmul_probe.py (products by batch size, MMQ against
# cuBLAS; the logits of a fixed prompt against a reference with FP32 products), and extras at n_ubatch 2048.
# QUICK=1: the issue's figures, the encoders alone, GPU timelines of steps (benchmarks/step_timeline.py through a
# CUPTI collector built there), n_ubatch 2048, a host profile and the host's part of an embedding batch
# (benchmarks/embedding_batch.py). TRACE_ONLY=1: the patched build and the timelines.
# AHEAD=1: the patched build, auto-approved steps with the vision worker and without it, one timeline.
# CURRENT=1: the patched build, the current generation beside Holotron-12B in one run: random weights shaped like
# Holotron4-30B-A3B (nemotron_h_moe + the Omni projector with its audio encoder; VISION_ONLY=1 leaves that out) and
# Holo4-35B-A3B (qwen35moe), their routed experts sparse in the F16 files (tests/fixtures/gguf_models.py says why),
# approval and auto-approved steps at 1920×1080 with each profile's defaults, and one GPU timeline of each.
# SPEED=1: issues 44 and 45, plain and patched alternating: the logits of a long prompt and of generation that
# alternates single tokens with forced batches (benchmarks/logits_check.py: patched with the dequantized weights
# kept and without), 20 auto-approved steps of the 12B-shaped model without tile reuse (and with it, patched) and of
# the 4B-shaped one, a GPU timeline of the patched 12B step, the current generation's shapes (Holotron4-30B-A3B,
# Holo4-35B-A3B) where tests/fixtures has their presets, then the patched build with GGML_CUDA_RESIDENT_WEIGHTS_MB=0
# (0001-0005 without the kept weights) and the plain build's timeline; DEADLINE (epoch seconds) skips those optional
# runs once it has passed.
# MINIMAL=1: the 12B-shaped model alone (its logits, and its steps on both builds).
# SMOKE=1: the patched build alone, for too little device time: tiny-model logits with the kept weights and without,
# then the 12B shape's logits and steps while DEADLINE allows (no plain build: no figure to set beside one).
#
#   bash benchmarks/gpu_patches.sh start          # start it in the background (setsid) and return
#   bash benchmarks/gpu_patches.sh wait N [DIR]   # wait up to N seconds; then copy what is done to DIR ($OUT)
#
# Inputs in $DEV (default .dev/, ignored by git, carried to the machine): lcp-src.tgz (shared/tools/strip-sdist.sh),
# whl/*.whl (gguf, diskcache, platformdirs; Python 3.12), cpu/llama_cpp_python-*.whl (a CPU build, used to
# generate and quantize while the CUDA builds run). Everything happens under $WORK.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEV=${DEV:-$ROOT/.dev}
WORK=${WORK:-/tmp/deskhand-patches}
PY=${PYTHON:-python3}
R=$WORK/results
cmd=${1:-start}
note() { echo "$(date +%T) $*" >>"$WORK/progress"; }

build() {  # plain, then patched, in one build folder (TRACE_ONLY=1: the patched one alone)
  local src=$WORK/src
  mkdir -p "$src" && tar xzf "$DEV/lcp-src.tgz" -C "$src"
  export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90-real -DGGML_NATIVE=off -DLLAMA_BUILD_TESTS=off -DLLAMA_BUILD_EXAMPLES=off"
  export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  if [ "${TRACE_ONLY:-0}" != 1 ] && [ "${AHEAD:-0}" != 1 ] && [ "${CURRENT:-0}" != 1 ] && [ "${SMOKE:-0}" != 1 ]; then
    DESKHAND_LLAMA_PATCHES=off bash "$ROOT/installers/llama-patches/patches.sh" apply "$src/src"
    "$PY" -m pip wheel --no-deps --no-build-isolation -w "$WORK/wplain" --config-settings=build-dir="$WORK/bld" \
      "$src/src" >"$WORK/build-plain.log" 2>&1
    note "plain CUDA build done"
  fi
  bash "$ROOT/installers/llama-patches/patches.sh" apply "$src/src"
  "$PY" -m pip wheel --no-deps --no-build-isolation -w "$WORK/wpatched" --config-settings=build-dir="$WORK/bld" \
    "$src/src" >"$WORK/build-patched.log" 2>&1
  note "patched CUDA build done"
}

model() {  # fixture module, preset, folder[, more generator arguments]: JSON with the quantized text model and the mmproj
  PYTHONPATH="$WORK/cpu:$WORK/common:$ROOT" "$PY" -m "tests.fixtures.$1" --preset "$2" --out "$WORK/$3" \
    --quantize Q4_K_M "${@:4}" >"$WORK/$3.json" 2>"$WORK/$3.log"
  rm -f "$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' "$WORK/$3.json")"
  note "model $2 ready"
}

field() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$WORK/$1.json" "$2"; }

step() {  # build, tag, model folder, engine_step arguments...
  local b=$1 tag=$2 m=$3; shift 3
  PYTHONUNBUFFERED=1 PYTHONPATH="$WORK/$b:$WORK/common:$ROOT" DESKHAND_COMMIT="${DESKHAND_COMMIT:-unknown}" \
    "$PY" -m benchmarks.engine_step --model "$(field "$m" quantized)" --mmproj "$(field "$m" mmproj)" --out "$R" \
    --tag="-$tag" --no-levers --tile-budget 0 --no-op-profile --load-repeats 1 --repeats 1 --steps "${STEPS:-20}" "$@" \
    >"$R/$tag.log" 2>&1 || note "$tag failed"
  note "$tag: step ${STEPS:-20} $(grep -E '^(auto|approval|auto_ahead|auto_no_reuse):' "$R/$tag.log" | awk '{printf "%s %s s ", $1, $NF}')"
}

probe() {  # build, tag, model folder, module, arguments... (environment through env before the call)
  local b=$1 tag=$2 m=$3 mod=$4; shift 4
  PYTHONUNBUFFERED=1 PYTHONPATH="$WORK/$b:$WORK/common:$ROOT" "$PY" -m "benchmarks.$mod" \
    --model "$(field "$m" quantized)" --mmproj "$(field "$m" mmproj)" "$@" >"$R/$tag.log" 2>&1 || note "$tag failed"
  note "$tag done"
}

host_profile() {  # the host's share: a Python profile of auto-approved steps on the patched build
  local m=$1
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -m cProfile -o "$R/host-$m.prof" -m benchmarks.engine_step \
    --model "$(field $m quantized)" --mmproj "$(field $m mmproj)" --out "$R/host" --modes auto --thinking off \
    --no-levers --tile-budget 0 --no-op-profile --load-repeats 1 --repeats 1 --steps 8 >"$R/host-$m.log" 2>&1 || true
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -c 'import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats("tottime").print_stats(40)' \
    "$R/host-$m.prof" >"$R/host-$m.txt" 2>&1 || true
  note "host profile $m done"
}

cupti_lib() {  # benchmarks/cupti_trace.c built against this machine's CUPTI; its path, or nothing
  local d inc="" lib=""
  for d in /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include /usr/local/cuda/targets/x86_64-linux/include; do
    [ -f "$d/cupti.h" ] && { inc=$d; break; }
  done
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    ls "$d"/libcupti.so* >/dev/null 2>&1 && { lib=$d; break; }
  done
  [ -n "$inc" ] && [ -n "$lib" ] || { note "no CUPTI (cupti.h in ${inc:-?}, libcupti in ${lib:-?})"; return 0; }
  [ -f "$WORK/libcupti_trace.so" ] || nvcc -shared -Xcompiler -fPIC -o "$WORK/libcupti_trace.so" \
    "$ROOT/benchmarks/cupti_trace.c" -I"$inc" -L"$lib" -lcupti -Xlinker -rpath="$lib" >"$WORK/cupti-build.log" 2>&1 ||
    { note "the CUPTI collector did not build: $(tail -3 "$WORK/cupti-build.log")"; return 0; }
  echo "$WORK/libcupti_trace.so"
}

timeline() {  # build, tag, model folder, arguments...: a GPU timeline of auto-approved steps (benchmarks/step_timeline.py)
  local b=$1 tag=$2 m=$3; shift 3
  PYTHONUNBUFFERED=1 PYTHONPATH="$WORK/$b:$WORK/common:$ROOT" "$PY" -m benchmarks.step_timeline \
    --model "$(field "$m" quantized)" --mmproj "$(field "$m" mmproj)" --out "$R" --traces "$WORK/traces" \
    --cupti-lib "$(cupti_lib)" --tag="-$tag" "$@" >"$R/timeline-$tag.log" 2>&1 || note "timeline $tag failed"
  note "timeline $tag done"
}

explore() {  # where the time goes next, and the runtime switches worth a patch: short runs on the patched build
  probe patched enc-ops-12b m12 encoder_probe --repeats 2 --ops --json "$R/enc-ops-12b.json"
  probe patched enc-ops-4b m4 encoder_probe --repeats 2 --ops --json "$R/enc-ops-4b.json"
  STEPS=4 step patched 4b-ops m4 --modes auto --thinking off --op-profile
  STEPS=6 step patched 12b-base m12 --modes auto
  GGML_CUDA_GRAPH_OPT=1 STEPS=6 step patched 12b-graphopt m12 --modes auto
  STEPS=6 step patched 4b-base m4 --modes auto --thinking off
  GGML_CUDA_GRAPH_OPT=1 STEPS=6 step patched 4b-graphopt m4 --modes auto --thinking off
  STEPS=6 step plain 12b-plain m12 --modes auto
  STEPS=6 step plain 4b-plain m4 --modes auto --thinking off
}

gen() {  # fixture module, preset, folder[, generator arguments]: the F16 pair (no llama.cpp needed), its JSON
  PYTHONPATH="$WORK/common:$ROOT" "$PY" -m "tests.fixtures.$1" --preset "$2" --out "$WORK/$3" "${@:4}" \
    >"$WORK/$3.json" 2>"$WORK/$3.log" || { note "model $2 failed: $(tail -2 "$WORK/$3.log")"; return 1; }
}

quant() {  # folder, threads: the text model to Q4_K_M with the plain build's llama.cpp; the F16 file removed
  PYTHONPATH="$WORK/plain:$WORK/common:$ROOT" "$PY" - "$WORK/$1.json" "$2" >>"$WORK/$1.log" 2>&1 <<'PYQ' ||
import json, sys, time
import llama_cpp  # noqa: F401  (before numpy)
from pathlib import Path
from tests.fixtures.gguf_models import quantize
path = Path(sys.argv[1]); report = json.loads(path.read_text()); text = Path(report["text"])
t0 = time.perf_counter()
report["quantized"] = str(quantize(text, text.with_name(text.name.replace("-F16", "") .replace(".gguf", "-Q4_K_M.gguf")),
                                   "Q4_K_M", nthread=int(sys.argv[2])))
report["quantize_s"] = round(time.perf_counter() - t0, 1)
text.unlink()
path.write_text(json.dumps(report, indent=2))
PYQ
    { note "quantizing $1 failed: $(tail -2 "$WORK/$1.log")"; return 1; }
  note "model $1 ready ($(field "$1" quantize_s) s to quantize)"
}

smoke_all() {  # SMOKE=1: the patched build alone, where too little device time is left for both builds: does it build,
  # and do 0005 and 0006 run and compute the same logits with the kept weights and without (tiny model, then the
  # 12B shape while DEADLINE allows, with its steps with and without the kept weights)
  mkdir -p "$WORK"/{common,patched} "$R"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$R/gpu.txt" 2>&1 || true
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/common" "$DEV"/whl/*.whl
  if [ "${CPU_ONLY:-0}" = 1 ]; then  # a dry run without a GPU: the CPU wheel
    mkdir -p "$WORK/wpatched"; cp "$DEV"/cpu/*.whl "$WORK/wpatched/"; ( true ) & local builder=$!
  else
    ( build ) & local builder=$!
  fi
  gen gguf_models tiny mt
  gen gguf_models "${PRESET12:-12b}" m12
  wait "$builder" || { note "CUDA build failed"; tail -40 "$WORK"/build-*.log >>"$WORK/progress"; return 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/patched" "$WORK"/wpatched/*.whl
  rm -rf "$WORK/plain" && ln -s "$WORK/patched" "$WORK/plain"  # quant() quantizes with the build in plain/
  cp "$WORK/patched/llama_cpp/deskhand_llama_patches.txt" "$R/patch-set.txt" || true
  quant mt 4
  probe patched logits-tiny mt logits_check --out "$R" --label tiny --resident off,on
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -m benchmarks.logits_check --compare "$R/logits-tiny.npz" \
    >"$R/logits-tiny-compared.md" 2>&1 || true
  note "tiny: $(tail -2 "$R/logits-tiny-compared.md" | tr '\n' ' ')"
  in_time "12B" || { note "done"; return 0; }
  quant m12 "$(nproc)"
  in_time "12B logits" && probe patched logits-patched m12 logits_check --out "$R" --label patched --resident off,on
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -m benchmarks.logits_check --compare "$R/logits-patched.npz" \
    >"$R/logits-compared.md" 2>&1 || true
  rm -f "$R"/*.npz
  in_time "12B steps" && step patched 12b-patched m12 --modes auto_no_reuse,auto
  in_time "12B steps without kept weights" &&
    GGML_CUDA_RESIDENT_WEIGHTS_MB=0 step patched 12b-patched-noresident m12 --modes auto_no_reuse
  note "done"
}

in_time() {  # whether an optional run still fits before DEADLINE (seconds since the epoch; unset: always)
  [ -z "${DEADLINE:-}" ] || [ "$(date +%s)" -lt "$DEADLINE" ] || { note "skipped (past the deadline): $*"; return 1; }
}

speed_all() {  # SPEED=1 (see the header); DEADLINE: the runs after the 12B and 4B ones only until then
  mkdir -p "$WORK"/{common,plain,patched} "$R"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$R/gpu.txt" 2>&1 || true
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/common" "$DEV"/whl/*.whl
  if [ "${CPU_ONLY:-0}" = 1 ]; then  # a dry run without a GPU: the CPU wheel as both builds
    mkdir -p "$WORK"/{wplain,wpatched}; cp "$DEV"/cpu/*.whl "$WORK/wplain/"; cp "$DEV"/cpu/*.whl "$WORK/wpatched/"
    note "plain CUDA build done"; ( true ) & local builder=$!
  else
    ( build ) & local builder=$!
  fi
  gen gguf_models "${PRESET12:-12b}" m12
  [ "${MINIMAL:-0}" = 1 ] || gen qwen35_models "${PRESET4:-4b}" m4
  local t=0
  until grep -q "plain CUDA build done" "$WORK/progress" 2>/dev/null; do
    sleep 2; t=$((t + 2))
    kill -0 "$builder" 2>/dev/null || grep -q "plain CUDA build done" "$WORK/progress" ||
      { note "CUDA build failed"; tail -40 "$WORK"/build-*.log >>"$WORK/progress"; return 1; }
  done
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/plain" "$WORK"/wplain/*.whl
  quant m12 "$(nproc)"
  [ "${MINIMAL:-0}" = 1 ] || quant m4 "$(nproc)"
  wait "$builder" || { note "CUDA build failed"; tail -40 "$WORK"/build-*.log >>"$WORK/progress"; return 1; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/patched" "$WORK"/wpatched/*.whl
  cp "$WORK/patched/llama_cpp/deskhand_llama_patches.txt" "$R/patch-set.txt" || true
  note "benchmarks starting ($(head -1 "$R/patch-set.txt" 2>/dev/null))"
  local bigger="" h4=${PRESETH4:-holotron4-30b-a3b} q4=${PRESETQ4:-holo4-35b-a3b}
  if [ "${MINIMAL:-0}" = 1 ]; then
    note "MINIMAL=1: the 12B-shaped model alone"
  elif PYTHONPATH="$ROOT" "$PY" -c 'import sys; from tests.fixtures import gguf_models as g, qwen35_models as q; sys.exit(not (sys.argv[1] in g.PRESETS and sys.argv[2] in q.PRESETS))' "$h4" "$q4" 2>/dev/null; then
    # meanwhile, on a few cores: the current generation's shapes (their quantization would slow the host's share
    # of the steps measured now; with 4 of the cores it leaves the rest to them)
    ( gen gguf_models "$h4" mh4 && quant mh4 4; gen qwen35_models "$q4" mq4 && quant mq4 4 ) & bigger=$!
  else
    note "no current-generation presets in tests/fixtures: those shapes are not measured"
  fi
  probe plain logits-plain m12 logits_check --out "$R" --label plain --resident off
  probe patched logits-patched m12 logits_check --out "$R" --label patched --resident off,on
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -m benchmarks.logits_check --compare "$R/logits-plain.npz" \
    "$R/logits-patched.npz" >"$R/logits-compared.md" 2>&1 || true
  rm -f "$R"/*.npz
  step plain 12b-plain m12 --modes auto_no_reuse
  step patched 12b-patched m12 --modes "auto_no_reuse$([ "${MINIMAL:-0}" = 1 ] || echo ,auto)"
  if [ "${MINIMAL:-0}" != 1 ]; then
    step plain 4b-plain m4 --modes auto --thinking off
    step patched 4b-patched m4 --modes auto --thinking off
  fi
  in_time "timeline patched" && timeline patched 12b-patched m12
  if [ -n "$bigger" ]; then
    in_time "the current generation's shapes" && { wait "$bigger" || true; }
    for m in mh4 mq4; do
      in_time "$m" || continue
      [ -n "$(field "$m" quantized 2>/dev/null)" ] || { note "$m was not made: $(tail -2 "$WORK/$m.log")"; continue; }
      step plain "$m-plain" "$m" --modes auto
      step patched "$m-patched" "$m" --modes auto
    done
  fi
  in_time "12b-patched-noresident" && GGML_CUDA_RESIDENT_WEIGHTS_MB=0 step patched 12b-patched-noresident m12 --modes auto_no_reuse
  in_time "timeline plain" && timeline plain 12b-plain m12
  note "done"
}

run_all() {
  cd "$ROOT"
  mkdir -p "$WORK"/{common,cpu,plain,patched} "$R"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$R/gpu.txt" 2>&1 || true
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/common" "$DEV"/whl/*.whl
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/cpu" "$DEV"/cpu/*.whl
  if [ "${CPU_ONLY:-0}" = 1 ]; then  # a dry run of this script on a machine without a GPU: the CPU wheel twice
    mkdir -p "$WORK"/{wplain,wpatched}; cp "$DEV"/cpu/*.whl "$WORK/wplain/"; cp "$DEV"/cpu/*.whl "$WORK/wpatched/"
    ( true ) & local builder=$!
  else
    ( build ) & local builder=$!
  fi
  model gguf_models "${PRESET12:-12b}" m12
  if [ "${CURRENT:-0}" = 1 ]; then
    model gguf_models "${PRESETH4:-holotron4-30b-a3b}" mh4 $([ "${VISION_ONLY:-0}" = 1 ] && echo --vision-only)
    model qwen35_models "${PRESETQ4:-holo4-35b-a3b}" mq4
  else
    model qwen35_models "${PRESET4:-4b}" m4
  fi
  wait "$builder" || { note "CUDA build failed"; tail -40 "$WORK"/build-*.log >>"$WORK/progress"; return 1; }
  [ "${TRACE_ONLY:-0}" = 1 ] || [ "${AHEAD:-0}" = 1 ] || [ "${CURRENT:-0}" = 1 ] ||
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/plain" "$WORK"/wplain/*.whl
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/patched" "$WORK"/wpatched/*.whl
  cp "$WORK/patched/llama_cpp/deskhand_llama_patches.txt" "$R/patch-set.txt" || true
  note "benchmarks starting ($(head -1 "$R/patch-set.txt" 2>/dev/null))"
  if [ "${AHEAD:-0}" = 1 ]; then  # the vision work in the decoding thread against the worker, patched build
    step patched 12b-ahead m12 --modes auto,auto_ahead
    step patched 4b-ahead m4 --modes auto,auto_ahead --thinking off
    probe patched batch-12b-patched m12 embedding_batch --label patched --json "$R/embedding-batch.jsonl"
    timeline patched 12b m12
    note "done"
    return 0
  fi
  if [ "${CURRENT:-0}" = 1 ]; then  # the current generation beside Holotron-12B, patched build, profile defaults
    step patched 12b-current m12 --modes approval,auto
    step patched holotron4-30b-a3b mh4 --modes approval,auto
    step patched holo4-35b-a3b mq4 --modes approval,auto --profile "${PROFILEQ4:-auto}"
    timeline patched holotron4-30b-a3b mh4
    timeline patched holo4-35b-a3b mq4
    note "done"
    return 0
  fi
  if [ "${TRACE_ONLY:-0}" = 1 ]; then  # GPU timelines of steps on the patched build, and nothing else
    timeline patched 12b m12
    timeline patched 12b-ub2048 m12 --ubatch 2048
    timeline patched 4b m4 --thinking off
    note "done"
    return 0
  fi
  # the issue's figures, alternating builds
  step plain 12b-plain m12 --modes approval,auto --logits-out "$R/logits-12b-plain.npy"
  step patched 12b-patched m12 --modes approval,auto --logits-out "$R/logits-12b-patched.npy"
  step plain 4b-plain m4 --modes auto --thinking off
  step patched 4b-patched m4 --modes auto --thinking off
  if [ "${EXPLORE:-0}" = 1 ]; then explore; note "done"; return 0; fi
  if [ "${QUICK:-0}" = 1 ]; then  # the issue's figures, the encoders alone, GPU timelines, larger micro-batches
    probe plain enc-12b-plain m12 encoder_probe --json "$R/enc-12b-plain.json"
    probe patched enc-12b-patched m12 encoder_probe --json "$R/enc-12b-patched.json"
    probe plain enc-4b-plain m4 encoder_probe --json "$R/enc-4b-plain.json"
    probe patched enc-4b-patched m4 encoder_probe --json "$R/enc-4b-patched.json"
    timeline patched 12b m12
    timeline patched 4b m4 --thinking off
    step patched 12b-patched-ub2048 m12 --modes auto --ubatch 2048
    host_profile m4
    probe plain batch-12b-plain m12 embedding_batch --label plain --json "$R/embedding-batch.jsonl"
    probe patched batch-12b-patched m12 embedding_batch --label patched --json "$R/embedding-batch.jsonl"
    note "done"
    return 0
  fi
  # what each patch does on its own
  probe plain enc-12b-plain m12 encoder_probe --json "$R/enc-12b-plain.json"
  probe patched enc-12b-patched m12 encoder_probe --json "$R/enc-12b-patched.json"
  probe plain enc-4b-plain m4 encoder_probe --json "$R/enc-4b-plain.json"
  probe patched enc-4b-patched m4 encoder_probe --json "$R/enc-4b-patched.json"
  GGML_CUDA_MMQ_MAX_BATCH=0 probe patched mm-12b-mmq m12 matmul_probe --sweep --json "$R/mm-12b-mmq.json"
  GGML_CUDA_MMQ_MAX_BATCH=8 probe patched mm-12b-cublas m12 matmul_probe --sweep --json "$R/mm-12b-cublas.json"
  GGML_CUDA_MMQ_MAX_BATCH=8 GGML_CUDA_CUBLAS_COMPUTE_TYPE=f32 probe patched mm-12b-ref m12 matmul_probe \
    --logits-out "$R/logits-12b-f32ref.npy"
  GGML_CUDA_CUBLAS_COMPUTE_TYPE=f16 probe patched mm-12b-f16 m12 matmul_probe --logits-out "$R/logits-12b-f16.npy"
  probe plain mm-12b-plain-again m12 matmul_probe --logits-out "$R/logits-12b-plain-again.npy"
  PYTHONPATH="$WORK/patched:$WORK/common:$ROOT" "$PY" -m benchmarks.matmul_probe --compare "$R"/logits-12b-*.npy \
    >"$R/logits-compared.txt" 2>&1 || true
  note "probes done"
  # larger micro-batches: fewer dequantizations per prompt on the cuBLAS path
  step patched 12b-patched-ub2048 m12 --modes auto --ubatch 2048
  step plain 12b-plain-ub2048 m12 --modes auto --ubatch 2048
  step patched 4b-patched-ub2048 m4 --modes auto --thinking off --ubatch 2048
  host_profile m12
  host_profile m4
  note "done"
}

collect() {  # what is there so far, into DIR (at most 8 files come back from a device call)
  local dir=${1:-}
  [ -n "$dir" ] || return 0
  mkdir -p "$dir"
  cp "$WORK/progress" "$dir/" 2>/dev/null || true
  tar czf "$dir/results.tgz" -C "$WORK" --exclude='*.npy' --exclude='*.npz' results progress build-plain.log build-patched.log \
    m12.log m4.log mh4.log mq4.log mh4.json mq4.json 2>/dev/null || true
  tar czf "$dir/logits.tgz" -C "$R" $(cd "$R" 2>/dev/null && ls *.npy 2>/dev/null) 2>/dev/null || true
}

case "$cmd" in
  start)
    rm -rf "$WORK"; mkdir -p "$WORK"
    setsid bash -c "'$0' run >'$WORK/run.log' 2>&1; echo \$? >'$WORK/exit'" </dev/null >/dev/null 2>&1 &
    echo "started; progress in $WORK/progress" ;;
  run) if [ "${SMOKE:-0}" = 1 ]; then cd "$ROOT" && smoke_all
       elif [ "${SPEED:-0}" = 1 ]; then cd "$ROOT" && speed_all; else run_all; fi ;;
  wait)
    limit=${2:-540}; t=0
    while [ ! -f "$WORK/exit" ] && [ "$t" -lt "$limit" ]; do sleep 5; t=$((t + 5)); done
    cat "$WORK/progress" 2>/dev/null || true
    tail -3 "$WORK/run.log" 2>/dev/null || true
    collect "${3:-}"
    if [ -f "$WORK/exit" ]; then echo "finished with status $(cat "$WORK/exit")"; else echo "still running after ${limit}s"; fi ;;
esac
