#!/usr/bin/env bash
# The held-out and coverage figures that docs/planner.md and docs/laws.md quote, in one go, on a
# CPU (docs/benchmarks.md, "Held-out figures in one command": its run time and what feeds what).
# Run from anywhere:
#     bash bench/heldout.sh OUT_DIR
# Each step runs with OMP_NUM_THREADS=1 (the docs' figures were measured so) and writes its
# console to OUT_DIR/<step>.txt; OUT_DIR/heldout.log gets every command, its console, its wall
# time and `uptime` before and after (the machine's load is part of a timing). The steps:
#   1. bench.scalebench on ScaleBench's splits: the planner table (scalebench/, scalebench.txt)
#   2. bench.scalebench --coverage: the band's coverage on those splits (scalebench_coverage.txt)
#   3. bench.scalebench --splits porian: Porian et al. 2024's held-out sweeps (porian/, porian.txt)
#   4. bench.scalebench --coverage --splits porian (porian_coverage.txt)
#   5. bench.porian_compute_query (porian_compute_query.csv, porian_compute_query.txt)
#   6-8. the same three for Gadre et al. 2024's held-out runs: bench.scalebench --splits gadre
#      (gadre/, gadre.txt), its --coverage (gadre_coverage.txt) and bench.point_query --splits
#      gadre (gadre_point_query.csv, .txt)
#   9-11. the same three for Brandfonbrener et al. 2024's held-out sweeps, only where
#      ANDREA_L2L_DIR names the user's checkout of their repository (not shipped: no licence;
#      bench/data/brandfonbrener2024/README.md), else one line says they were skipped and why:
#      bench.scalebench --splits l2l (l2l/, l2l.txt), its --coverage (l2l_coverage.txt) and
#      bench.point_query --splits l2l (l2l_point_query.csv, .txt)
#   12-14. the same three for Brown et al. 2020's GPT-3 training curves (as Choshen et al. 2024
#      digitized them): bench.scalebench --splits gpt3 (gpt3/, gpt3.txt), its --coverage
#      (gpt3_coverage.txt) and bench.point_query --splits gpt3 (gpt3_point_query.csv, .txt)
#   15-17. the same three for Zhang et al. 2022's OPT training curves (as Xia et al. 2023
#      evaluated them): bench.scalebench --splits opt (opt/, opt.txt), its --coverage
#      (opt_coverage.txt) and bench.point_query --splits opt (opt_point_query.csv, .txt)
#   18-20. the same three for Bhagia et al. 2024's OLMo ladder runs: bench.scalebench --splits
#      olmo_ladder (olmo_ladder/, olmo_ladder.txt), its --coverage (olmo_ladder_coverage.txt)
#      and bench.point_query --splits olmo_ladder (olmo_ladder_point_query.csv, .txt)
#   21-23. the same three for McLeish et al. 2025's Gemstones cooldown runs: bench.scalebench
#      --splits gemstones (gemstones/, gemstones.txt), its --coverage (gemstones_coverage.txt)
#      and bench.point_query --splits gemstones (gemstones_point_query.csv, .txt)
#   24-26. the same three for the Marin scaling ladder's isoFLOP runs on three mixes, only where
#      ANDREA_MARIN_DIR names the folder bench/data/marin2026/convert.py wrote from the user's
#      clone (not shipped: no licence; bench/data/marin2026/README.md), else one line says they
#      were skipped and why: bench.scalebench --splits marin (marin/, marin.txt), its --coverage
#      (marin_coverage.txt) and bench.point_query --splits marin (marin_point_query.csv, .txt)
#   27-29. the same three for Alabdulmohsin et al. 2022's five language models' learning curves
#      (as Choshen et al. 2024 collected them): bench.scalebench --splits alabdulmohsin
#      (alabdulmohsin/, alabdulmohsin.txt), its --coverage (alabdulmohsin_coverage.txt) and
#      bench.point_query --splits alabdulmohsin (alabdulmohsin_point_query.csv, .txt)
#   30-32. the same three for Pandey 2024's runs on five gzip-graded PCFG datasets (as Choshen et
#      al. 2024 collected them): bench.scalebench --splits gzip (gzip/, gzip.txt), its --coverage
#      (gzip_coverage.txt) and bench.point_query --splits gzip (gzip_point_query.csv, .txt)
#   33-34. the two candidate rules as they were scored on unseen sweeps (docs/laws.md): the band rule
#      drift on GPT-3's and OPT's splits, bench.scalebench --coverage --band-rule drift
#      (band_drift.txt; the log rule's figures are the gpt3_coverage and opt_coverage steps), and
#      the law choice monotone on the OLMo ladder, bench.law_choice_why --law-choice monotone
#      (law_choice_monotone.txt)
#   35. bench.coverage_nd --factors, the two tables behind MULTIPLIER_COVERED_UP_TO
#      (coverage_nd_gpu6.txt) and conformal.COVERED_UP_TO (coverage_nd_pi.txt)
# No time limits: a shared CPU's load, not a hang, is what makes a step slow. A failed step is
# logged with its exit status and the rest still run. Exit status: 0 all ran, 1 a step failed
# (2: no OUT_DIR given).
# HELDOUT_QUICK=1 runs the same steps at their smallest settings (one split each, one repetition;
# minutes: tests/test_heldout_script.py), to check the script, not to quote.
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

