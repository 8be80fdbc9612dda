"""Gadre et al. 2024's over-trained models as held-out splits: which, and how pool and target part.

Gadre, Smyrnis, Shankar, ..., Muennighoff & Schmidt 2024, "Language models scale reliably with
over-training and on downstream tasks" (arXiv 2403.08540; github mlfoundations/scaling at
a003c49, MIT licence): 104 open_lm models trained on C4, RedPajama and RefinedWeb, four small
configurations (about 11 M to 411 M parameters) at token multipliers M = 0.25 to 32 (tokens =
20·M·params), a 1.4 B model at M = 1 and one more M, and a 6.9 B model at M = 1
(bench/data/gadre2024/README.md: the data, its source and licence). No constant, default or rule
of andrea was chosen on these runs: they are public runs it was never tuned on, and
every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the C4 eval loss (`loss_c4`, the `c4_val` evaluation), the loss the paper's own fits
  and its Figure 1 use, so that its published errors compare; the params: `params` as the JSON
  gives them (with the embeddings: the count andrea's chinchilla law is given for a run), the
  tokens `tokens`, the compute 6·params·tokens;
- one split per training set, `gadre_<dataset>` (c4, rpj, rw): its pool the four small
  configurations at every M (31 runs on C4, which has no 411 M run at M = 32; 32 on the others),
  its target the 1.4 B and 6.9 B runs (3 per dataset). The target lies 3.5x (1.4 B) and 16.7x
  (6.9 B) past the pool's largest params; in compute, the 1.4 B at M = 1 lies below the pool's
  largest (0.38-0.77x), the others 3.1-17.5x past it;
- the law: the registry's `chinchilla` in `gadre_<dataset>`, and in the split of the same name
  with `_auto` appended the law `--law auto` chooses on the pool (`pool_law.choose` among the
  registry's laws whose inputs pool and target have), as for Porian et al. (bench/porian_splits.py);
- the scores, all with andrea's fit only (no benchmark fitter, no published rows):
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at each
      target run's own (params, tokens) as `analysis.predict` asks (`python -m bench.point_query
      --splits gadre`): the relative error of the predicted loss; its 95 % CI and 90 % PI as
      andrea gates them (withheld where it withholds, with the reason) and ungated (labelled so),
      each with whether it covers the run's loss and its log-width; the factor past the pool in
      compute and in params;
  (b) the prediction band's coverage on the target runs (`python -m bench.scalebench --coverage
      --splits gadre`);
  (c) the planner replay (`python -m bench.scalebench --splits gadre`): random, cheapest, the
      planner and all runs at 1 %, 5 %, 10 % of the pool's cost (6·params·tokens), cumulative,
      10 repetitions; the target-region R² the harness computes and the RMS relative error over
      the target runs. **The RMS relative error is the headline for these splits**: R² over 3
      target runs is dominated by their spread;
  (d) beside them, the paper's own published errors where the repository states them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits
from bench.run_splits import RunSplit

DATA = Path(__file__).parent / "data" / "gadre2024"
ALIAS = "gadre"  # `bench.scalebench --splits gadre`: every split below
QUICK = ("gadre_rw",)  # HELDOUT_QUICK's splits, one of the 6 (bench.heldout_steps)
DATASETS = ("c4", "rpj", "rw")
# the pool: the four small open_lm configurations (width, layers, heads), at every multiplier
POOL_MODELS = ("d=96_l=8_h=4", "d=512_l=8_h=4", "d=576_l=24_h=8", "d=1024_l=24_h=8")
TARGET_MODELS = ("open_lm_1b", "open_lm_7b")  # the target: every run of these
LOSS = "loss_c4"  # declared before any score was seen
# what bench.point_query asks: each target run's loss at its own (params, tokens); the
# repository states no estimate of a run's loss to score beside it
QUERY = "runs"
reference = None


def split_name(dataset: str) -> str:
    return f"gadre_{dataset}"


def in_pool(models) -> np.ndarray:
    """Which runs of one dataset are its pool (the module's rule; a model neither pool nor target:
    an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


def _split(dataset: str) -> RunSplit:
    return run_splits.by_model(
        "a Gadre et al. 2024 split",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group=dataset,
        where=(("dataset", dataset),),
    )


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: runs
    for d in DATASETS
    for name, runs in run_splits.with_auto(split_name(d), _split(d)).items()
}
