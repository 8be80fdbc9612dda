#!/usr/bin/env bash
# The held-out and coverage figures that docs/planner.md and docs/laws.md quote, in one go, on a
# CPU (docs/benchmarks.md, "Held-out figures in one command": its run time and what feeds what).
# Run from anywhere:
#     bash bench/heldout.sh OUT_DIR
# Each step runs with OMP_NUM_THREADS=1 (the docs' figures were measured so) and writes its
# console to OUT_DIR/<step>.txt; OUT_DIR/heldout.log gets every command, its console, its wall
# time and `uptime` before and after (the machine's load is part of a timing). The steps, in
# order, are listed by `python -m bench.heldout_steps OUT_DIR` (bench/heldout_steps.py, the one
# place they are declared; docs/benchmarks.md says what each feeds):
#   - bench.scalebench on ScaleBench's splits, the planner table (scalebench/), and its --coverage;
#   - three steps for each held-out sweep of `scalebench_splits.RUN_SPLITS`, in its order: the
#     replay `bench.scalebench --splits ALIAS` (ALIAS/, ALIAS.txt), its --coverage
#     (ALIAS_coverage.txt) and its point query (ALIAS_point_query.csv, .txt; Porian's:
#     bench.porian_compute_query). A sweep not shipped (no licence: its module sets DATA = None)
#     runs only where its module's SOURCE_ENV (ANDREA_L2L_DIR, ANDREA_MARIN_DIR, ...: `python -m
#     bench.heldout_steps` names each unset one) names the user's copy, else one line of the log
#     says its steps were skipped and why;
#   - the candidate rules as they were scored on unseen sweeps (band_drift, law_choice_monotone);
#   - bench.coverage_nd --factors, the tables behind MULTIPLIER_COVERED_UP_TO (coverage_nd_gpu6)
#     and conformal.COVERED_UP_TO (coverage_nd_pi).
# No time limits: a shared CPU's load, not a hang, is what makes a step slow. A failed step is
# logged with its exit status and the rest still run. Exit status: 0 all ran, 1 a step failed
# (2: no OUT_DIR given, or bench.heldout_steps could not list the steps).
# HELDOUT_QUICK=1 runs the same steps at their smallest settings (one split each, one repetition;
# minutes: tests/test_heldout_script.py), to check the script, not to quote.
# HELDOUT_SCORE=ALIAS runs instead the steps that score one newly registered sweep once
# (docs/held_out.md, "Score once"): its point query, band, law choice with each live candidate
# beside the default, and its replay with each candidate first budget beside it.
set -uo pipefail
[ $# -eq 1 ] || { echo "error: usage: bash bench/heldout.sh OUT_DIR" >&2; exit 2; }
mkdir -p "$1" || exit 2
OUT=$(cd "$1" && pwd)  # before the cd below: a relative OUT_DIR is the caller's
cd "$(dirname "$0")/.." || exit 2
LOG="$OUT/heldout.log"
: > "$LOG"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3; fi
QUICK=${HELDOUT_QUICK:-0}

rc=0
failed=()
run() {  # run NAME CMD...: NAME.txt gets its stdout, the log all; keep going after a failure
  local name=$1; shift
  echo "\$ OMP_NUM_THREADS=1 $*" | tee -a "$LOG"
  echo "uptime before: $(uptime)" | tee -a "$LOG"
  local t0 s
  t0=$(date +%s%N)
  { "$@" | tee "$OUT/$name.txt"; } 2>&1 | tee -a "$LOG"  # pipefail: the command's status
  s=${PIPESTATUS[0]}
  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf 'wall time: %d.%d s\n' $((ms / 1000)) $((ms % 1000 / 100)) | tee -a "$LOG"
  echo "uptime after: $(uptime)" | tee -a "$LOG"
  if [ "$s" -ne 0 ]; then
    echo "exit status $s" | tee -a "$LOG"
    rc=1
    failed+=("$name")
  fi
  echo | tee -a "$LOG"
}

{ date -u; echo "python: $PY"; echo "quick: $QUICK"; echo "score: ${HELDOUT_SCORE:-}"; echo; } | tee -a "$LOG"
listing=()
[ "$QUICK" = 1 ] && listing=(--quick)
[ -n "${HELDOUT_SCORE:-}" ] && listing+=(--score "$HELDOUT_SCORE")
if ! steps=$("$PY" -m bench.heldout_steps "$OUT" "${listing[@]}"); then
  echo "error: $PY -m bench.heldout_steps could not list the steps" | tee -a "$LOG" >&2
  exit 2
fi
# fd 3: a step's command must not read the list from stdin
while IFS=$'\t' read -r -u 3 name cmd; do
  if [ "$name" = skipped ]; then
    { echo "$cmd"; echo; } | tee -a "$LOG"
    continue
  fi
  eval "args=($cmd)"  # shlex-quoted by bench.heldout_steps
  run "$name" "$PY" -m "${args[@]}"
done 3<<< "$steps"

if [ $rc -eq 0 ]; then
  echo "heldout: all steps ran" | tee -a "$LOG"
else
  echo "heldout: SOME STEPS FAILED: ${failed[*]}" | tee -a "$LOG"
fi
exit $rc