{ date -u; echo "python: $PY"; echo "quick: $QUICK"; echo; } | tee -a "$LOG"
if [ "$QUICK" = 1 ]; then
  PORIAN=porian_rw_base_long_kaplan_kaplan_train  # one split of the 20
  # one ScaleBench split, moe: --quick's other, farseer (a law of 9 parameters), took most of the
  # smoke run's time, and tests/test_scalebench.py runs --quick itself
  SB=(--splits moe --methods random,full --reps 1)
  SB_COV=(--splits moe)
  PO=(--splits "$PORIAN" --methods random,full --reps 1)
  PO_COV=(--splits "$PORIAN")
  PCQ=(--splits "$PORIAN" --bootstrap 10)
  GA=(--splits gadre_rw --methods random,full --reps 1)  # one split of the 6
  GA_COV=(--splits gadre_rw)
  GPQ=(--splits gadre_rw --bootstrap 10)
  L2=(--splits l2l_starcoder_c80 --methods random,full --reps 1)  # one split of the 12 scored
  L2_COV=(--splits l2l_starcoder_c80)
  L2PQ=(--splits l2l_starcoder --bootstrap 10)  # one of the 6
  G3=(--splits gpt3 --methods random,full --reps 1)  # the one split and its _auto twin
  G3_COV=(--splits gpt3)
  G3PQ=(--splits gpt3 --bootstrap 10)
  OP=(--splits opt --methods random,full --reps 1)  # the one split and its _auto twin
  OP_COV=(--splits opt)
  OPQ=(--splits opt --bootstrap 10)
  OL=(--splits olmo_ladder --methods random,full --reps 1)  # the one split and its _auto twin
  OL_COV=(--splits olmo_ladder)
  OLQ=(--splits olmo_ladder --bootstrap 10)
  GM=(--splits gemstones --methods random,full --reps 1)  # the one split and its _auto twin
  GM_COV=(--splits gemstones)
  GMQ=(--splits gemstones --bootstrap 10)
  MA=(--splits marin_dclm,marin_dclm_auto --methods random,full --reps 1)  # one mix of the 3
  MA_COV=(--splits marin_dclm)
  MAQ=(--splits marin_dclm --bootstrap 10)
  AB=(--splits alabdulmohsin --methods random,full --reps 1)  # the one split and its _auto twin
  AB_COV=(--splits alabdulmohsin)
  ABQ=(--splits alabdulmohsin --bootstrap 10)
  GZ=(--splits gzip_012,gzip_012_auto --methods random,full --reps 1)  # one dataset of the 5
  GZ_COV=(--splits gzip_012)
  GZQ=(--splits gzip_012 --bootstrap 10)
  BD=(--splits gpt3)  # one of the two sweeps
  # one design, one truth, two sweeps: a check that the command runs, no coverage to quote
  ND6=(--designs nd-gpu6 --truths kaplan --reps 2 --bootstrap 10)
  NDPI=(--designs nd-gpu --truths kaplan --reps 2 --bootstrap 10)
