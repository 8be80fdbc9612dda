"""Llama 3's isoFLOP points (Grattafiori et al. 2024, Figure 2) as a held-out split: which points,
and how pool and target part.

"The Llama 3 Herd of Models" (Llama Team, AI @ Meta: Grattafiori, Dubey et al., arXiv
2407.21783) chose its flagship's size from isoFLOP curves: models trained at ten compute budgets,
6e18 to 1e22 FLOPs, their validation loss plotted against their training tokens (Figure 2). The
paper gives the figure, not the runs. github.com/eric-czech/llama3_isoflop_extraction at 1bc1755
read the 133 points off the figure's vector graphic (`isoflops_points.csv`: budget, tokens,
loss), and github.com/Open-Athena/scaling-law-analysis at 3e0656e vendors the same 133 points
(`data/isoflops/extract/llama_3/isoflops.csv`, with params derived as budget / (6 · tokens)).
Neither repository has a licence, so nothing of them is shipped with andrea: the split reads a
runs.csv that bench/data/grattafiori2024llama3/convert.py writes from the user's clone of the
second (bench/data/grattafiori2024llama3/README.md: the source, each column, what could not be
established), passed as `--source DIR`. No constant, default or rule of andrea was chosen on
these points: they are public points it was never tuned on, declared held out for the planner,
the band and the law choice.

The protocol, declared by the coordinator before any score on them was computed (the closest
precedent, bench/xlstm_splits.py's, its shape). What was read first: both files' layout and
header, the two conditions, the count of points at each budget, the params' derivation, and the
points' tokens and params (their ranges below); a few loss values were seen while the layout was
read. No law was fitted, no prediction made, no loss compared with one.
- the rows: **the 133 `raw_loss` points**, the figure's loss as read. The source's other 133
  rows, `exp_loss`, are exp of the same losses (its `fetch_llama3`), a transform of the same
  points, not other runs: not read. Each (params, tokens) once (convert.py checks it);
- the loss: `loss_val`, the figure's "Validation Loss", in the paper's units (its axis 0.70-0.95;
  unit, tokenizer and validation set not in either repository);
- the tokens: read off the figure's x axis; the params: **derived**, budget / (6 · tokens), as
  the source derives them (convert.py checks it within 1e-6 relative at every point), not an
  independent count; so the compute 6·params·tokens is each point's budget exactly;
- the split `llama3` (`--splits llama3` names it and its `_auto` twin `llama3_auto`), parted by
  budget as bench/xlstm_splits.py's are: **the pool the eight budgets 6e18, 1e19, 3e19, 6e19,
  1e20, 3e20, 6e20 and 1e21** (16, 17, 16, 16, 18, 14, 12, 12 points: 121, each its own size,
  59 M to 9.87 B params, 1.48e9 to 1.85e11 tokens); **the target the two highest, 3e21 and 1e22**
  (6 and 6 points: 12), **3x and 10x past the pool's largest compute** (exactly: 6ND is the
  budget); 3 of the 12 past the pool's largest params (up to 1.70x), 3 past its largest tokens
  (up to 5.59x), 1 outside its tokens per parameter (the pool's 0.44-290, the targets' 5.9-643);
- the law: the registry's `chinchilla` in `llama3`, and in `llama3_auto` the law `--law auto`
  chooses on the pool, as for the sweeps before;
- 121 sizes in the pool: the `sizes` band rule (the default) and the candidate law choice `sizes`
  can cut by params;
- the scores, all with andrea's fit only, each command run once, one at a time, with
  OMP_NUM_THREADS=1 and `--source DIR` the folder convert.py wrote from 3e0656e, at the commit
  that registers the split, before any change to andrea:
  (a) the point query (`python -m bench.point_query --splits llama3`): each target point's loss
      at its own (params, tokens) as `analysis.predict` asks, the relative error, the 95 % CI
      and 90 % PI as andrea gates them (withheld where it withholds, with the reason) and
      ungated, covers or not and log-width, the factor past the pool; the median and largest
      |error| over the targets and their sign, at 3e21 and at 1e22 apart;
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on the
      targets (`python -m bench.scalebench --coverage --splits llama3`), where andrea gives it
      and over all, with its median log-width; no other band rule is run;
  (c) the planner replay (`python -m bench.scalebench --splits llama3 --jobs 1`): random,
      cheapest, the planner (its default first budget, `cheapest`) and all points at 1 %, 5 %,
      10 % of the pool's cost (6·params·tokens, each point its own training run), 10
      repetitions; the RMS relative error over the targets the headline, the target-region R²
      beside it;
  (d) the law choice: `python -m bench.law_choice_why --splits llama3` with the default and with
      `--law-choice sizes`, and `python -m bench.point_query --splits llama3 --out D.csv`
      against the same with `--law-choice sizes --out S.csv`, the candidate judged by its
      adoption rule (docs/laws.md, "A candidate law choice, `sizes`") and counted by
      docs/held_out.md's "Two deciding sweeps, one pass" (its second deciding sweep, after
      `xlstm`, if it changes the choice; if not, the sweep says nothing about it).
      `--law-choice monotone` is not run: it was dropped after `xlstm`;
  (e) the planner's candidate `--pilot spread` (docs/planner.md, "After the switch: both first
      budgets on every shipped sweep, one run"): `python -m bench.scalebench --splits llama3
      --methods planner --pilot spread --jobs 1` beside (c), judged by its declared rule, the
      three conditions of "Why cheapest wins at 1 %, and a candidate first budget" with the
      roles swapped (`spread`'s rows against the default's), counted by "Two deciding sweeps,
      one pass" (its first deciding sweep if it changes at least three rows; fewer: the sweep
      says nothing about it);
  (f) the CI's gate, from (a): the gated CI is withheld past the pool's params or tokens; the
      ungated CI's coverage is reported;
  (g) the paper's own fits (the parabolas of its Figure 2, its compute-optimal power law and its
      prediction for the flagship) are not read before the scores: none is put beside these.
- the marks: held out for the band, the planner and the law choice until scored. Once (d) and
  (e) are scored it becomes **dev for the law choice**, as every scored sweep has, and dev for
  the planner, as docs/held_out.md's "Two deciding sweeps, one pass" makes every sweep a
  candidate was scored on (whatever either candidate's verdict); it stays held out for the band
  (only the default rule is run).
- what limits it: **digitized figure points**, tokens and loss read off a drawing (a reading
  error of the figure's precision, not logged values); **params derived from C = 6ND**, not an
  independent count (a FLOP count above 6ND would overstate every size by one factor at a
  budget); **one run a point** (no seeds: no replicate measures the noise) and **one token count
  per size** (no size is seen at two lengths of training); the loss is the figure's "validation
  loss" in the paper's units; the target is 12 points on two curves, and the figure's whole loss
  axis spans 0.70-0.95, so the target-region R² reads a small spread.
"""

