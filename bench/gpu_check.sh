#!/usr/bin/env bash
# The CUDA checks of andrea, in one go (< 9.5 minutes on one H100/H200-class GPU).
# Run from the repository root on a machine with a CUDA GPU:
#     bash bench/gpu_check.sh [OUT_DIR]
# On a machine without a package index, first `bash bench/gpu_wheels.sh` here and carry `.whl`
# along: the script installs those wheels into a private folder before anything else.
# Not needed by the tests. What it runs, most important first:
#   0. preflight: every module the steps import, and the GPU (fails in seconds, not minutes).
#   1. bench.sdpa_check: the model's attention runs on the flash kernel (bf16 autocast).
#   2. bench.throughput, andrea-120m, batch 32 x 1024, bf16 autocast, torch.compile on
#      (fullgraph; a graph break is reported, then compiled with breaks), for baseline and Block
#      S = 4 within a compile budget: train + inference tokens/s as ratios to the baseline with
#      their spread, MFU, peak memory, PASS/FAIL against the CUDA targets. TORCH_LOGS shows graph
#      breaks and recompiles. Full AttnRes is left out: its compilation alone does not fit the
#      step's budget (docs/benchmarks.md).
#   3. the same eager, with Full, Block S = 2 and 8 and the mHC rivals as well.
#   4. the same eager for Block S = 4 with the depth op compiled alone (backend=compile) and
#      with each fused depth-op kernel whose package imports and runs at d 768
#      (`attnres_block:4:backend=NAME`, model.depth_backend), beside the baseline and eager.
#   5. bench.depth_backends: every depth-op backend (eager, compile, fla, liger, flash_attn_res)
#      timed, forward + backward ms and peak MiB, at andrea-120m's shape (d 768, 32768 tokens,
#      5 and 25 sources, bf16), each shape by every backend before the next shape, then each
#      one's parity with andrea's reference on CUDA.
#   6. a small real scaling sweep (sweeps/gpu_small: four tiny sizes x 2 seeds x baseline, Full, Block S=4)
#      with sweep.throughput=true (its variants timed interleaved -> throughput.json), and the
#      analysis on it, whose device-seconds multiplier then comes from that file; in
#      GPU_CHECK_WORK (default /tmp/andrea-gpu-check).
# Each step has its own time limit so one hang cannot eat the budget. OUT_DIR gets seven files:
# gpu_check.log (the console), gpu_check.jsonl (benchmark results, a line per run), and the
# sweep's gpu_small_fit_table.md, gpu_small_fits.json, gpu_small_scaling.png,
# gpu_small_multiplier.png, gpu_small_throughput.json.
# GPU_CHECK_STEPS=sdpa,compiled,eager,fused,backends,sweep (the default: all) runs only those.
#
# Exit status: 0 all passed, 3 all ran but a target was missed, 1 a step failed or timed out.
# GPU_CHECK_SMOKE=1 runs the same steps at toy sizes on the CPU (~1 minute on 2 idle cores), to
# check the script and its environment before spending GPU time on it (tests/test_bench.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu_check.log"
JSON="$OUT/gpu_check.jsonl"
: > "$JSON"
: > "$LOG"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-$(command -v python3 || command -v python)}
SMOKE=${GPU_CHECK_SMOKE:-0}
STEPS=",${GPU_CHECK_STEPS:-sdpa,compiled,eager,fused,backends,sweep},"
want() { [[ "$STEPS" == *",$1,"* ]]; }
WORK=${GPU_CHECK_WORK:-/tmp/andrea-gpu-check}

if compgen -G ".whl/*.whl" > /dev/null; then
  SITE=$(mktemp -d /tmp/andrea-site.XXXXXX)
  trap 'rm -rf "$SITE"' EXIT
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl \
    || { echo "gpu_check: installing .whl/ failed" | tee -a "$LOG"; exit 1; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

rc=0
missed=0
run() {  # run LIMIT_S CMD...: keep going after a failure, remember it (LIMIT_S 0: no limit)
  local limit=$1; shift
  echo "\$ $*" | tee -a "$LOG"
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
  local s=${PIPESTATUS[0]}
  case "$s" in
    0) ;;
    3) echo "(ran, but missed a target)" | tee -a "$LOG"; missed=1 ;;  # bench.throughput
    124|137) echo "exit status $s (time limit ${limit}s)" | tee -a "$LOG"; rc=1 ;;
    *) echo "exit status $s" | tee -a "$LOG"; rc=1 ;;
  esac
}

{ date -u
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  else echo "nvidia-smi: not found"; fi
  echo "python: $PY"; } | tee -a "$LOG"
PRE_LIMIT=20; [ "$SMOKE" = 1 ] && PRE_LIMIT=0  # no limits on a shared CPU (see LIMITS below)
timeout -k 5 "$PRE_LIMIT" "$PY" - "$SMOKE" <<'EOF' 2>&1 | tee -a "$LOG"
import importlib, sys
missing = []
for name in ("torch", "numpy", "scipy", "matplotlib", "tokenizers", "yaml", "omegaconf", "hydra",
             "submitit", "hydra_plugins.hydra_submitit_launcher", "andrea.train",
             "hydra_plugins.andrea_plugins.sweeper", "analysis.fit", "bench.throughput",
             "bench.depth_backends"):
    try:
        importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 -- report every missing piece at once
        missing.append(f"{name} ({type(e).__name__}: {e})")
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if missing:
    sys.exit("preflight: cannot import " + "; ".join(missing)
             + "\n(bash bench/gpu_wheels.sh here, and carry .whl with the call)")