else
  SB=()
  SB_COV=()
  PO=(--splits porian)
  PO_COV=(--splits porian)
  PCQ=()
  GA=(--splits gadre)
  GA_COV=(--splits gadre)
  GPQ=(--splits gadre)
  L2=(--splits l2l)
  L2_COV=(--splits l2l)
  L2PQ=(--splits l2l)
  G3=(--splits gpt3)
  G3_COV=(--splits gpt3)
  G3PQ=(--splits gpt3)
  OP=(--splits opt)
  OP_COV=(--splits opt)
  OPQ=(--splits opt)
  OL=(--splits olmo_ladder)
  OL_COV=(--splits olmo_ladder)
  OLQ=(--splits olmo_ladder)
  GM=(--splits gemstones)
  GM_COV=(--splits gemstones)
  GMQ=(--splits gemstones)
  MA=(--splits marin)
  MA_COV=(--splits marin)
  MAQ=(--splits marin)
  AB=(--splits alabdulmohsin)
  AB_COV=(--splits alabdulmohsin)
  ABQ=(--splits alabdulmohsin)
  GZ=(--splits gzip)
  GZ_COV=(--splits gzip)
  GZQ=(--splits gzip)
  BD=(--splits gpt3,opt)
  # the exact command lines of docs/laws.md's two tables
  ND6=(--designs nd-gpu6 --truths kaplan besiroglu --reps 40 --bootstrap 100)
  NDPI=(--designs nd-gpu --truths kaplan besiroglu --reps 40 --bootstrap 100)
fi

run scalebench "$PY" -m bench.scalebench "${SB[@]}" --jobs 2 --out "$OUT/scalebench"
run scalebench_coverage "$PY" -m bench.scalebench --coverage "${SB_COV[@]}"
run porian "$PY" -m bench.scalebench "${PO[@]}" --jobs 2 --out "$OUT/porian"
run porian_coverage "$PY" -m bench.scalebench --coverage "${PO_COV[@]}"
run porian_compute_query "$PY" -m bench.porian_compute_query "${PCQ[@]}" \
  --out "$OUT/porian_compute_query.csv"
run gadre "$PY" -m bench.scalebench "${GA[@]}" --jobs 2 --out "$OUT/gadre"
run gadre_coverage "$PY" -m bench.scalebench --coverage "${GA_COV[@]}"
run gadre_point_query "$PY" -m bench.point_query "${GPQ[@]}" --out "$OUT/gadre_point_query.csv"
if [ -n "${ANDREA_L2L_DIR:-}" ]; then
  SRC=(--source "$ANDREA_L2L_DIR")
  run l2l "$PY" -m bench.scalebench "${L2[@]}" "${SRC[@]}" --jobs 2 --out "$OUT/l2l"
  run l2l_coverage "$PY" -m bench.scalebench --coverage "${L2_COV[@]}" "${SRC[@]}"
  run l2l_point_query "$PY" -m bench.point_query "${L2PQ[@]}" "${SRC[@]}" \
    --out "$OUT/l2l_point_query.csv"
else
  { echo "skipped l2l, l2l_coverage, l2l_point_query: ANDREA_L2L_DIR is not set (Brandfonbrener" \
      "et al. 2024's runs are not shipped: bench/data/brandfonbrener2024/README.md)"; echo; } |
    tee -a "$LOG"
