#!/usr/bin/env bash
# One headless Deskhand agent in its container: a private Xvfb + window manager, the task's application, then
# `deskhand run` against the model server. Trajectories, run records and logs go to $DESKHAND_OUT/<task id>/.
#
# Which task: $DESKHAND_TASK; or a line of $DESKHAND_TASKS_FILE (one task per line): line $JOB_COMPLETION_INDEX+1
# in a Kubernetes Indexed Job, otherwise every line this agent claims first (compose replicas share the file and
# the volume; a claim is an atomic mkdir, so no task runs twice).
#
# Exit status: 0 when every task ran to a recorded end (answered, step limit, needs a person, failed); the status
# of `deskhand run` when it was interrupted (5: the model server went away, so the Job retries) or stopped (143).
#
# With $DESKHAND_EVAL_SUITE (screenspot-v2, screenspot-pro, webclick, osworld-g) it measures the model server
# instead, with no desktop: the test Settings → Model → "Test on this computer" runs (`deskhand eval grounding
# --limit 50 --seed 0`; $DESKHAND_EVAL_LIMIT, $DESKHAND_EVAL_SEED, $DESKHAND_EVAL_DATA for a mounted copy), results
# in $DESKHAND_OUT/evals/<suite>-<time>/; its exit status is the container's.
set -euo pipefail

: "${DESKHAND_ENGINE_URL:?set DESKHAND_ENGINE_URL, e.g. http://vllm:8000/v1}"
OUT=${DESKHAND_OUT:-/trajectories}
SCREEN=${DESKHAND_SCREEN:-1920x1080x24}
DISPLAY_NUMBER=${DESKHAND_DISPLAY_NUMBER:-99}

run_args() {  # $1: task text, $2: output folder
  args=(run --engine "$DESKHAND_ENGINE_URL" --task "$1" --display ":$DISPLAY_NUMBER" --out "$2" --json
        --auto-approve "${DESKHAND_AUTO_APPROVE:-all}" --max-steps "${DESKHAND_MAX_STEPS:-40}")
  if [ -n "${DESKHAND_SERVED_MODEL:-}" ]; then args+=(--served-model "$DESKHAND_SERVED_MODEL"); fi
  if [ -n "${DESKHAND_PROFILE:-}" ]; then args+=(--profile "$DESKHAND_PROFILE"); fi
  if [ -n "${DESKHAND_MAX_TILES:-}" ]; then args+=(--max-tiles "$DESKHAND_MAX_TILES"); fi
  # the model server on a private container network: plain HTTP there is the operator's explicit choice
  if [ "${DESKHAND_ALLOW_HTTP:-0}" = 1 ]; then args+=(--allow-http); fi
}

eval_args() {  # $1: output folder; the sample the app's model test runs, against the model server
  args=(eval grounding --suite "$DESKHAND_EVAL_SUITE" --limit "${DESKHAND_EVAL_LIMIT:-50}"
        --seed "${DESKHAND_EVAL_SEED:-0}" --engine "$DESKHAND_ENGINE_URL" --out "$1" --json)
  if [ -n "${DESKHAND_EVAL_DATA:-}" ]; then args+=(--data "$DESKHAND_EVAL_DATA"); fi
  if [ -n "${DESKHAND_SERVED_MODEL:-}" ]; then args+=(--served-model "$DESKHAND_SERVED_MODEL"); fi
  if [ -n "${DESKHAND_PROFILE:-}" ]; then args+=(--profile "$DESKHAND_PROFILE"); fi
  if [ -n "${DESKHAND_MAX_TILES:-}" ]; then args+=(--tile-budget "$DESKHAND_MAX_TILES"); fi
  if [ "${DESKHAND_ALLOW_HTTP:-0}" = 1 ]; then args+=(--allow-http); fi
}

if [ "${DESKHAND_DRY_RUN:-0}" = 1 ]; then  # print the command a task would run (CI checks it parses)
  if [ -n "${DESKHAND_EVAL_SUITE:-}" ]; then
    eval_args "$OUT/evals/example"
  else
    run_args "${DESKHAND_TASK:-example task}" "$OUT/example"
  fi
  printf '%q ' deskhand "${args[@]}"
  echo
  exit 0
