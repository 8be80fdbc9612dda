"""The OLMo ladder's 25 runs (Bhagia et al. 2024) as a held-out split: which runs, and how pool
and target part.

Bhagia, Liu, Wettig, Heineman, Tafjord, Jha, Soldaini, Smith, Groeneveld, Koh, Dodge &
Hajishirzi 2024, "Establishing Task Scaling Laws via Compute-Efficient Model Ladders" (arXiv
2412.04403): small "ladder" models of one recipe trained to fit scaling laws that predict larger
models' task scores. Their repository github.com/allenai/OLMo (branch `ladder-1xC`, commit
4c37f5b, Apache 2.0) logs the ladder's runs: five sizes (190 M, 370 M, 760 M, 1.3 B, 3.2 B
parameters), each trained at five lengths (0.5, 1, 2, 5 and 10 times 20 tokens per parameter,
"0.5xC" to "10xC"), every run a cosine schedule with warmup that decays to 10 % of its peak
learning rate at its own last step; the peak learning rate and batch size set by size. The
paper's ladder is the four sizes to 1.3 B at 1xC-10xC; the 3.2 B and the 0.5xC runs are the same
ladder, added to the repository after (4c37f5b). They are converted here
(bench/data/bhagia2024/README.md: the data, its source, licence and conversion). No constant,
default or rule of andrea was chosen on these runs: they are public runs it was never tuned on,
and every split here is held out. (andrea's task-accuracy estimate follows the paper's two-step
method, analysis/estimates/task_accuracy.py; none of these runs was read for it.)

The protocol, declared before any score on them was computed:
- the loss: the C4 validation loss (`eval/c4_en-validation/CrossEntropyLoss`, nats per token) at
  each run's last step, its final checkpoint, one evaluation as the source gives it; nothing is
  smoothed or averaged. The params: the source's count per size (190,354,176; 371,262,464;
  758,220,288; 1,279,395,840; 3,169,537,280: scripts/ladder_peteish.py's MODEL_PARAMS, from
  which each run's length is set), the tokens: the run's last step times its batch size (the
  source's `throughput/total_tokens`, 0.005-0.28 % past the length: every run takes about ten
  steps past it), the compute 6·params·tokens;
- the runs: all 25, one per size and length; for 1xC the file the source's own
  `scripts/scaling/final_moredata.json` reads (`SIZE-1xC-rerun.csv`: the same run and steps as
  `SIZE-1xC.csv`, evaluated on more sets). Each is a run trained to its tokens (its own schedule
  ends at its last step), not a checkpoint mid-schedule. Not used: the OLMo 2 7B and 13B runs
  whose evaluations sit beside them (`peteish7*`, `peteish13*`: Bhagia et al.'s targets), whose
  batch sizes, learning rates and schedules are not the ladder's rule (trained over 4-5 T
  tokens; the 7B's loss the source's configuration reads comes after a separate anneal), so not
  one recipe with it;
- one split, `olmo_ladder` (`--splits olmo_ladder` names it and its `_auto` twin): the pool the
  four smaller sizes (190 M-1.3 B) at every length, 20 runs; the target the 3.2 B at every
  length, 5 runs. The target lies 2.48x past the pool's largest params; in compute (the pool's
  largest 1.96e21 FLOPs, the 1.3 B at 10xC) from 0.31x (the 3.2 B at 0.5xC) to 6.14x (at 10xC),
  2 of the 5 below the pool's largest (0.5xC and 1xC). In tokens per parameter pool and target
  span the same 10-200 (the 3.2 B at 0.5xC at 10.010, just below the pool's smallest, 10.013:
  the ten steps past the length weigh less in a longer run);
- the law: the registry's `chinchilla` in `olmo_ladder`, and in `olmo_ladder_auto` the law
  `--law auto` chooses on the pool (`pool_law.choose` among the registry's laws whose inputs
  pool and target have), as for Porian et al., Gadre et al., GPT-3 and OPT;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows):
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at
      each target run's own (params, tokens) as `analysis.predict` asks (`python -m
      bench.point_query --splits olmo_ladder`): the relative error of the predicted loss; its
      95 % CI and 90 % PI as andrea gates them (withheld where it withholds, with the reason)
      and ungated (labelled so), each with whether it covers the run's loss and its log-width;
      the factor past the pool in compute and in params. Reported per target run (five), with
      the median and largest |error|, and at the longest (10xC);
  (b) the prediction band's coverage on the 5 target runs (`python -m bench.scalebench
      --coverage --splits olmo_ladder`);
  (c) the planner replay (`python -m bench.scalebench --splits olmo_ladder`): random, cheapest,
      the planner and all runs at 1 %, 5 %, 10 % of the pool's cost, cumulative, 10
      repetitions; the target-region R² the harness computes and the RMS relative error over
      the 5 target runs, the RMS relative error the headline, as for Gadre et al., GPT-3 and
      OPT. Each run is priced 6·params·tokens, as it cost;
  (d) beside them, the paper's own published errors where it states them. We found none to
      compare: Bhagia et al. predict the 7B's and 13B's task losses and accuracies from the
      four smaller sizes, not a ladder run's C4 loss, and the 3.2 B is not among their
      targets.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits

DATA = Path(__file__).parent / "data" / "bhagia2024"
ALIAS = "olmo_ladder"  # `bench.scalebench --splits olmo_ladder`: the split below and its _auto
QUICK = ("olmo_ladder", "olmo_ladder_auto")  # HELDOUT_QUICK's splits (bench.heldout_steps)
SPLIT = "olmo_ladder"
# the pool: the four smaller sizes (the source's names), at every length
POOL_MODELS = ("190M", "370M", "760M", "1B")
TARGET_MODELS = ("3B",)  # the target: every length of the 3.2 B
LOSS = "loss_c4"  # declared before any score was seen
# what bench.point_query asks: each target run's loss at its own (params, tokens); the paper
# states no estimate of a target run's loss to score beside it
QUERY = "runs"
reference = None


def in_pool(models) -> np.ndarray:
    """Which runs are the pool (the module's rule; a size neither pool nor target: an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = run_splits.with_auto(
    SPLIT,
    run_splits.by_model(
        "the OLMo ladder split (Bhagia et al. 2024)",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group="olmo_ladder",
    ),
)
