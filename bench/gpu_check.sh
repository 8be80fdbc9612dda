#!/usr/bin/env bash
# The CUDA checks of andrea, in one go (< 9.5 minutes on one H100/H200-class GPU).
# Run from the repository root on a machine with a CUDA GPU:
#     bash bench/gpu_check.sh [OUT_DIR]
# Not needed by the tests. What it runs:
#   1. bench.sdpa_check: the model's attention runs on the flash kernel (bf16 autocast).
#   2. bench.throughput, andrea-120m, batch 16 x 1024, bf16 autocast, eager: train + inference
#      tokens/s, ratios to the baseline with spread, MFU, torch.cuda.max_memory_allocated, for
#      baseline, Full and Block S = 2, 4, 8.
#   3. the same with torch.compile for baseline and Block S = 4 (compilation -- a training and an
#      inference graph per variant -- dominates the time, so fewer variants; Full AttnRes is
#      measured eager only).
#   4. a small real scaling sweep (sweeps/gpu_small: five small sizes x baseline, Full, Block S=4)
#      and the analysis on it; the fit table lands in OUT_DIR/gpu_small_fit_table.md.
# Each step has its own time limit so one hang cannot eat the budget; results are appended as
# JSON lines to OUT_DIR/gpu_check.jsonl and the console output goes to OUT_DIR/gpu_check.log.
set -uo pipefail
OUT=${1:-bench_out}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
JSON="$OUT/gpu_check.jsonl"
: > "$JSON"
rc=0
run() {  # run LIMIT_S CMD...: keep going after a failure, remember it
  local limit=$1; shift
  echo "\$ $*" | tee -a "$LOG"
  timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
  local s=${PIPESTATUS[0]}
  [ "$s" -eq 0 ] || { echo "exit status $s" | tee -a "$LOG"; rc=1; }
}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } \
  2>&1 | tee "$LOG"

run 45 python -m bench.sdpa_check --size andrea-120m --batch 8 --seq 1024
COMMON=(--device cuda --size andrea-120m --batch 16 --seq 1024 --dtype bf16 --json "$JSON")
run 100 python -m bench.throughput "${COMMON[@]}" --compile off --trials 3 --steps 5 --warmup 2
run 200 python -m bench.throughput "${COMMON[@]}" --compile on --trials 3 --steps 5 --warmup 2 \
  --variants baseline,attnres_block:4
run 190 python sweep.py -m sweeps=gpu_small out_dir="$OUT/runs" train.progress=false
run 20 python -m analysis.fit "$OUT/runs/gpu_small" --out "$OUT/gpu_small_analysis"
cp "$OUT/gpu_small_analysis/fit_table.md" "$OUT/gpu_small_fit_table.md" 2>/dev/null
echo "gpu_check: $([ $rc -eq 0 ] && echo all steps passed || echo SOME STEPS FAILED)" | tee -a "$LOG"
exit $rc
