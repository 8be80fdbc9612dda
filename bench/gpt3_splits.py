"""GPT-3's eight models' training curves as a held-out split: which checkpoints, and how pool and
target part.

Brown, Mann, Ryder, Subbiah, Kaplan, Dhariwal, ..., Sutskever & Amodei 2020, "Language Models are
Few-Shot Learners" (arXiv 2005.14165): eight decoder-only models of one recipe, 125 M to 175 B
parameters (its Table 2.1), each trained on 300 B tokens of one data mixture, whose training and
validation loss against tokens elapsed its Figure 4.1 plots. The curves were read off that figure
by Choshen, Zhang & Andreas 2024 ("A Hitchhiker's Guide to Scaling Law Estimation", arXiv
2410.11840; github IBM/ColPret at 16f23bb, MIT licence), and the validation curve is converted
here at a grid of token counts (bench/data/brown2020/README.md: the data, its source, licence and
conversion). No constant, default or rule of andrea was chosen on these runs: they are public
runs it was never tuned on, and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the validation loss of Figure 4.1 (`loss_val`: "a deduplicated validation split of
  our training distribution"), as digitized; per model and grid token count T, the median of the
  digitized points within 5 % of T (`points` of them, 3 to 74). The digitization's scatter (of
  the order of 0.01 nats between points at one T) is part of the loss scored, as it is of the
  paper's own figure; nothing is smoothed. The params: Table 2.1's n_params (125 M, 350 M,
  760 M, 1.3 B, 2.7 B, 6.7 B, 13 B, 175 B), the tokens T, the compute 6·params·tokens;
- the checkpoints: every model's curve at T = 30, 40, 50, 60, 80, 100, 125, 150, 200, 250 and
  300 B tokens (11 per model, 88 in all). Intermediate checkpoints, because every GPT-3 model
  ran to the same 300 B tokens: the final checkpoints alone vary params only, and a law in
  params and tokens cannot be fitted to them. The first 10 % of training (before 30 B tokens)
  is dropped, as Choshen et al. 2024 drop early checkpoints; it holds GPT-3's learning-rate
  warmup (375 M tokens) and its batch-size ramp (the first 4-12 B tokens). A checkpoint at
  T < 300 B is not the loss of a run trained to T: the learning rate follows one cosine decay
  to 10 % over 260 B tokens in every model. Pool and target share that schedule and that grid
  of T, so the split asks the law to extrapolate in params (and compute) along one schedule;
- one split, `gpt3` (`--splits gpt3` names it and its `_auto` twin): the pool the five smallest
  models (125 M-2.7 B) at every grid T, 55 checkpoints; the target the 6.7 B, 13 B and 175 B at
  every grid T, 33 checkpoints. The target lies 2.5x (6.7 B), 4.8x (13 B) and 65x (175 B) past
  the pool's largest params; in compute (the pool's largest 4.86e21 FLOPs, the 2.7 B at 300 B)
  from 0.25x (the 6.7 B at 30 B) to 65x (the 175 B at 300 B), 10 of the 33 below the pool's
  largest (the 6.7 B up to 100 B tokens, the 13 B up to 60 B). In tokens per parameter the
  pool spans 11-2,400, the targets 0.17-45 (the 175 B's 0.17-1.7 lie below every pool
  checkpoint's);
- the law: the registry's `chinchilla` in `gpt3`, and in `gpt3_auto` the law `--law auto`
  chooses on the pool (`pool_law.choose` among the registry's laws whose inputs pool and target
  have), as for Porian et al. and Gadre et al.;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows):
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at each
      target checkpoint's own (params, tokens) as `analysis.predict` asks (`python -m
      bench.point_query --splits gpt3`): the relative error of the predicted loss; its 95 % CI
      and 90 % PI as andrea gates them (withheld where it withholds, with the reason) and
      ungated (labelled so), each with whether it covers the checkpoint's loss and its
      log-width; the factor past the pool in compute and in params. Reported per target model
      (median and largest |error| over its 11 checkpoints) and at its 300 B checkpoint, the end
      of its training;
  (b) the prediction band's coverage on the 33 target checkpoints (`python -m bench.scalebench
      --coverage --splits gpt3`);
  (c) the planner replay (`python -m bench.scalebench --splits gpt3`): random, cheapest, the
      planner and all runs at 1 %, 5 %, 10 % of the pool's cost, cumulative, 10 repetitions;
      the target-region R² the harness computes and the RMS relative error over the 33 target
      checkpoints, the RMS relative error the headline, as for Gadre et al. Each checkpoint is
      priced as the harness prices a row, 6·params·T, as if it were a run of its own; in GPT-3's
      training a checkpoint came with the run to 300 B, so the replay's budgets are the
      harness's convention, not what the checkpoints cost;
  (d) beside them, the paper's own published errors where it states them. It states none to
      compare: its power law in compute (Figure 3.1, L = 2.57·C^-0.048) is fitted to all eight
      models, the targets included, not asked past the data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits

DATA = Path(__file__).parent / "data" / "brown2020"
ALIAS = "gpt3"  # `bench.scalebench --splits gpt3`: the split below and its _auto twin
QUICK = ("gpt3", "gpt3_auto")  # HELDOUT_QUICK's splits (bench.heldout_steps)
SPLIT = "gpt3"
# the pool: the five smallest models (extracted.csv's names), at every grid token count
POOL_MODELS = ("small", "medium", "large", "xl", "2.7b")
TARGET_MODELS = ("6.7b", "13b", "175b")  # the target: every checkpoint of these
LOSS = "loss_val"  # declared before any score was seen
# what bench.point_query asks: each target checkpoint's loss at its own (params, tokens); the
# paper states no estimate of a checkpoint's loss to score beside it
QUERY = "runs"
reference = None


def in_pool(models) -> np.ndarray:
    """Which checkpoints are the pool (the module's rule; a model neither pool nor target: an
    error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto(
    SPLIT,
    run_splits.by_model(
        "the GPT-3 split (Brown et al. 2020)", LOSS, POOL_MODELS, TARGET_MODELS, group="gpt3"
    ),
)