fi

child=""
pids=()
stopping=0
on_term() {
  stopping=1
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; fi
}
trap on_term TERM INT

start_desktop() {
  Xvfb ":$DISPLAY_NUMBER" -screen 0 "$SCREEN" -nolisten tcp -noreset >"$1/xvfb.log" 2>&1 &
  pids=($!)
  for _ in $(seq 100); do
    if xdpyinfo -display ":$DISPLAY_NUMBER" >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  DISPLAY=":$DISPLAY_NUMBER" jwm -f "${DESKHAND_JWMRC:-/etc/deskhand/jwmrc}" >"$1/wm.log" 2>&1 &
  pids+=($!)
  if [ -n "${DESKHAND_START_APP:-}" ]; then  # the task's application, e.g. "mousepad"
    DISPLAY=":$DISPLAY_NUMBER" bash -c "$DESKHAND_START_APP" >"$1/app.log" 2>&1 &
    pids+=($!)
    sleep "${DESKHAND_APP_SETTLE_S:-3}"
  fi
}

stop_desktop() {
  local pid
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    pid=${pids[$i]}
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}

run_task() {  # $1: task id, $2: task text; sets $status
  local dir="$OUT/$1"
  mkdir -p "$dir"
  printf '%s\n' "$2" >"$dir/task.txt"
  start_desktop "$dir"
  run_args "$2" "$dir"
  DESKHAND_HOME="$dir/home" deskhand "${args[@]}" >"$dir/result.json" 2>"$dir/deskhand.log" &
  child=$!
  set +e
  wait "$child"
  status=$?
  if [ "$stopping" = 1 ]; then wait "$child"; status=$?; fi  # the trap interrupted the first wait
  set -e
  child=""
  stop_desktop
  echo "$status" >"$dir/exit-status"
  echo "deskhand-agent: task $1 ended with status $status ($(head -c 300 "$dir/result.json"))"
}

finish() {  # interrupted or stopped runs fail the container (the Job retries them); other ends are results
  case "$1" in 5|130|143) exit "$1" ;; *) exit 0 ;; esac
}

if [ -n "${DESKHAND_EVAL_SUITE:-}" ]; then  # measure the model server: no desktop, no task
  mkdir -p "$OUT/evals"
  eval_args "$OUT/evals/$DESKHAND_EVAL_SUITE-$(date +%Y%m%d-%H%M%S)"
  deskhand "${args[@]}" &
  child=$!
  set +e
  wait "$child"
  status=$?
  if [ "$stopping" = 1 ]; then wait "$child"; status=$?; fi
  set -e
  exit "$status"
fi
if [ -n "${DESKHAND_TASK:-}" ]; then
  run_task "${DESKHAND_TASK_ID:-task-$(hostname)}" "$DESKHAND_TASK"
  finish "$status"
fi
: "${DESKHAND_TASKS_FILE:?set DESKHAND_TASK or DESKHAND_TASKS_FILE (one task per line)}"
mapfile -t tasks < <(grep -v '^[[:space:]]*\(#\|$\)' "$DESKHAND_TASKS_FILE")
if [ -n "${JOB_COMPLETION_INDEX:-}" ]; then
  n=$JOB_COMPLETION_INDEX
  [ "$n" -lt "${#tasks[@]}" ] || { echo "deskhand-agent: no task line for index $n" >&2; exit 0; }
  run_task "$(printf 'task-%05d' "$n")" "${tasks[$n]}"
  finish "$status"
fi
mkdir -p "$OUT/claims"
for n in "${!tasks[@]}"; do
  id=$(printf 'task-%05d' "$n")
  mkdir "$OUT/claims/$id" 2>/dev/null || continue  # another agent has it
  run_task "$id" "${tasks[$n]}"
  case "$status" in 5|130|143) rmdir "$OUT/claims/$id"; finish "$status" ;; esac  # give the task back
done
exit 0
