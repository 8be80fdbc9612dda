"""Five language models' learning curves (Alabdulmohsin et al. 2022) as a held-out split: which
points, and how pool and target part.

Alabdulmohsin, Neyshabur & Zhai 2022, "Revisiting Neural Scaling Laws in Language and Vision"
(NeurIPS 2022, arXiv 2209.06640): five decoder-only language models of 16.8 M, 134 M, 262 M,
453 M and 1.07 B parameters, each trained once, their validation loss evaluated along training,
released in the authors' benchmark of learning-curve extrapolation
(google-research/google-research, `revisiting_neural_scaling_laws/data/benchmark.lang.csv`) and
collected unchanged by Choshen, Zhang & Andreas 2024 ("A Hitchhiker's Guide to Scaling Law
Estimation", arXiv 2410.11840; github IBM/ColPret at 16f23bb, MIT licence,
`aggregated_eval/revisiting_lang.csv`). They are converted here (bench/data/alabdulmohsin2022/
README.md: the data, its source, licence, what each column is and what could not be
established). No constant, default or rule of andrea was chosen on these runs: they are public
runs it was never tuned on, and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the source's `Loss` of the LM rows (task `val_loss`), the validation loss **as the
  authors rescaled it**: every curve reads 0.999 at its first point (2.62 B tokens), so the
  values are not nats per token and each curve is on its own scale; how it was rescaled is not
  stated in what could be read. It is scored as given (`loss_val`), one evaluation per point,
  nothing smoothed. A law fitted to it across sizes fits the rescaled surface, not the
  cross-entropy; what this split can say is limited by that, and the docs say so beside every
  figure. The params: the model's name read as a number (three significant digits; whether it
  counts the embeddings is not stated), the tokens: `Seen Examples` (tokens seen, the step
  times 262,144: the README there), the compute 6·params·tokens. The sequence length is not
  established; it is not needed, the tokens being the column itself;
- the points: every distinct (model, tokens) point of the five curves but each curve's first
  (at 10,000 steps, 2.62 B tokens, 0.999 in all five by the rescaling: its anchor, not a
  measurement), 224: 16.8 M 118, 134 M 23, 262 M 43, 453 M 20, 1.07 B 20. The source file holds
  each curve four times, identical; the copies are collapsed. Both values of the source's
  `Training` are kept: it is the authors' split of each curve along its tokens (1: the part
  their one-curve estimators were fitted on, 0: the part they extrapolated to), not a mark on a
  point; this split parts by model instead. Each point is a checkpoint of its model's one run,
  not a run trained to its tokens; the learning-rate schedule is not stated in what was read,
  so whether a point lies mid-decay cannot be said (GPT-3's and OPT's splits drop their first
  10 % of a known schedule, bench/gpt3_splits.py; here no schedule length is known, and nothing
  but the anchor is dropped);
- one split, `alabdulmohsin` (`--splits alabdulmohsin` names it and its `_auto` twin): the pool
  the four smaller models (16.8 M-453 M, 27x apart) at every kept point, 204 points; the target
  the 1.07 B at every kept point (5.24-142 B tokens), 20 points: a new larger size, the question
  a user asks. The target lies 2.36x past the pool's largest params; in compute (the pool's
  largest 4.21e20 FLOPs, the 262 M at 268 B tokens) from 0.080x (at 5.24 B tokens) to 2.17x (at
  142 B), 9 of the 20 below the pool's largest; its tokens all within the pool's (5.24-313 B).
  In tokens per parameter the pool spans 11.6-18,645 and the target 4.9-133, 2 targets (5.24 and
  7.86 B tokens) below every pool point's;
- the law: the registry's `chinchilla` in `alabdulmohsin`, and in `alabdulmohsin_auto` the law
  `--law auto` chooses on the pool (`pool_law.choose` among the registry's laws whose inputs pool
  and target have), as for GPT-3, OPT, the OLMo ladder, Gemstones and the Marin ladder;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows), each command
  run once, one at a time, with OMP_NUM_THREADS=1:
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at
      each target point's own (params, tokens) as `analysis.predict` asks (`python -m
      bench.point_query --splits alabdulmohsin`): the relative error of the predicted loss; its
      95 % CI and 90 % PI as andrea gates them (withheld where it withholds, with the reason)
      and ungated (labelled so), each with whether it covers the point's loss and its
      log-width; the factor past the pool in compute and in params. Reported as the median and
      largest |error| over the 20, their sign, and the error at the last point (142 B tokens);
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on the 20
      target points (`python -m bench.scalebench --coverage --splits alabdulmohsin`), where
      andrea gives it and over all, and its median log-width; no other band rule is run on it
      before it is scored;
  (c) the planner replay (`python -m bench.scalebench --splits alabdulmohsin --jobs 1`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost, cumulative, 10
      repetitions; the target-region R² the harness computes and the RMS relative error over
      the 20 target points, the RMS relative error the headline. Each checkpoint is priced
      6·params·tokens as if it were a run of its own; in the authors' training a checkpoint came
      with its model's one run, so the budgets are the harness's convention (as for GPT-3 and
      OPT);
  (d) the law choice: `python -m bench.law_choice_why --splits alabdulmohsin` and the same with
      `--law-choice monotone`: docs/laws.md's adoption rule for `monotone` applied as written
      (condition 1 if both choose the same law on the pool; else the point query with
      `--law-choice monotone` beside (a), and (a)-(c) on the split whose choice it changes);
  (e) the CI's gate (withheld past the fitted params or tokens): from (a), the gated CI's
      coverage where given and the ungated CI's at the targets it withholds;
  (f) beside them, the paper's own published errors where they state them. None compare: the
      paper fits one curve at a time in its tokens (each model's `Training` part, extrapolated
      to the rest of the same curve), never a larger model from smaller ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits

DATA = Path(__file__).parent / "data" / "alabdulmohsin2022"
ALIAS = "alabdulmohsin"  # `--splits alabdulmohsin`: the split below and its _auto twin
QUICK = ("alabdulmohsin", "alabdulmohsin_auto")  # HELDOUT_QUICK's (bench.heldout_steps)
SPLIT = "alabdulmohsin"
# the pool: the four smaller models (the source's names), at every kept point
POOL_MODELS = ("1.68e+07", "1.34e+08", "2.62e+08", "4.53e+08")
TARGET_MODELS = ("1.07e+09",)  # the target: every kept point of the 1.07 B
LOSS = "loss_val"  # declared before any score was seen: the authors' rescaled validation loss
# what bench.point_query asks: each target point's loss at its own (params, tokens); the paper
# states no estimate of a larger model's loss to score beside it
QUERY = "runs"
reference = None


def in_pool(models) -> np.ndarray:
    """Which points are the pool (the module's rule; a model neither pool nor target: an
    error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto(
    SPLIT,
    run_splits.by_model(
        "the Alabdulmohsin et al. 2022 split",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group="alabdulmohsin",
    ),
)
