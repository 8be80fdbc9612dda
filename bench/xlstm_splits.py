"""Beck et al. 2025's Transformer isoFLOP runs at three context lengths as held-out splits: which
runs, and how pool and target part.

Beck, Schweighofer, Böck, Lehner & Hochreiter, "xLSTM Scaling Laws: Competitive Performance with
Linear Time-Complexity" (arXiv 2510.02228; ICLR 2026), trained dense Llama-style Transformers
(SwiGLU, untied output head, the GPT-NeoX vocabulary padded to 50,304, DCLM text) and xLSTMs on
isoFLOP lines. github.com/NX-AI/xlstm_scaling_laws at commit 604bb30 holds each Transformer run's
W&B record at context 2048, 8192 and 16384 (`data/isoflop_llama_ctx*_wandb_data.pkl`; the
xLSTM's context-8192 file is absent from the snapshot here, and the xLSTM is not the model
andrea's laws are for). That repository has no licence, so nothing of it is shipped with andrea:
the splits read a runs.csv that bench/data/beck2025xlstm/convert.py writes from the user's clone
(bench/data/beck2025xlstm/README.md: the source, each column, what could not be established),
passed as `--source DIR`. No constant, default or rule of andrea was chosen on these runs: they
are public runs it was never tuned on, declared held out for the planner, the band and the law
choice.

The protocol, declared before any score on them was computed. What was read first: the files'
layout, each run's name, config, logged parameter count, batch and final validation loss (the
converter's checks print nothing else; the final losses were listed while the layout was read).
No law was fitted, no prediction made, no loss compared with one.
- the rows: one per run (a run's W&B records joined as the authors join them), **the runs the
  authors' figures use**: finished (the last validation loss at the step count the name
  declares: 6 of 269 are not), less the authors' own exclusions where they can be restated
  without their FLOP count (a loss spike at context 2048, a loss of 3.5 or more at 8192: one run
  each; convert.py's docstring). 261 runs. Each (params, tokens) once; one seed a run and one
  peak learning rate a run, set by the authors from its size label: 0.003 up to the 400M label
  (84-483 M params), 0.001 from the 500M to the 1.1B (498 M-1.34 B), 0.0008 for the 1.4B and
  1.8B, and for the 1.1B on the 1e20 line at context 8192 (1.11-2.33 B); so no replicate
  measures the noise;
- the loss: `loss_dclm`, the final `val/.dclm_loss` (nats per token on DCLM validation text);
  the params: every parameter, input embedding and untied output head included, as the training
  code logs it (convert.py recounts it from the config and checks the two agree at every run);
  the tokens: steps x global batch x context; the compute 6·params·tokens, which leaves out the
  attention's FLOPs the authors' budgets count (so each isoFLOP line spreads over 0.5-0.8x its
  nominal budget in 6ND, more at the longer contexts);
- the splits, one per context, `xlstm_ctx2048`, `xlstm_ctx8192`, `xlstm_ctx16384` (`--splits
  xlstm` names them and their `_auto` twins), each parted by budget: **the target the highest
  isoFLOP budget's runs, the pool the lower budgets' runs**:
  - ctx2048: pool 6e18 and 1e19, 49 runs of 27 sizes; target 3e19, 35 runs; 2.36-2.93x past the
    pool's largest compute, 11 of 35 past its largest params (up to 2.41x);
  - ctx8192: pool 6e18, 1e19 and 3e19, 80 runs of 38 sizes; target 1e20, 27 runs; 2.77-3.29x
    past in compute, 4 of 27 past in params (up to 1.48x);
  - ctx16384: pool 6e18 and 1e19, 34 runs of 21 sizes; target 3e19, 36 runs; 2.41-3.31x past in
    compute, 18 of 36 past in params (up to 3.53x).
  The three contexts are one sweep (one team, code and data) and count as one sweep for every
  candidate rule, as Pandey's five gzip splits did: a candidate "changes something" on it if it
  does on any of the three, and its conditions are judged on every split where it does;
- the law: the registry's `chinchilla` in each split, and in each `_auto` twin the law `--law
  auto` chooses on the pool, as for misfit and oellm;
- 21-38 sizes in each pool: the `sizes` band rule (the default) and the candidate law choice
  `sizes` can cut by params;
- the scores, all with andrea's fit only, each command run once, one at a time, with
  OMP_NUM_THREADS=1 and `--source DIR` the folder convert.py wrote from 604bb30, at the commit
  that registers the splits, before any change to andrea:
  (a) the point query (`python -m bench.point_query --splits xlstm`): each target run's loss at
      its own (params, tokens) as `analysis.predict` asks, the relative error, the 95 % CI and
      90 % PI as andrea gates them (withheld where it withholds, with the reason) and ungated,
      covers or not and log-width, the factor past the pool; per split the median and largest
      |error| over the targets and their sign;
  (b) the prediction band's coverage (the 90 % interval, the default `sizes` rule) on each
      split's targets (`python -m bench.scalebench --coverage --splits xlstm`), where andrea
      gives it and over all, with its median log-width; no other band rule is run before;
  (c) the planner replay (`python -m bench.scalebench --splits xlstm --jobs 1`): random,
      cheapest, the planner (its default first budget, `cheapest`) and all runs at 1 %, 5 %,
      10 % of the pool's cost (6·params·tokens, each run its own training run), 10 repetitions;
      the RMS relative error over the targets the headline, the target-region R² beside it;
  (d) the law choice: `python -m bench.law_choice_why --splits xlstm` with the default, with
      `--law-choice monotone` and with `--law-choice sizes`, and `python -m bench.point_query
      --splits xlstm --out D.csv` against the same with `--law-choice sizes --out S.csv` (and
      `--law-choice monotone --out M.csv` where `monotone` changes the choice), each candidate
      judged by its own adoption rule in docs/laws.md, `monotone`'s count by docs/held_out.md's
      "Two deciding sweeps, one pass" (this would be its third deciding sweep);
  (e) the planner has no candidate now (`--pilot cheapest` was adopted); `--pilot spread`, the
      default before, is run once beside (c) as a measurement, deciding nothing;
  (f) the CI's gate, from (a): the gated CI is withheld past the pool's params or tokens; the
      ungated CI's coverage is reported;
  (g) the paper's own fits (its tables and the repository's `data_lnd_fits/`) were not read
      before the scores: none is put beside these.
- what limits it: one seed a run; the target lies 2.4-3.3x past the pool in compute, a short
  reach next to Marin's or Gadre's; the learning rate steps with size (above), so part of what
  a law sees as size is the rate, and the 1.1B label's rate differs between pool and target at
  context 8192; the compute leaves out attention, which at context 16384 is
  comparable to 6·params (above); the three splits share code and data, so they are not three
  independent sweeps.
"""

