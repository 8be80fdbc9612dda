"""Porian et al. 2024's isoFLOP sweeps as held-out splits: which, and how pool and target part.

Porian, Wortsman, Jitsev, Schmidt & Carmon 2024, "Resolving Discrepancies in Compute-Optimal
Scaling of Language Models" (NeurIPS 2024, arXiv 2406.19146): language models trained on
isoFLOP lines of 1.25e16 to 2.56e19 FLOPs, on RefinedWeb (`rw`) and OpenWebText2 (`owt2`), in
five configurations each (bench/data/porian2024/README.md: the data, its source and licence).
No constant, default or rule of andrea was chosen on these runs: they are public sweeps it was
never tuned on, and every split here is held out.

The protocol, declared before any score on them was computed:
- a split is one (dataset, configuration): its runs are one sweep, fitted alone; configurations
  are not pooled into one R² (the loss differs between them by more than within one target
  region, which would inflate R² with nothing the fit predicts);
- pool: the runs whose compute lies in the lowest `POOL_FRACTION` of the configuration's compute
  range on a log scale, log C <= log C_min + 0.8·(log C_max - log C_min), a line exactly at the
  cut in the pool; target: the rest (whole isoFLOP lines, the largest budgets). The budgets
  double, so with twelve budgets the pool holds the nine lowest and the target the top three
  (2x, 4x, 8x past the pool), with eleven (no runs at 2.56e19) the lowest nine and the top two;
- the compute of a run is its FLOP budget, equal to 6·params·tokens in the data (to 1e-15); the
  replay's budgets are 1 %, 5 %, 10 % of the pool's cost (6·params·tokens), with the methods
  and repetitions of `bench.scalebench`;
- the law: the registry's `chinchilla` (the default for a (params, tokens) pool) in the split
  named `porian_<dataset>_<configuration>`, and the law `--law auto` chooses on the pool
  (`analysis.estimates.pool_law.choose` among the registry's laws whose inputs pool and target
  have) in the split of the same name with `_auto` appended;
- no benchmark fitter and no published rows: only andrea's fit scores them.
"""

from __future__ import annotations

import csv
import functools
import math
from pathlib import Path

import numpy as np

from bench import run_splits
from bench.run_splits import RunSplit

DATA = Path(__file__).parent / "data" / "porian2024"
ALIAS = "porian"  # `bench.scalebench --splits porian`: every split below
QUICK = ("porian_rw_base_long_kaplan_kaplan_train",)  # HELDOUT_QUICK's split (bench.heldout_steps)
# its point query is bench.porian_compute_query (the alias docs/laws.md runs), not bench.point_query
QUERY_STEP = "porian_compute_query"
DATASETS = ("rw", "owt2")
# The paper's five configurations (hparams_warmup_decay_paramcount_loss), in its order: its
# labels "Reproducing Kaplan et al.", "Counting last layer FLOPs", "Correcting warmup", "Cosine
# decay", "Optimizer tuning (no decay)".
CONFIGURATIONS = (
    "base_long_kaplan_kaplan_train",
    "base_long_kaplan_standard_val",
    "base_short_kaplan_standard_val",
    "base_short_chinchilla_standard_val",
    "tuned_short_const_standard_val",
)
POOL_FRACTION = 0.8  # of the log-compute range: the pool; declared before any score was seen
AUTO = run_splits.AUTO
COLUMNS = ("dataset", "configuration", "flops_budget", "params", "tokens", "loss")
# what bench.point_query asks: the compute-optimal loss at each target budget (an isoFLOP line)
QUERY = "compute"


def split_name(dataset: str, configuration: str, auto: bool = False) -> str:
    return f"porian_{dataset}_{configuration}" + (AUTO if auto else "")


def in_pool(compute) -> np.ndarray:
    """Which runs of one configuration are in its pool (the module's rule); the rest are its
    target."""
    c = np.log(np.asarray(compute, float))
    lo, hi = c.min(), c.max()
    return c <= lo + POOL_FRACTION * (hi - lo) + 1e-9 * max(hi - lo, 1.0)


def _split(dataset: str, configuration: str) -> RunSplit:
    return RunSplit(
        who="a Porian et al. 2024 split",
        file=f"{dataset}.csv",
        columns=COLUMNS,
        where=(("configuration", configuration), ("dataset", dataset)),
        numeric=("flops_budget", "params", "tokens", "loss"),
        loss="loss",
        in_pool=lambda cols: in_pool(cols["flops_budget"]),
        group=configuration,
    )


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: runs
    for d in DATASETS
    for c in CONFIGURATIONS
    for name, runs in run_splits.with_auto(split_name(d, c), _split(d, c)).items()
}


@functools.lru_cache(maxsize=None)
def paper_minima(data: Path) -> list[tuple[str, str, float, float]]:
    """(dataset, configuration, budget, the paper's median estimate of the line's minimum) of
    every line in `data`/optima.csv (none where the file is absent)."""
    path = Path(data) / "optima.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return [
            (
                r["dataset"],
                r["configuration"],
                float(r["flops_budget"]),
                float(r["loss_star_median"]),
            )
            for r in csv.DictReader(f)
        ]


def reference(split, budget: float) -> float:
    """The paper's estimate of the minimum of a split's isoFLOP line at `budget` (budgets
    compared within 1e-6), else nan: what bench.point_query scores a compute query against,
    beside the line's best run."""
    where = dict(split.spec.runs.where)
    for d, c, b, loss in paper_minima(Path(split.data or DATA)):
        key = (where["dataset"], where["configuration"])
        if (d, c) == key and math.isclose(b, budget, rel_tol=1e-6):
            return loss
    return math.nan
