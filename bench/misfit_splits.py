"""Li, Kudugunta & Zettlemoyer 2025's final checkpoints of eleven model sizes as a held-out split:
which runs, and how pool and target part.

Li, Kudugunta & Zettlemoyer, "(Mis)Fitting: A Survey of Scaling Laws" (arXiv 2502.18969; ICLR
2025), trained decoder-only transformers of eleven sizes in their fork of open_lm (untied input
embedding and output head, the GPT-NeoX-20B tokenizer, context 2048, batch 512 x 2048 tokens, a
cosine schedule to each run's own length) at 2-11 token budgets a size and one to four peak
learning rates at each; `data/scaling_results_last_ckpt_only.csv` of github.com/hadasah/scaling_laws
at commit 1f3708c holds each run's final checkpoint, 261 rows. That repository has no licence,
so nothing of it is shipped with andrea: the split reads a runs.csv that
bench/data/li2025misfit/convert.py writes from the user's clone
(bench/data/li2025misfit/README.md: the source, each column, what could not be established),
passed as `--source DIR`. No constant,
default or rule of andrea was chosen on these runs: they are public runs it was never tuned on,
and the split was declared held out for the planner, the band and the law choice. Since it was
scored (2026-12-07) it is dev for the planner and the law choice, whose candidates `--pilot
cheapest` and `monotone` were scored on it by their rules and passed them; neither was adopted
on that pass, each having failed its rule on Pandey's gzip splits before (docs/held_out.md, "Two
deciding sweeps, one pass"; bench/scalebench_splits.py, PLANNER_DEV and LAW_CHOICE_DEV); held
out for the band. `--pilot cheapest` was adopted after `oellm` and is the default since: (c)'s
planner rows were the default then, `--pilot spread`.

The protocol, declared before any score on them was computed (only the file's layout was read:
its columns, its counts of runs per size, token budget and learning rate, that its values are
finite and positive; no law fitted, no loss compared):
- the rows: the final checkpoints, **one row per (model, tokens)**: the row of lowest loss over
  its peak learning rates and over the sweeps that ran it again (runs.csv's `best`), so each
  (params, tokens) at its best-tuned learning rate of the grid, as the authors' own analysis
  selects them (`paper_analysis_and_plots.py`, `"lr": ("opt", None)`: the lowest loss at each
  (N, D)); 81 rows of the 261. Said plainly: a minimum over k runs that differ by learning rate
  and by noise lies below a typical run, the more so the larger k, and k differs: 3 rows at 70
  of the 81 pairs, 6 at seven of the 17 M's (three rates, each run twice), 4 at one (the 17 M at
  4,000 steps), 2 at two (the 200 M at 500 steps, the 1 B at 10,000), 1 at one (the 200 M at
  9,000 steps, no tuning at all); so the loss is biased low, unequally. The grids are coarse
  (rates 2-4x apart) and differ by size (0.002-0.008 at the 12 M, 0.0004-0.004 at the 1 B);
  whether a size's best lies at its grid's edge was not looked at (it would mean reading the
  losses). Not all 261 rows: andrea's laws take params and tokens only, and 1-6 losses at one
  (params, tokens), apart by the learning rate, are not noise a law of scale can fit; the replay
  would price a rerun of one point as a new run, and the point query would ask one target
  (params, tokens) against up to three losses. Not one fixed rate: none is run at every size
  (no 0.001 at the 12 M, no 0.002 at the 1 B);
- the loss: `loss_val`, the source's `loss` at the final checkpoint (nats per token), equal in
  every row to its `C4 Eval Loss`, which the authors' parse_results.py copies from it. Which
  text it is measured on is ambiguous: the column's name and the analysis script say C4, the
  released run script validates on a shard of Salesforce/fineweb_deduplicated (part 01024); read
  as one validation loss on one held-out text, the same for every run. The params: the source's
  `N`, every parameter, the 50,432-row input embedding and the untied output head included, as
  andrea's other sweeps count them (Pandey 2024's `model_size`, the Marin ladder's
  `parameter_count`): 79 % of the 12 M's params, 28 % of the 300 M's, 15 % of the 1 B's, so in
  params the smallest sizes lie close (the 12 M 57.2 M and the 17 M 62.1 M, 8 % apart);
  `params_no_embed` (the source's `N_no_emb`) beside it, unused. The tokens: `D`, the compute
  6·params·tokens (the source's `C_6ND`);
- the split, `misfit` (`--splits misfit` names it and `misfit_auto`), parted by size from the
  run counts alone: the target the largest sizes from the top down until they hold at least five
  rows, the 1 B (2 rows: 10.5 B and 21.0 B tokens) and then the 400 M (4 rows: 3.1-12.6 B), 6
  rows; the pool the other nine sizes, the 12 M to the 300 M (57.2 M-418.8 M params, 7.3x apart;
  12.0 M-302.6 M without embeddings, 25x), 75 rows, 0.10-16.8 B tokens. The target lies 1.25x
  (the 400 M) and 2.82x (the 1 B) past the pool's largest params (1.30x and 3.31x without
  embeddings): four of its six rows a near step; in compute 0.47x-7.06x the pool's largest
  (2.108e19 FLOPs, the 300 M at 8.4 B tokens), 2 of the 6 below it; the 1 B's 21.0 B tokens lie
  1.25x past the pool's longest run. In tokens per parameter the target spans 6.0-24.1, inside
  the pool's 1.37-218;
- the law: the registry's `chinchilla` in `misfit`, and in `misfit_auto` the law `--law auto`
  chooses on the pool, as for the OLMo ladder, Gemstones, Alabdulmohsin et al.'s and Pandey's;
- nine sizes in the pool: the `sizes` band rule (the default) and the candidate law choice
  `sizes` can cut by params (docs/laws.md), holding out whole sizes with three or more below;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows), each command
  run once, one at a time, with OMP_NUM_THREADS=1 and `--source DIR` the folder convert.py wrote
  from 1f3708c, at the commit that registers the split, before any change to andrea:
  (a) the point query (`python -m bench.point_query --splits misfit`): each target row's loss
      at its own (params, tokens) as `analysis.predict` asks, the relative error, the 95 % CI and
      90 % PI as andrea gates them (withheld where it withholds, with the reason) and ungated,
      covers or not and log-width, the factor past the pool; the median and largest |error| over
      the 6 targets and their sign;
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on the 6
      target rows (`python -m bench.scalebench --coverage --splits misfit`), where andrea gives
      it and over all, with its median log-width; no other band rule is run on it before it is
      scored;
  (c) the planner replay (`python -m bench.scalebench --splits misfit --jobs 1`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost (6·params·tokens,
      each row its own training run), 10 repetitions; the RMS relative error over the 6 target
      rows the headline, the target-region R² beside it;
  (d) the law choice: `python -m bench.law_choice_why --splits misfit` with the default, with
      `--law-choice monotone` and with `--law-choice sizes`, and `python -m bench.point_query
      --splits misfit --out D.csv` against the same with `--law-choice sizes --out S.csv` (and
      `--law-choice monotone --out M.csv` where `monotone` changes the choice), each candidate
      judged by its own adoption rule in docs/laws.md ("A candidate law choice, `monotone`",
      "A candidate law choice, `sizes`"), as docs/held_out.md's step 4 says;
  (e) the planner's candidate first budget: `python -m bench.scalebench --splits misfit
      --methods planner --pilot cheapest --jobs 1` beside (c), judged by its three conditions
      (docs/planner.md, "Why cheapest wins at 1 %, and a candidate first budget"); and any
      further candidate declared in the repository before the scores whose adoption rule names
      the next unseen sweep, by its own rule and command;
  (f) the CI's gate, from (a): every target lies past the pool's params, so the gated CI is
      withheld at all 6, and the ungated CI's coverage is reported;
  (g) the paper's own fits (beside its figures in the source) were not read: none is put beside
      these.
- what limits it: the learning-rate minimum above (biased low, unequally); the loss's text
  ambiguous (above); the runs may repeat data (the released script trains on nine parquet parts
  whose token count the repository does not state, and the longest run is 21.0 B tokens: the 1 B
  target at 20,000 steps); the params are the authors' formula, 0-3.0 % below a count of
  open_lm's SwiGLU modules; only 6 targets, two of them the 1 B.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench import run_splits

DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
SOURCE_ENV = "ANDREA_MISFIT_DIR"  # bench/heldout.sh's --source: the folder convert.py wrote
NOT_SHIPPED = (
    "Li et al. 2025's (Mis)Fitting runs are not shipped: bench/data/li2025misfit/README.md"
)
COMMIT = "1f3708c0a12df0effb0ee906b1da5f9f0ff4f4f1"
FETCH = (
    "Li et al. 2025's (Mis)Fitting runs are not shipped with andrea (the repository that holds "
    "them has no licence); get them with `git clone https://github.com/hadasah/scaling_laws && "
    f"python bench/data/li2025misfit/convert.py scaling_laws --commit {COMMIT[:7]} --out DIR` "
    "and pass DIR as --source"
)
ALIAS = "misfit"  # `--splits misfit`: the split below and its _auto twin
QUICK = ("misfit", "misfit_auto")  # HELDOUT_QUICK's (bench.heldout_steps)
# the pool: the nine smaller sizes, every token budget of each
POOL_MODELS = (
    "misfitting_12m",
    "misfitting_17m",
    "misfitting_25m",
    "misfitting_35m",
    "misfitting_50m",
    "misfitting_70m",
    "misfitting_100m",
    "misfitting_200m",
    "misfitting_300m",
)
# the target: the largest sizes from the top down until they hold five rows or more
TARGET_MODELS = ("misfitting_400m", "misfitting_1b")
LOSS = "loss_val"  # declared before any score was seen: the final checkpoint's loss
BEST = (("best", "1"),)  # one row per (model, tokens): the lowest loss over its rows
QUERY = "runs"  # bench.point_query: each target row's loss at its own (params, tokens)
reference = None  # the paper's fits were not read; no held-out prediction to put beside


def in_pool(models) -> np.ndarray:
    """Which rows are the pool (the module's rule; a model neither pool nor target: an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


_SPLIT = dataclasses.replace(
    run_splits.by_model(
        "the Li et al. 2025 (Mis)Fitting split",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group="misfit",
        where=BEST,
    ),
    fetch=FETCH,
)

# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto("misfit", _SPLIT)