fi
run gpt3 "$PY" -m bench.scalebench "${G3[@]}" --jobs 2 --out "$OUT/gpt3"
run gpt3_coverage "$PY" -m bench.scalebench --coverage "${G3_COV[@]}"
run gpt3_point_query "$PY" -m bench.point_query "${G3PQ[@]}" --out "$OUT/gpt3_point_query.csv"
run opt "$PY" -m bench.scalebench "${OP[@]}" --jobs 2 --out "$OUT/opt"
run opt_coverage "$PY" -m bench.scalebench --coverage "${OP_COV[@]}"
run opt_point_query "$PY" -m bench.point_query "${OPQ[@]}" --out "$OUT/opt_point_query.csv"
run olmo_ladder "$PY" -m bench.scalebench "${OL[@]}" --jobs 2 --out "$OUT/olmo_ladder"
run olmo_ladder_coverage "$PY" -m bench.scalebench --coverage "${OL_COV[@]}"
run olmo_ladder_point_query "$PY" -m bench.point_query "${OLQ[@]}" \
  --out "$OUT/olmo_ladder_point_query.csv"
run gemstones "$PY" -m bench.scalebench "${GM[@]}" --jobs 2 --out "$OUT/gemstones"
run gemstones_coverage "$PY" -m bench.scalebench --coverage "${GM_COV[@]}"
run gemstones_point_query "$PY" -m bench.point_query "${GMQ[@]}" \
  --out "$OUT/gemstones_point_query.csv"
if [ -n "${ANDREA_MARIN_DIR:-}" ]; then
  MSRC=(--source "$ANDREA_MARIN_DIR")
  run marin "$PY" -m bench.scalebench "${MA[@]}" "${MSRC[@]}" --jobs 2 --out "$OUT/marin"
  run marin_coverage "$PY" -m bench.scalebench --coverage "${MA_COV[@]}" "${MSRC[@]}"
  run marin_point_query "$PY" -m bench.point_query "${MAQ[@]}" "${MSRC[@]}" \
    --out "$OUT/marin_point_query.csv"
else
  { echo "skipped marin, marin_coverage, marin_point_query: ANDREA_MARIN_DIR is not set (the" \
      "Marin scaling ladder's runs are not shipped: bench/data/marin2026/README.md)"; echo; } |
    tee -a "$LOG"
fi
run alabdulmohsin "$PY" -m bench.scalebench "${AB[@]}" --jobs 2 --out "$OUT/alabdulmohsin"
run alabdulmohsin_coverage "$PY" -m bench.scalebench --coverage "${AB_COV[@]}"
run alabdulmohsin_point_query "$PY" -m bench.point_query "${ABQ[@]}" \
  --out "$OUT/alabdulmohsin_point_query.csv"
run gzip "$PY" -m bench.scalebench "${GZ[@]}" --jobs 2 --out "$OUT/gzip"
run gzip_coverage "$PY" -m bench.scalebench --coverage "${GZ_COV[@]}"
run gzip_point_query "$PY" -m bench.point_query "${GZQ[@]}" --out "$OUT/gzip_point_query.csv"
run band_drift "$PY" -m bench.scalebench --coverage "${BD[@]}" --band-rule drift
run law_choice_monotone "$PY" -m bench.law_choice_why --splits olmo_ladder --law-choice monotone
run coverage_nd_gpu6 "$PY" -m bench.coverage_nd --factors 1 3 10 30 "${ND6[@]}"
run coverage_nd_pi "$PY" -m bench.coverage_nd --factors 3 10 30 "${NDPI[@]}"

if [ $rc -eq 0 ]; then
  echo "heldout: all steps ran" | tee -a "$LOG"
else
  echo "heldout: SOME STEPS FAILED: ${failed[*]}" | tee -a "$LOG"
fi
exit $rc
