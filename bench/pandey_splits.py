"""Pandey 2024's training runs on five synthetic datasets of graded gzip compressibility as
held-out splits: which runs, and how pool and target part.

Pandey 2024, "gzip Predicts Data-dependent Scaling Laws" (arXiv 2405.16684; code
github.com/KhoomeiK/complexity-scaling): Llama models of six sizes (4.18 M-1.39 B parameters,
embeddings included) each trained once, for one epoch, on five token counts (about 0.1 M, 1 M,
2 M, 5 M and 9.5 M tokens) of each of five PCFG datasets whose gzip compressibility is 0.12, 0.23,
0.33, 0.45 and 0.61 (higher: harder to compress), 150 runs, as collected by Choshen, Zhang &
Andreas 2024 ("A Hitchhiker's Guide to Scaling Law Estimation", arXiv 2410.11840; github
IBM/ColPret at 16f23bb, MIT licence, `raw_data/gzip/results_new.jsonl`). They are converted here
(bench/data/pandey2024/README.md: the data, its source, licence, what each column is and what
could not be established). No constant, default or rule of andrea was chosen on these runs: they
are public runs it was never tuned on, and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the run's validation loss after its one epoch (`loss_val`, nats per predicted
  position), the mean of the source's `valid_loss` values weighted by the sequences of each:
  they are one validation pass after training, one value per batch of 32 sequences (100 held-out
  sequences, 32+32+32+4; 39 for the 0.1 M-token runs, 32+7), not evaluations along training; so
  "the final validation loss" is that pass's mean, not one entry. The params: the source's
  `model_size`, every parameter (the 32,001-row input embedding and the untied output head
  included: 98 % of the 4.18 M model, 9.4 % of the 1.39 B; `params_no_embed` beside it, unused),
  the tokens: `token_ct` (the training sequences' tokens, one epoch), the compute 6·params·tokens;
- a **data-starved regime**: at most 2.27 tokens per parameter in the pool (the 4.18 M at 9.5 M
  tokens) and 0.0068 in the target, against the ~20 of compute-optimal training (Hoffmann et al.
  2022). What these splits can say about a user's ladder, trained near or past that ratio, is
  limited: they test the law and andrea's rules far from where a user asks;
- five splits, one per dataset, `gzip_012`, `gzip_023`, `gzip_033`, `gzip_045`, `gzip_061`
  (`--splits gzip` names the five and their `_auto` twins): the pool the five smaller sizes at
  every token count, 25 runs; the target the 1.39 B at every token count, 5 runs: 5.05x past the
  pool's largest params (6.0x without embeddings), 0.053x-5.05x its largest compute (the 275 M at
  9.5 M tokens, 1.57e16 FLOPs; 2 of the 5 below it); its tokens the pool's. In tokens per
  parameter the pool spans 3.6e-4-2.27 and the target 7.2e-5-6.8e-3, 1 target (at 0.1 M tokens)
  below every pool run's;
- the law: the registry's `chinchilla` in each split, and in its `_auto` twin the law `--law
  auto` chooses on the pool, as for the OLMo ladder, Gemstones and Alabdulmohsin et al.'s;
- five sizes in the pool: the first unseen sweep on which the candidate law choice `sizes`
  (docs/laws.md, "A candidate law choice, `sizes`") can act, a params cut holding out a whole size
  with three or more below it; it and `monotone` are scored by their adoption rules as written;
- the scores, all with andrea's fit only, each command run once, one at a time, with
  OMP_NUM_THREADS=1:
  (a) the point query (`python -m bench.point_query --splits gzip`): each target run's loss at
      its own (params, tokens) as `analysis.predict` asks, the relative error, the 95 % CI and
      90 % PI as andrea gates them (withheld where it withholds, with the reason) and ungated,
      covers or not and log-width, the factor past the pool; per split the median and largest
      |error| over its 5 targets and their sign;
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on the 25
      target runs (`python -m bench.scalebench --coverage --splits gzip`), where andrea gives it
      and over all, with its median log-width; no other band rule is run on it before it is
      scored;
  (c) the planner replay (`python -m bench.scalebench --splits gzip --jobs 1`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost, 10 repetitions;
      the RMS relative error over each split's 5 target runs the headline, the target-region R²
      the harness computes beside it;
  (d) the law choice: `python -m bench.law_choice_why --splits gzip` with the default, with
      `--law-choice monotone` and with `--law-choice sizes`, and `python -m bench.point_query
      --splits gzip --out D.csv` against the same with `--law-choice sizes --out S.csv`
      (docs/held_out.md, section 1), each candidate judged by its own adoption rule in
      docs/laws.md (`monotone`: condition 1 where it chooses the default's law on every split,
      else the point query with `--law-choice monotone` and condition 2); any further candidate
      declared in the repository before the scores whose adoption rule names the next unseen
      sweep, by its own rule and command;
  (e) the CI's gate, from (a): the gated CI's coverage where given and the ungated CI's where it
      is withheld;
  (f) the paper's own errors: its fitted laws were not available here (the authors' notebook is
      "upon request"), so none is put beside these.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits
from bench.run_splits import RunSplit

DATA = Path(__file__).parent / "data" / "pandey2024"
ALIAS = "gzip"  # `--splits gzip`: the five splits below and their _auto twins
QUICK = ("gzip_012", "gzip_012_auto")  # HELDOUT_QUICK's, one dataset of 5 (bench.heldout_steps)
DATASETS = ("0.12", "0.23", "0.33", "0.45", "0.61")  # the datasets' gzip compressibility
# the pool: the five smaller shapes (hidden x layers), at every token count
POOL_MODELS = ("64x2", "128x4", "256x6", "512x10", "1024x20")
TARGET_MODELS = ("2048x30",)  # the target: the 1.39 B at every token count
LOSS = "loss_val"  # declared before any score was seen: the validation pass after training
# what bench.point_query asks: each target run's loss at its own (params, tokens); the paper's
# fits were not available to score beside it
QUERY = "runs"
reference = None


def split_name(dataset: str) -> str:
    return "gzip_" + dataset.replace(".", "")


def in_pool(models) -> np.ndarray:
    """Which runs of one dataset are its pool (the module's rule; a model neither pool nor target:
    an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


def _split(dataset: str) -> RunSplit:
    return run_splits.by_model(
        "a Pandey 2024 split",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group=split_name(dataset),
        where=(("dataset", dataset),),
    )


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: runs
    for d in DATASETS
    for name, runs in run_splits.with_auto(split_name(d), _split(d)).items()
}