from __future__ import annotations

import numpy as np

from bench import run_splits
from bench.run_splits import PARAMS_TOKENS, RunSplit

DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
SOURCE_ENV = "ANDREA_XLSTM_DIR"  # bench/heldout.sh's --source: the folder convert.py wrote
NOT_SHIPPED = (
    "Beck et al. 2025's xLSTM-paper Transformer runs are not shipped: "
    "bench/data/beck2025xlstm/README.md"
)
COMMIT = "604bb3062d3a7681bb33e467108cb0a6f81267fc"
FETCH = (
    "Beck et al. 2025's Transformer isoFLOP runs are not shipped with andrea (the repository "
    "that holds them has no licence); get them with `git clone "
    "https://github.com/NX-AI/xlstm_scaling_laws && python bench/data/beck2025xlstm/convert.py "
    f"xlstm_scaling_laws --commit {COMMIT[:7]} --out DIR` (it needs pandas) and pass DIR as "
    "--source"
)
ALIAS = "xlstm"  # `--splits xlstm`: the three splits below and their _auto twins
QUICK = ("xlstm_ctx8192", "xlstm_ctx8192_auto")  # HELDOUT_QUICK's (bench.heldout_steps)
LOSS = "loss_dclm"  # declared before any score was seen: the final validation loss
QUERY = "runs"  # bench.point_query: each target run's loss at its own (params, tokens)
reference = None  # the paper's fits were not read; no held-out prediction to put beside
# context -> (the pool's budgets, the target's budget): the highest budget is the target
BUDGETS = {
    2048: (("6e18", "1e19"), ("3e19",)),
    8192: (("6e18", "1e19", "3e19"), ("1e20",)),
    16384: (("6e18", "1e19"), ("3e19",)),
}


def split_name(context: int) -> str:
    return f"xlstm_ctx{context}"


def in_pool(budgets, context: int) -> np.ndarray:
    """Which runs are the pool: the lower budgets (a budget neither pool nor target: an error)."""
    pool, target = BUDGETS[context]
    return run_splits.models_in_pool(budgets, pool, target, what="budgets")


def _split(context: int) -> RunSplit:
    return RunSplit(
        who=f"the Beck et al. 2025 Transformer split at context {context}",
        file="runs.csv",
        columns=("context", "kept", "budget", *PARAMS_TOKENS, LOSS),
        where=(("context", str(context)), ("kept", "1")),
        numeric=(*PARAMS_TOKENS, LOSS),
        loss=LOSS,
        in_pool=lambda cols: in_pool(cols["budget"], context),
        group=split_name(context),
        fetch=FETCH,
    )


# split name -> its runs (each `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: split
    for context in BUDGETS
    for name, split in run_splits.with_auto(split_name(context), _split(context)).items()
}
