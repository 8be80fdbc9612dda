"""Six OPT models' validation perplexity along training as a held-out split: which checkpoints,
and how pool and target part.

Zhang, Roller, Goyal, Artetxe, Chen, Chen, Dewan, Diab, Li, Lin, Mihaylov, Ott, Shleifer,
Shuster, Simig, Koura, Sridhar, Wang & Zettlemoyer 2022, "OPT: Open Pre-trained Transformer
Language Models" (arXiv 2205.01068): decoder-only models of one recipe and one pretraining
corpus, 125 M to 175 B parameters, each scheduled over 300 B tokens. Xia, Artetxe, Zhou, Lin,
Pasunuru, Chen, Zettlemoyer & Stoyanov 2023 ("Training Trajectories of Language Models Across
Scales", ACL 2023, arXiv 2212.09803) evaluated the validation perplexity of intermediate
checkpoints of six of them (125 M, 1.3 B, 6.7 B, 13 B, 30 B, 175 B), and Choshen, Zhang &
Andreas 2024 ("A Hitchhiker's Guide to Scaling Law Estimation", arXiv 2410.11840; github
IBM/ColPret at 16f23bb, MIT licence) collected those; they are converted here
(bench/data/zhang2022/README.md: the data, its source, licence and conversion). No constant,
default or rule of andrea was chosen on these runs: they are public runs it was never tuned on,
and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: the natural log of the validation perplexity (`loss_val`, nats per token), one
  evaluation per checkpoint as the source gives it; nothing is smoothed or averaged. The params:
  the nominal size (125 M, 1.3 B, 6.7 B, 13 B, 30 B, 175 B; the source's FLOPs are 6 times
  these times the tokens), the tokens: the step times the model's batch size (OPT's Table 1),
  the compute 6·params·tokens;
- the checkpoints: every checkpoint of the source at 30 B tokens or more (114: 125 M 25, 1.3 B
  15, 6.7 B 17, 13 B 16, 30 B 14, 175 B 27; at the source's own uneven steps, up to 260 B for the
  1.3 B and 280 B for the others). Intermediate checkpoints, because every OPT model ran the same
  300 B-token schedule: the last checkpoints alone vary params only. The first 10 % of the
  schedule (before 30 B tokens, 28 checkpoints: every warmup among them) is dropped, as for
  GPT-3 (bench/gpt3_splits.py). A checkpoint is not the loss of a run trained to its tokens: the
  learning rate decays linearly to 10 % over 300 B tokens in every model, and the last
  checkpoints lie before its end. The peak learning rates and batch sizes differ by size, and
  the 175 B's run had mid-flight restarts and learning-rate changes (OPT's Section 2.5): kept as
  they are. Pool and target share the schedule, so the split asks the law to extrapolate in
  params (and compute) along one schedule;
- one split, `opt` (`--splits opt` names it and its `_auto` twin): the pool the four smallest
  models (125 M-13 B) at every kept checkpoint, 73 checkpoints; the target the 30 B and the
  175 B at every kept checkpoint, 41 checkpoints. The target lies 2.3x (30 B) and 13.5x (175 B)
  past the pool's largest params; in compute (the pool's largest 2.18e22 FLOPs, the 13 B at
  280 B) from 0.33x (the 30 B at 40 B) to 13.5x (the 175 B at 280 B), 5 of the 41 below the
  pool's largest (the 30 B up to 120 B tokens). In tokens per parameter the pool spans
  3.1-2,240, the targets 0.18-9.3 (the 175 B's 0.18-1.6 and the 30 B's first three below every
  pool checkpoint's);
- the law: the registry's `chinchilla` in `opt`, and in `opt_auto` the law `--law auto` chooses
  on the pool (`pool_law.choose` among the registry's laws whose inputs pool and target have),
  as for Porian et al., Gadre et al. and GPT-3;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows):
  (a) the point query: the whole pool fitted as `analysis.fit --law LAW` fits it and asked at each
      target checkpoint's own (params, tokens) as `analysis.predict` asks (`python -m
      bench.point_query --splits opt`): the relative error of the predicted loss; its 95 % CI
      and 90 % PI as andrea gates them (withheld where it withholds, with the reason) and
      ungated (labelled so), each with whether it covers the checkpoint's loss and its
      log-width; the factor past the pool in compute and in params. Reported per target model
      (median and largest |error| over its checkpoints) and at its last checkpoint (280 B);
  (b) the prediction band's coverage on the 41 target checkpoints (`python -m bench.scalebench
      --coverage --splits opt`);
  (c) the planner replay (`python -m bench.scalebench --splits opt`): random, cheapest, the
      planner and all runs at 1 %, 5 %, 10 % of the pool's cost, cumulative, 10 repetitions;
      the target-region R² the harness computes and the RMS relative error over the 41 target
      checkpoints, the RMS relative error the headline, as for Gadre et al. and GPT-3. Each
      checkpoint is priced as the harness prices a row, 6·params·tokens, as if it were a run of
      its own; in OPT's training a checkpoint came with the one run, so the replay's budgets are
      the harness's convention, not what the checkpoints cost;
  (d) beside them, the papers' own published errors where they state them. They state none to
      compare: neither Zhang et al. nor Xia et al. fit a scaling law to these curves or predict
      a larger model's loss from smaller ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench import run_splits

DATA = Path(__file__).parent / "data" / "zhang2022"
ALIAS = "opt"  # `bench.scalebench --splits opt`: the split below and its _auto twin
QUICK = ("opt", "opt_auto")  # HELDOUT_QUICK's splits (bench.heldout_steps)
SPLIT = "opt"
# the pool: the four smallest models (the source's names), at every kept checkpoint
POOL_MODELS = ("125m", "1.3b", "6.7b", "13b")
TARGET_MODELS = ("30b", "175b")  # the target: every kept checkpoint of these
LOSS = "loss_val"  # declared before any score was seen
# what bench.point_query asks: each target checkpoint's loss at its own (params, tokens); the
# papers state no estimate of a checkpoint's loss to score beside it
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
        "the OPT split (Zhang et al. 2022, evaluated by Xia et al. 2023)",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group="opt",
    ),
)
