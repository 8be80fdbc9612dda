"""The Gemstones suite's cooldown runs (McLeish et al. 2025) as a held-out split: which runs, and
how pool and target part.

McLeish, Kirchenbauer, Miller, Singh, Bhatele, Goldblum, Panda & Goldstein 2025, "Gemstones: A
Model Suite for Multi-Faceted Scaling Laws" (arXiv 2502.06857): decoder-only transformers of one
training setup (the same data and a batch of 2,048 sequences of 2,048 tokens for every model),
50 M to 2 B parameters, of many widths and depths. Each model's main run holds a constant
learning rate after warmup; from it, at every 10 B tokens up to 100 B, a cooldown run branched
and ended about 10 % later with its learning rate cooled. Their repository
github.com/mcleish7/gemstone-scaling-laws (commit 5f42047, MIT licence) holds the validation
loss each cooldown run logged at its last step (`wandb_dfs/wandb_df_for_fitting_cool_end.jsonl`,
the file the paper's cooldown fits read): 199 runs of 20 models. They are converted here
(bench/data/mcleish2025/README.md: the data, its source, licence and conversion). No constant,
default or rule of andrea was chosen on these runs: they are public runs it was never tuned on,
and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the validation loss each cooldown run logged at its last step (the source's
  `final_loss`, its wandb `val_loss`; nats per token), one evaluation as the source gives it;
  nothing is smoothed or averaged. The params: the source's count per model
  (`params_active_precise`, 48.4 M to 2.01 B: the count the source's main fits use; it fits a
  count without embeddings apart, `_no_embeds`), the tokens: the run's last step times 2,048 x
  2,048 (the source's `tokens`), the compute 6·params·tokens;
- the runs: all 199 of the file, the cooldown runs' ends, each a run trained to its own tokens
  with its learning rate cooled (not a checkpoint at the constant learning rate: those are the
  source's `hot` files, not used). Every model has ten, at 11.0 B to 110.0 B tokens, but the
  3072x12, which has nine (the source never cooled it from 100 B). Kept as the source keeps
  them: the models of extreme shape (768x3, 1792x7, 2560x8, 256x80), and the 1792x7, whose
  cooldowns the source's extraction script says were redone "at implicitly reduced lr" — the
  paper fits them all with one law, so does this split. Not used: the source's learning-rate
  ablation (`lr_ablation`, half the learning rate), its constant-learning-rate checkpoints and
  the FineWeb/DCLM evaluations of those checkpoints (`other_validation_losses/`);
- one split, `gemstones` (`--splits gemstones` names it and its `_auto` twin): the pool the 14
  models below 1 B parameters (48.4 M-543 M, 11.2x apart), 140 runs; the target the six models
  of 1 B and more (1280x36, 2560x8, 1792x18 at 1.01-1.05 B; 2048x27, 1536x50, 3072x12 at
  1.90-2.01 B), 59 runs: a new larger size, the question a user asks. The target lies 1.87x to
  3.69x past the pool's largest params (the 1024x28's 543 M); in compute (the pool's largest
  3.59e20 FLOPs, the 1024x28 at 110 B tokens) from 0.19x (the 1280x36 at 11 B) to 3.54x (the
  1536x50 at 110 B), 21 of the 59 below the pool's largest. In tokens per parameter the pool
  spans 20.2-2,274 and the targets 5.5-109: 12 targets (every target model's first cooldown,
  and the 2 B models' second and third) lie below every pool run's;
- the law: the registry's `chinchilla` in `gemstones`, and in `gemstones_auto` the law `--law
  auto` chooses on the pool (`pool_law.choose` among the registry's laws whose inputs pool and
  target have), as for Porian et al., Gadre et al., GPT-3, OPT and the OLMo ladder;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows), each command
  run once, one at a time, with OMP_NUM_THREADS=1:
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at
      each target run's own (params, tokens) as `analysis.predict` asks (`python -m
      bench.point_query --splits gemstones`): the relative error of the predicted loss; its
      95 % CI and 90 % PI as andrea gates them (withheld where it withholds, with the reason)
      and ungated (labelled so), each with whether it covers the run's loss and its log-width;
      the factor past the pool in compute and in params. Reported per target model (median and
      largest |error| over its runs) and over all 59;
  (b) the prediction band's coverage (the 90 % interval, the default `log` rule) on the 59
      target runs (`python -m bench.scalebench --coverage --splits gemstones`), where andrea
      gives it and over all;
  (c) the planner replay (`python -m bench.scalebench --splits gemstones --jobs 2`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost, cumulative, 10
      repetitions; the target-region R² the harness computes and the RMS relative error over
      the 59 target runs, the RMS relative error the headline. Each run is priced
      6·params·tokens, as the harness prices a row; in the suite's training a cooldown run cost
      its own 10 % plus the share of the main run it branched from, so the budgets are the
      harness's convention;
  (d) the law choice: `python -m bench.law_choice_why --splits gemstones` and the same with
      `--law-choice monotone`, and `python -m bench.point_query --splits gemstones --law-choice
      monotone` beside (a): docs/laws.md's adoption rule for `monotone` applied as written
      (condition 1 if both choose the same law on the pool; else (a)-(c) on each split whose
      choice it changes);
  (e) the CI's gate (withheld past the fitted params or tokens): from (a), the gated CI's
      coverage where given and the ungated CI's coverage at the targets it withholds;
  (f) beside them, the paper's own published errors where it states them. We know of none to
      compare: McLeish et al. fit their laws to all the models and compare law shapes and
      compute-optimal allocations; they do not hold a larger model out and report its error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits

DATA = Path(__file__).parent / "data" / "mcleish2025"
ALIAS = "gemstones"  # `bench.scalebench --splits gemstones`: the split below and its _auto
QUICK = ("gemstones", "gemstones_auto")  # HELDOUT_QUICK's splits (bench.heldout_steps)
SPLIT = "gemstones"
# the pool: the 14 models below 1 B parameters (the source's WIDTHxDEPTH names)
POOL_MODELS = (
    "256x23",
    "256x27",
    "384x13",
    "256x71",
    "512x12",
    "512x13",
    "768x3",
    "256x80",
    "512x16",
    "384x36",
    "768x45",
    "1280x15",
    "1792x7",
    "1024x28",
)
# the target: the six models of 1 B parameters and more, every cooldown run of each
TARGET_MODELS = ("1280x36", "2560x8", "1792x18", "2048x27", "1536x50", "3072x12")
LOSS = "loss_val"  # declared before any score was seen
# what bench.point_query asks: each target run's loss at its own (params, tokens); the paper
# states no estimate of a held-out run's loss to score beside it
QUERY = "runs"
reference = None


def in_pool(models) -> np.ndarray:
    """Which runs are the pool (the module's rule; a model neither pool nor target: an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto(
    SPLIT,
    run_splits.by_model(
        "the Gemstones split (McLeish et al. 2025)",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group="gemstones",
    ),
)
