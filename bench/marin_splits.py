"""The Marin scaling ladder's isoFLOP sweeps (three pretraining mixes) as held-out splits: which
runs, and how pool and target part.

The Marin project's scaling ladder (marin-community/marin, experiment 2166, wandb report
"Scaling Ladders", https://wandb.ai/marin-community/marin/reports/Scaling-Ladders--VmlldzoxNTc0MjM1NQ;
we know of no paper with an arXiv id that states these runs): Llama-style decoder-only models of
one recipe, 22 shapes from d512-L6 (157 M parameters with the embeddings) to d4096-L40 (11.8 B),
trained at isoFLOP budgets (named 6e17 to 1e20 in the run names, which count about 2·N·D) on
three mixes, comma, dclm and nemotron; each run is trained to its own tokens, the learning rate
and batch size set per run by the ladder. The evaluation: the Paloma macro-averaged loss
(Magnusson et al. 2023, "Paloma: A Benchmark for Evaluating Language Model Fit", arXiv
2312.10523), `eval/paloma/macro_loss`, at the run's end. The runs' table is vendored, as the
wandb export, in github.com/Open-Athena/scaling-law-analysis at commit 3e0656e
(`data/isoflops/extract/marin_202603/raw/isoflop-{comma,dclm,nemotron}.csv`). That repository
has no licence, so nothing of it is shipped with andrea: the splits read a runs.csv that
bench/data/marin2026/convert.py writes from the user's clone (bench/data/marin2026/README.md),
passed as `--source DIR`. No constant, default or rule of andrea was chosen on these runs: they
are public runs it was never tuned on, and every split here is held out.

The protocol, declared before any score on them was computed:
- the loss: `eval/paloma/macro_loss` as the export gives it (one evaluation at the run's end,
  nats per token, macro-averaged over Paloma's sources); nothing smoothed or averaged. The
  params: `parameter_count` (with the embeddings; 156.5 M to 11.79 B), the tokens:
  `throughput/total_tokens`, the compute 6·params·tokens (the run names' budgets are not read:
  they count about 2·N·D);
- the runs: every run of the three files but the `validation-optimal` ones (one per budget in
  comma and nemotron, named in another FLOP convention and repeating a shape of the sweep, as
  the source's own extraction drops them): 85 (comma), 85 (dclm), 88 (nemotron), 258 in all, the
  same 22 shapes in each, each shape at one to eight budgets;
- three splits, one per mix S, `marin_<S>` (`--splits marin` names them and their `_auto`
  twins): the pool the 15 shapes below 3 B parameters (d512-L6 to d2304-L23, 157 M-2.54 B,
  16.3x apart: 62 runs in comma and dclm, 65 in nemotron), the target the seven shapes of 3 B
  and more (d2560-L26 to d4096-L40, 3.38-11.79 B), 23 runs in each: a new larger size, the
  question a user asks. The target lies 1.33x to 4.63x past the pool's largest params; in
  compute all 23 lie below the pool's largest (4.04e20, d512-L6 at the 1e20 budget), 0.07x to
  0.70x of it; in tokens per parameter the pool spans 0.44-2,751 and the target 0.10-4.1, 10 of
  the 23 below every pool run's (the large shapes at the low budgets);
- the law: the registry's `chinchilla` in `marin_<S>`, and in `marin_<S>_auto` the law `--law
  auto` chooses on the pool, as for Gemstones and the OLMo ladder;
- the scores, all with andrea's fit only (no benchmark fitter, no published rows), each command
  run once, one at a time, with OMP_NUM_THREADS=1, `--source DIR` the folder convert.py wrote:
  (a) the point query (`python -m bench.point_query --splits marin`): the whole pool fitted and
      asked at each target run's own (params, tokens): the relative error, the 95 % CI and
      90 % PI as andrea gates them and ungated, their coverage and log-width, the factor past
      the pool in compute and params; per split, the median and largest |error| over its 23;
  (b) the prediction band's coverage (the 90 % interval, the `log` rule, the default when this
      was declared) on the target runs (`python -m bench.scalebench --coverage --splits marin`),
      where andrea gives it and over all; no other band rule is run on these splits before it is
      declared;
  (c) the planner replay (`python -m bench.scalebench --splits marin --jobs 2`): random,
      cheapest, the planner and all runs at 1 %, 5 %, 10 % of the pool's cost (6·params·tokens),
      cumulative, 10 repetitions; the RMS relative error over the target runs the headline;
  (d) the law choice: `python -m bench.law_choice_why --splits marin` and the same with
      `--law-choice monotone`: docs/laws.md's adoption rule for `monotone` applied as written;
  (e) the CI's gate, from (a);
  (f) the source states no held-out error to compare.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bench import run_splits

DATA = None  # not shipped: read from --source (`scalebench_splits.load_split`)
SOURCE_ENV = "ANDREA_MARIN_DIR"  # bench/heldout.sh's --source: the folder convert.py wrote
NOT_SHIPPED = "the Marin scaling ladder's runs are not shipped: bench/data/marin2026/README.md"
COMMIT = "3e0656ee3dce1a2c89aa67691920f5eb9d30f0fc"
FETCH = (
    "the Marin scaling ladder's runs are not shipped with andrea (the repository that holds them "
    "has no licence); get them with `git clone https://github.com/Open-Athena/scaling-law-analysis"
    f" && python bench/data/marin2026/convert.py scaling-law-analysis --commit {COMMIT[:7]} --out "
    "DIR` and pass DIR as --source"
)
ALIAS = "marin"  # `--splits marin`: the three splits below and their _auto twins
QUICK = ("marin_dclm", "marin_dclm_auto")  # HELDOUT_QUICK's, one mix of 3 (bench.heldout_steps)
DATASETS = ("comma", "dclm", "nemotron")
# the pool: the 15 shapes below 3 B parameters
POOL_MODELS = (
    "d512-L6",
    "d640-L7",
    "d768-L8",
    "d896-L10",
    "d1024-L11",
    "d1152-L12",
    "d1280-L13",
    "d1408-L15",
    "d1536-L16",
    "d1664-L17",
    "d1792-L18",
    "d1920-L19",
    "d2048-L21",
    "d2176-L22",
    "d2304-L23",
)
# the target: the seven shapes of 3 B parameters and more, every run of each
TARGET_MODELS = (
    "d2560-L26",
    "d2816-L28",
    "d3072-L30",
    "d3328-L33",
    "d3584-L35",
    "d3840-L37",
    "d4096-L40",
)
LOSS = "loss_paloma"  # declared before any score was seen
QUERY = "runs"  # bench.point_query: each target run's loss at its own (params, tokens)
reference = None  # the source states no estimate of a held-out run's loss


def split_name(dataset: str) -> str:
    return f"marin_{dataset}"


def in_pool(models) -> np.ndarray:
    """Which runs are the pool (the module's rule; a model neither pool nor target: an error)."""
    return run_splits.models_in_pool(models, POOL_MODELS, TARGET_MODELS)


def _split(dataset: str) -> run_splits.RunSplit:
    split = run_splits.by_model(
        f"a Marin scaling ladder split ({dataset})",
        LOSS,
        POOL_MODELS,
        TARGET_MODELS,
        group=dataset,
        where=(("data", dataset),),
    )
    return dataclasses.replace(split, fetch=FETCH)


# split name -> its runs (its `_auto` twin: the same, fitted with --law auto's choice)
SPLITS = {
    name: runs
    for d in DATASETS
    for name, runs in run_splits.with_auto(split_name(d), _split(d)).items()
}