if sys.argv[1] != "1" and not torch.cuda.is_available():
    sys.exit("preflight: no CUDA device (GPU_CHECK_SMOKE=1 runs the toy version on the CPU)")
from andrea.data.corpora import stdlib_documents, stdlib_root  # the sweep's built-in corpus
n_files = sum(1 for _ in stdlib_documents())
print(f"stdlib corpus: {stdlib_root()} ({n_files} .py files)")
if n_files < 100:
    sys.exit("preflight: the built-in corpus (this Python's standard library sources) is missing")
print("preflight: ok")
EOF
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_check: preflight failed, nothing run" | tee -a "$LOG"; exit 1; }

if [ "$SMOKE" = 1 ]; then
  BENCH=(--device cpu --size tiny --batch 2 --seq 128 --dtype fp32 --json "$JSON" --no-check)
  COMPILED=(--compile off --quick)  # inductor on 2 CPU cores takes minutes
  EAGER=(--compile off --quick)
  # the tests' small corpus (shared with them through ANDREA_DATA) and a tenth of the budget
  SWEEP=(size=tiny-1,tiny-2,tiny-3 train.seed=0 data.max_chars=400000 train.tokens_per_param=0.2 max_epochs=1e9)
  BACKENDS=(--device cpu --smoke)
  # No step limits on the CPU (0 = none): they guard GPU minutes, and on a shared CPU they only
  # measured the load (a 300 s limit failed with the cores shared; with 8 processes on
  # 2 cores the sweep step alone ran over 13 minutes). The caller's own limit stops a hang.
  LIMITS=(0 0 0 0 0 0 0)
else
  BENCH=(--device cuda --size andrea-120m --batch 32 --seq 1024 --dtype bf16 --json "$JSON")
  # compilation dominates; the budget skips a variant that would not fit rather than lose all
  COMPILED=(--compile on --trials 3 --steps 5 --warmup 2 --budget-s 120)
  EAGER=(--compile off --trials 3 --steps 3 --warmup 2)
  SWEEP=()
  BACKENDS=(--device cuda --repeats 5 --warmup 2 --d 768 --tokens 32768 --sources 5,25)
  # sdpa, compiled, eager, fused, backends, sweep, fit; + preflight 20 = 590 s, under a 600 s
  # call; set from the steps' times on an H200 (docs/benchmarks.md, "Measured on one H200")
  LIMITS=(25 160 70 90 80 125 20)
fi

want sdpa && run "${LIMITS[0]}" "$PY" -m bench.sdpa_check --size andrea-120m --batch 8 --seq 1024
want compiled && TORCH_LOGS=${TORCH_LOGS:-graph_breaks,recompiles} \
  run "${LIMITS[1]}" "$PY" -m bench.throughput "${BENCH[@]}" "${COMPILED[@]}" \
  --variants baseline,attnres_block:4
want eager && run "${LIMITS[2]}" "$PY" -m bench.throughput "${BENCH[@]}" "${EAGER[@]}"
if want fused && [ "$SMOKE" = 1 ]; then  # not asked which kernels import: ~6 CPU-s, unused here
  echo "fused: skipped (smoke run on the CPU: the fused depth kernels are Triton/CUDA)" | tee -a "$LOG"
elif want fused; then  # the fused kernels that import here (none on a CPU: they are Triton/CUDA)
  FUSED=$("$PY" -c 'from andrea.model.residuals import depth_backend as b  # andrea-120m: d 768
def runs(name):  # the config check of model.depth_backend, on CUDA
    try:
        return bool(b.resolve(name, True, 768))
    except b.BackendError:
        return False
print(",".join(f"attnres_block:4:backend={n}" for n in b.FUSED if runs(n)))')
  if [ -z "$FUSED" ]; then
    echo "fused: skipped (no fused depth kernel's package imports here)" | tee -a "$LOG"
  else
    run "${LIMITS[3]}" "$PY" -m bench.throughput "${BENCH[@]}" "${EAGER[@]}" \
      --variants "baseline,attnres_block:4,attnres_block:4:backend=compile,$FUSED"
  fi
fi
want backends && run "${LIMITS[4]}" "$PY" -m bench.depth_backends "${BACKENDS[@]}" --json "$JSON"
if want sweep; then
  rm -rf "$WORK"
  run "${LIMITS[5]}" "$PY" sweep.py -m sweeps=gpu_small "${SWEEP[@]}" out_dir="$WORK/runs" \
    wandb.mode=disabled train.progress=false sweep.throughput=true
  run "${LIMITS[6]}" "$PY" -m analysis.fit "$WORK/runs/gpu_small" --out "$WORK/analysis"
  for f in fit_table.md fits.json scaling.png multiplier.png; do
    cp "$WORK/analysis/$f" "$OUT/gpu_small_$f" 2>/dev/null
  done
  cp "$WORK/runs/gpu_small/throughput.json" "$OUT/gpu_small_throughput.json" 2>/dev/null
fi
if [ $rc -ne 0 ]; then verdict="SOME STEPS FAILED"
elif [ $missed -ne 0 ]; then verdict="all steps ran; SOME TARGETS MISSED (see FAIL lines)"
else verdict="all steps passed"; fi
echo "gpu_check: $verdict" | tee -a "$LOG"
[ $rc -ne 0 ] && exit 1
[ $missed -ne 0 ] && exit 3
exit 0
