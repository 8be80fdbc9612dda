"""OpenEuroLLM's dense English scaling-law grid as a held-out split: which rows, and how pool and
target part.

OpenEuroLLM, "OELLM Dense English Scaling Laws" (github.com/OpenEuroLLM/dense_english_scaling_laws
at commit 781af43, `data/loss_all_exps_post_annealing.csv`: "validation losses measured after
learning-rate annealing for the scaling experiments"; checkpoints on
huggingface.co/openeurollm/dense_english_scaling_laws; we found no paper or report that states
these runs, so the repository is what to cite): dense decoder-only transformers of six sizes
(47.6 M-1.71 B parameters) trained on English at nine token counts (6-300 B; the 1.71 B at 30-300
B only), each (params, tokens) cell over a grid of learning rates and global batch sizes, 909
runs in 51 cells. The repository has no licence, so nothing of it is shipped with andrea: the
split reads a runs.csv that bench/data/oellm2025/convert.py writes from the user's clone
(bench/data/oellm2025/README.md: the columns, what could not be established, the conversion),
passed as `--source DIR`; convert.py refuses a file whose SHA-256 is not that of 781af43's, the
bytes this protocol was declared on. No constant, default or rule of andrea was chosen on these
runs: they are public runs it was never tuned on, and the split was declared held out for the
band, the planner and the law choice. Since it was scored (2026-12-07) it is dev for the planner,
whose candidate `--pilot cheapest` passed its rule on it, its third deciding sweep, and is
adopted by docs/held_out.md's "Two deciding sweeps, one pass" (PLANNER_DEV; the default since
its own commit, so (c)'s planner rows are `--pilot spread`'s, the default then), and for the law
choice, whose candidates `monotone` and `sizes` were scored on it by their rules and said nothing
(LAW_CHOICE_DEV; bench/scalebench_splits.py); held out for the band.

The protocol, declared before any score on these runs was computed (nothing was fitted to them;
only the file's structure and counts were read, and its losses checked finite and positive):
- **the rows: one per (params, tokens) cell, the lowest `loss` over all its runs**, whatever
  their learning rate, batch size, beta2 and seed: each cell at its best-tuned hyperparameters,
  as a compute-optimal study reads such a grid (the authors' own Chinchilla fit reads "Optimal
  (lr, gbsz) for each (N, D)" and holds out the 1.7 B too: bench/data/oellm2025/README.md). Said
  plainly: **a minimum over noisy runs is biased low**, more the more runs it is taken over, and
  the pool's cells hold 13-28 runs each while the 1.7 B's hold 6-12 (its grid is narrower). The
  target is read with fewer draws than the pool, so even a law exact for the best-tuned loss
  would, fitted on the pool's minima, predict the 1.7 B a little too low, by about the runs'
  seed-to-seed noise, which this file cannot measure (no configuration is in it twice). Whether
  each cell's grid brackets its best learning rate and batch size is not checked (that would
  read the losses). **The two smallest sizes used Adam's beta2 0.99, the other four 0.95**: the
  pool mixes two optimiser settings, the target has the larger sizes' one, and no law here sees
  the difference;
- the loss: `loss` (the validation loss after the learning rate's annealing, nats per token as
  the repository's fits read it); the params: `N`, as the source gives it (47,557,632 to
  1,713,504,256; what it counts is not stated: it appears to include the tied embedding matrix,
  README); the tokens: `D`, the nominal token count (6e9-3e11; `train_tokens` at most 7.9e-5
  above it, not read); the compute 6·params·tokens, the file's own `C`;
- one split, `oellm`, and its `_auto` twin (`--splits oellm` names both): **the pool the five
  sizes up to 983 M (47.6 M-983 M, 20.7x apart) at every token count, 45 cells; the target the
  1.7 B's 6 cells (30, 50, 80, 120, 200, 300 B tokens)**: a new larger size, the question a user
  asks. The target lies **1.74x past the pool's largest params**; in compute at 0.17x-1.74x the
  pool's largest (1.77e21 FLOPs, the 983 M at 300 B), 4 of the 6 below it (30-120 B) and 2
  above (200 B at 1.16x, 300 B at 1.74x); its tokens are the pool's;
- **a data-rich regime**, the opposite of Pandey 2024's gzip splits: tokens per parameter 6.1 to
  about 6,300 in the pool (the 47.6 M at 300 B) and 17.5-175 in the target, around and past the
  ~20 of compute-optimal training (Hoffmann et al. 2022), inside the pool's range. What it can
  say: how andrea extrapolates a short step in params (1.74x) at a user's own tokens per
  parameter on well-tuned runs of one recipe, the easy case of its band and law choice. What it
  cannot say: anything about larger steps in params or compute, about runs not tuned per cell (a
  user's ladder at one learning rate), or about other data or architectures; and with 6 target
  cells each miss moves a coverage by 16.7 points;
- the law: the registry's `chinchilla` in `oellm`, and in `oellm_auto` the law `--law auto`
  chooses on the pool, as for Gemstones, the OLMo ladder and Pandey's splits;
- five sizes in the pool, nine cells each: the candidate law choice `sizes` can cut by params
  here (the 983 M's cells held out with four sizes below, or the 589 M's and 983 M's with three);
- the budgets price each cell 6·params·tokens, one run: the 13-28 tuning runs behind each
  cell's minimum are not priced, so a replay's budget buys best-tuned cells at one run's cost;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows), each command
  run once, one at a time, with OMP_NUM_THREADS=1, `--source DIR` the folder convert.py wrote:
  (a) the point query (`python -m bench.point_query --splits oellm`): each target cell's loss at
      its own (params, tokens), the relative error, the 95 % CI and 90 % PI as andrea gates
      them (withheld where it withholds, with the reason) and ungated, covers or not and
      log-width, the factor past the pool in params and compute; the median and largest |error|
      over the 6 and their sign;
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on the 6
      target cells (`python -m bench.scalebench --coverage --splits oellm`), where andrea gives
      it and over all, with its median log-width; no other band rule is run on it before it is
      scored;
  (c) the planner replay (`python -m bench.scalebench --splits oellm --jobs 1`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost, 10 repetitions;
      the RMS relative error over the 6 target cells the headline, the target-region R² beside;
  (d) the law choice: `python -m bench.law_choice_why --splits oellm` with the default, with
      `--law-choice monotone` and with `--law-choice sizes`, and `python -m bench.point_query
      --splits oellm --out D.csv` against the same with `--law-choice sizes --out S.csv` (and
      `--law-choice monotone --out M.csv` where monotone changes the choice), each candidate
      judged by its own adoption rule in docs/laws.md ("A candidate law choice, `monotone`",
      "... `sizes`");
  (e) the planner's candidate first budget: `python -m bench.scalebench --splits oellm
      --methods planner --pilot cheapest --jobs 1` beside (c), judged by its three conditions
      (docs/planner.md, "Why cheapest wins at 1 %, and a candidate first budget"; its rule names
      Pandey's splits, where it was not adopted; docs/held_out.md, step 4, applies it to the
      next unseen sweep, this one); any further candidate declared before the scores whose
      adoption rule names the next unseen sweep, by its own rule and command;
  (f) the CI's gate, from (a): the gated CI's coverage where given, the ungated CI's where it
      is withheld;
  (g) the authors fitted Chinchilla to the same pool with the 1.7 B held out (their
      `scripts/bootstrap_estimation_chinchilla.py`); their fits are not read before andrea's
      scores are written; then, if their notebooks state the 1.7 B's error, it may be put
      beside, labelled theirs, deciding nothing.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench import run_splits

DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
SOURCE_ENV = "ANDREA_OELLM_DIR"  # bench/heldout.sh's --source: the folder convert.py wrote
NOT_SHIPPED = (
    "OpenEuroLLM's dense English scaling-law runs are not shipped: bench/data/oellm2025/README.md"
)
COMMIT = "781af4364e3ba03886f7d8fd9a6cf9d8e873eff4"
# the SHA-256 of data/loss_all_exps_post_annealing.csv at COMMIT, which convert.py checks
SHA256 = "b1c7a64f5c557e0fb85c59b48af9626b06496f488a642315222eeaf200835e38"
FETCH = (
    "OpenEuroLLM's dense English scaling-law runs are not shipped with andrea (the repository "
    "that holds them has no licence); get them with `git clone "
    "https://github.com/OpenEuroLLM/dense_english_scaling_laws && git -C "
    f"dense_english_scaling_laws checkout {COMMIT[:7]} && python bench/data/oellm2025/convert.py "
    "dense_english_scaling_laws --out DIR` and pass DIR as --source"
)
ALIAS = "oellm"  # `--splits oellm`: the split below and its _auto twin
QUICK = ("oellm", "oellm_auto")  # HELDOUT_QUICK's (bench.heldout_steps)
POOL_MODELS = ("50M", "130M", "300M", "600M", "1B")  # the five sizes up to 983 M, every cell
TARGET_MODELS = ("1.7B",)  # the target: the 1.71 B's six cells, 30-300 B tokens
LOSS = "loss"  # declared before any score was seen: each cell's lowest loss (convert.py)
QUERY = "runs"  # bench.point_query: each target cell's loss at its own (params, tokens)
reference = None  # the authors' fits are not read before the scores (the protocol, (g))


def in_pool(models) -> np.ndarray:
    """Which cells are the pool (the module's rule; a model neither pool nor target: an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


def _split() -> run_splits.RunSplit:
    split = run_splits.by_model(
        "the OpenEuroLLM dense English split", LOSS, POOL_MODELS, TARGET_MODELS, group="oellm"
    )
    return dataclasses.replace(split, fetch=FETCH)


# split name -> its rows (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto("oellm", _split())
