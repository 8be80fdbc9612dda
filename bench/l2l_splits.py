"""Brandfonbrener et al. 2024's isoFLOP sweep on six pretraining sets as held-out splits: which,
and how pool and target part.

Brandfonbrener, Anand, Vyas, Malach & Kakade 2024, "Loss-to-Loss Prediction: Scaling Laws for
All Datasets" (arXiv 2411.12925; github KempnerInstitute/loss-to-loss-notebooks at 457ce81):
529 OLMo-style models on eight isoFLOP budgets (2e17 to 4.84e19 FLOPs) on each of six
pretraining sets, and one 3.3 B model per set at 1e21 FLOPs, about 20x past the sweep's top.
The repository has no licence, so nothing of it is shipped with andrea: the splits read a
checkout the user makes (`--source DIR`, default `$ANDREA_L2L_DIR`; bench/data/brandfonbrener2024/
README.md: where to get it, the commit, the columns read). No constant, default or rule of
andrea was chosen on these runs: they are public runs it was never tuned on, and
every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: `eval/c4_val/CrossEntropyLoss`, the C4 validation loss, whose Chinchilla fits
  with kaplan False in the repository's data/opt_params_data.csv (fitted on the sweep only) are
  the published comparison; params: `params` as given (with the embeddings: 12·layers·d² plus
  about 64,000·d); tokens: `tokens`; compute: the isoFLOP budget `iso_flop`, equal to
  6·params·tokens in the data (to 3e-16 relative on every run). The `flops` column is not read:
  it is 177-183 times 6·params, not a per-token count that 6·params·tokens would give;
- per pretraining set S (`data`: fineweb-100b, fineweb-edu-100b, proof-pile-2,
  slimpajama-chunk1, smollm-corpus, starcoder), two splits, each with an `_auto` twin fitted with
  the law `--law auto` chooses on its pool (the registry's `chinchilla` in the split itself):
  (1) `l2l_<S>`: the pool is S's whole sweep (84-91 runs), the target S's 1e21 run (one:
      3.31 B params, 50.4 B tokens; 20.7x past the pool's largest compute, 1.9x past its
      largest params on three sets and 2.3x on the other three, whose largest run is 1.45 B).
      Scored by `python -m bench.point_query --splits l2l`: the point query at the target's
      own (params, tokens), as `analysis.predict` answers it (the predicted
      loss, its error, the 95 % CI and 90 % PI as andrea gates them and ungated, covers or not,
      log-width, the factor past the pool in compute and params), and the compute query at
      1e21, the compute-optimal loss `analysis.fit --at-compute` gives, against the 3.3 B's
      measured loss, which is an upper bound of the optimum at 1e21 (the 3.3 B need not be the
      compute-optimal size): a prediction above it is wrong, one below it may be right. Beside
      both, the paper's `extrap_pred` for S (its Chinchilla fit to S's sweep asked at the 3.3
      B's (params, tokens)), and its error against the measured loss;
  (2) `l2l_<S>_c80`: Porian et al.'s rule (bench/porian_splits.py, `in_pool`) on S's sweep: the
      pool is the runs in the lowest 80 % of S's log-compute range (the six budgets up to
      1e19), the target the rest (the 2.2e19 and 4.84e19 lines, 20-25 runs). Scored by the
      band's coverage on the target runs (`python -m bench.scalebench --coverage --splits l2l`)
      and the planner replay (`python -m bench.scalebench --splits l2l`: random, cheapest, the
      planner and all runs at 1 %, 5 %, 10 % of the pool's cost, 6·params·tokens, cumulative,
      10 repetitions; the target-region R² and the RMS relative error the harness reports);
- each split is scored by those commands only (`RunSplit.scores`: `--splits l2l` names the
  `l2l_<S>` splits in bench.point_query and the `_c80` splits in bench.scalebench and its
  --coverage); andrea's fit only, no benchmark fitter;
- every split is held out; nothing of andrea's (a constant, a default, a rule) is changed after
  any score is seen. A bug found in the harness after scoring is fixed and the scores rerun,
  and both runs are reported.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

import numpy as np

from bench import porian_splits, run_splits
from bench.run_splits import RunSplit

SOURCE_ENV = "ANDREA_L2L_DIR"  # the default of --source: a checkout of the repository
COMMIT = "457ce81a019019bc3981937c20a70c52f5fad436"
FETCH = (
    "Brandfonbrener et al. 2024's runs are not shipped with andrea (their repository has no "
    "licence); get them with `git clone https://github.com/KempnerInstitute/loss-to-loss-notebooks"
    f" && git -C loss-to-loss-notebooks checkout {COMMIT[:7]}` and pass that folder as --source "
    f"DIR or set {SOURCE_ENV}=DIR"
)
DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
NOT_SHIPPED = (  # bench/heldout.sh's line where SOURCE_ENV is not set
    "Brandfonbrener et al. 2024's runs are not shipped: bench/data/brandfonbrener2024/README.md"
)
ALIAS = "l2l"  # `--splits l2l`: the splits below that the command scores
QUICK = ("l2l_starcoder_c80",)  # HELDOUT_QUICK's, one of the 12 scored (bench.heldout_steps)
QUICK_QUERY = "l2l_starcoder"  # and its point query's, one of the 6
DATASETS = (
    "fineweb-100b",
    "fineweb-edu-100b",
    "proof-pile-2",
    "slimpajama-chunk1",
    "smollm-corpus",
    "starcoder",
)
LOSS = "eval/c4_val/CrossEntropyLoss"  # declared before any score was seen
COMPUTE = "iso_flop"  # = 6·params·tokens in the data
COLUMNS = ("data", COMPUTE, "params", "tokens", LOSS)  # what the splits read of both files
SWEEP, EXTRAPOLATION = "data/sweep.csv", "data/extrapolation.csv"
PUBLISHED = "data/opt_params_data.csv"  # the paper's fits; `reference` reads its extrap_pred
TARGET_COMPUTE = 1e21  # the budget of every run of extrapolation.csv
# what bench.point_query asks of an `l2l_<S>` split: the target's loss at its (params, tokens),
# and the compute-optimal loss at its budget
QUERY = ("runs", "compute")


def split_name(dataset: str, c80: bool = False) -> str:
    return f"l2l_{dataset}" + ("_c80" if c80 else "")


def _split(dataset: str, c80: bool) -> RunSplit:
    return RunSplit(
        who="a Brandfonbrener et al. 2024 split",
        file=SWEEP,
        columns=COLUMNS,
        where=(("data", dataset),),
        numeric=(COMPUTE, "params", "tokens", LOSS),
        loss=LOSS,
        # (2): Porian's rule on the sweep; (1): the whole sweep, the target from EXTRAPOLATION
        in_pool=(
            (lambda cols: porian_splits.in_pool(cols[COMPUTE]))
            if c80
            else (lambda cols: np.ones(len(cols[COMPUTE]), bool))
        ),
        group=dataset,
        target_file=None if c80 else EXTRAPOLATION,
        fetch=FETCH,
        scores=("replay", "coverage") if c80 else ("point_query",),
    )


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: runs
    for d in DATASETS
    for c80 in (False, True)
    for name, runs in run_splits.with_auto(split_name(d, c80), _split(d, c80)).items()
}


def reference(split, budget: float) -> float:
    """The paper's `extrap_pred` for the split's set (its Chinchilla fit, kaplan False, of the
    C4 loss on the sweep, at the 3.3 B's (params, tokens)) where `budget` is the 1e21 run's
    (within 1e-6), else nan (an isoFLOP line of the sweep: the paper predicts none)."""
    if not math.isclose(budget, TARGET_COMPUTE, rel_tol=1e-6):
        return math.nan
    (dataset,) = (v for c, v in split.spec.runs.where if c == "data")
    return _published(Path(split.data) / PUBLISHED).get(dataset, math.nan)


@functools.lru_cache(maxsize=None)
def _published(path: Path) -> dict[str, float]:
    """The paper's `extrap_pred` per set (its C4-loss Chinchilla fits, kaplan False), read once
    per file; empty where the file is absent."""
    if not path.is_file():
        return {}
    with open(path, newline="") as f:
        return {
            r["data"]: float(r["extrap_pred"])
            for r in csv.DictReader(f)
            if (r["loss_name"], r["kaplan"]) == (LOSS, "False")
        }