from __future__ import annotations

import numpy as np

from bench import run_splits
from bench.run_splits import PARAMS_TOKENS, RunSplit

DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
SOURCE_ENV = "ANDREA_LLAMA3_DIR"  # bench/heldout.sh's --source: the folder convert.py wrote
NOT_SHIPPED = (
    "Llama 3's isoFLOP points (digitized from its Figure 2) are not shipped: "
    "bench/data/grattafiori2024llama3/README.md"
)
COMMIT = "3e0656ee3dce1a2c89aa67691920f5eb9d30f0fc"  # github Open-Athena/scaling-law-analysis
FETCH = (
    "Llama 3's isoFLOP points are not shipped with andrea (the repositories that hold them have "
    "no licence); get them with `git clone https://github.com/Open-Athena/scaling-law-analysis "
    "&& python bench/data/grattafiori2024llama3/convert.py scaling-law-analysis --commit "
    f"{COMMIT[:7]} --out DIR` and pass DIR as --source"
)
ALIAS = "llama3"  # `--splits llama3`: the split below and its _auto twin
QUICK = ("llama3", "llama3_auto")  # HELDOUT_QUICK's (bench.heldout_steps)
LOSS = "loss_val"  # declared before any score was seen: the figure's validation loss
QUERY = "runs"  # bench.point_query: each target point's loss at its own (params, tokens)
reference = None  # the paper's fits are not read before the scores (the protocol, (g))
POOL_BUDGETS = ("6e18", "1e19", "3e19", "6e19", "1e20", "3e20", "6e20", "1e21")
TARGET_BUDGETS = ("3e21", "1e22")  # the two highest: 3x and 10x past the pool's largest


def in_pool(budgets) -> np.ndarray:
    """Which points are the pool: the lower budgets (a budget neither pool nor target: an error)."""
    return run_splits.models_in_pool(budgets, POOL_BUDGETS, TARGET_BUDGETS, what="budgets")


_SPLIT = RunSplit(
    who="the Llama 3 isoFLOP split",
    file="runs.csv",
    columns=("budget", *PARAMS_TOKENS, LOSS),
    where=(),
    numeric=(*PARAMS_TOKENS, LOSS),
    loss=LOSS,
    in_pool=lambda cols: in_pool(cols["budget"]),
    group="llama3",
    fetch=FETCH,
)

# split name -> its points (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto("llama3", _SPLIT)
