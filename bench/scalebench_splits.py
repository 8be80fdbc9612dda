"""ScaleBench's splits as `bench.scalebench` replays them: data, law, cost, budgets, dev or not.

The splits of Li et al. 2026 ("Spend Less, Fit Better", arXiv 2604.22753; github PlanarG/active-sl,
`benchmark/dataset/*`), copied with their licence to bench/data/active_sl/ (its README: source
commit, columns, units). A split's training runs are the candidate pool and its test runs the
target region; a split with a `group` column (parallel: two corpora; sparsity: three token
budgets) is replayed group by group, each with its own pool, budget and fit, and scored on all
its target runs at once, as the benchmark's runner does.

The held-out splits of public runs ScaleBench does not hold (bench/run_splits.py) come from the
modules of `RUN_SPLITS`, the one list of them: each module's docstring holds its source, its
protocol, declared before any score, and how pool and target part; its runs are either copied
with their licence to its `DATA` folder under bench/data/, or, with no licence to copy them, read
from the folder named by `--source` (`DATA = None`; its `FETCH` says how to make that folder).
Each split also has its `_auto` twin, fitted with the law `--law auto` chooses on its pool.
`--splits ALIAS` names a module's splits that the command scores (`aliases`; every command's
`--help` lists the aliases); docs/held_out.md's table lists every sweep with its marks. They are
not replayed by default.

DEV (and, for one rule each, BAND_DEV, PLANNER_DEV and LAW_CHOICE_DEV) are declared here, not
chosen by a flag; every split not named there is held out. A split is dev when something of
andrea's (a constant, a default, a rule) was chosen after looking at its scores. A constant
changed after a held-out split's score has been seen moves that split to DEV, with the reason.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from analysis.estimates.pool_law import candidates, choose
from analysis.fits import law_registry
from analysis.fits.law_registry import get as get_law
from analysis.fits.laws import Law
from bench import (
    alabdulmohsin_splits,
    gadre_splits,
    gemstones_splits,
    gpt3_splits,
    l2l_splits,
    llama3_splits,
    marin_splits,
    misfit_splits,
    oellm_splits,
    olmo_ladder_splits,
    opt_splits,
    pandey_splits,
    porian_splits,
    xlstm_splits,
)
from bench.run_splits import PARAMS_TOKENS, RunSplit

DATA = Path(__file__).parent / "data" / "active_sl"
FRACTIONS = (0.01, 0.05, 0.10)  # the benchmark's default budget checkpoints, cumulative


def _six_nd(c):
    return 6.0 * c["params"] * c["tokens"]


@dataclass(frozen=True)
class Spec:
    law: str  # the registry's name of the law the split is fitted with
    cost: Callable[[dict], np.ndarray]  # the benchmark's cost proxy of a run, from its columns
    cost_columns: tuple[str, ...]
    fractions: tuple[float, ...] = FRACTIONS
    # The benchmark's bounds for its fitter's random starts, where the law's own differ; None:
    # the law's. `no_benchmark_fit`: why the benchmark's fitter does not score the split.
    benchmark_bounds: tuple | None = None
    no_benchmark_fit: str | None = None
    # the folder its files are read from, unless the caller names another; None: not shipped,
    # read from the caller's `source`
    data: Path | None = DATA
    # the rows of a file of runs that are the split, and its pool (bench/run_splits.py); None:
    # <name>_train.csv and <name>_test.csv
    runs: RunSplit | None = None


# The benchmark's bounds of the Farseer law, in the registry's parameter order (s, q, S, B, b, Q,
# A, a, E): the signs of the exponents are fixed (q > 0, b < 0, a > 0).
FARSEER_BOUNDS = (
    (-1.0, 0.3),
    (0.01, 0.5),
    (-1.0, 1.0),
    (10.0, 1000.0),
    (-0.6, -0.01),
    (-5.0, 1.0),
    (-5.0, 1.0),
    (0.001, 0.25),
    (1.0, 6.0),
)

SPLITS = {
    "farseer": Spec("farseer", _six_nd, ("params", "tokens"), benchmark_bounds=FARSEER_BOUNDS),
    "data_constrained": Spec(
        "data_constrained",
        _six_nd,
        ("params", "tokens"),
        no_benchmark_fit="its ten law instances are none of them the registry's "
        "data_constrained (Muennighoff et al. 2023, one decay for repeated tokens)",
    ),
    "vocab": Spec(
        "scalebench_vocab", lambda c: c["params"] * c["characters"], ("params", "characters")
    ),
    "lr_bsz": Spec("scalebench_lr_bsz", _six_nd, ("params", "tokens")),
    "moe": Spec("scalebench_moe", lambda c: c["params"] * c["experts"], ("params", "experts")),
    "parallel": Spec("scalebench_parallel", lambda c: c["params"], ("params",)),
    "sparsity": Spec(
        "scalebench_sparsity",
        lambda c: (
            6.0 * c["dense_params"] * c["dense_tokens"]
            + 6.0 * c["active_params"] * c["sparse_tokens"]
        ),
        ("dense_params", "dense_tokens", "active_params", "sparse_tokens"),
        fractions=(0.20, 0.35, 0.50),  # the benchmark's checkpoints for this split
    ),
}

SCALEBENCH = tuple(SPLITS)  # the default of `bench.scalebench --splits`

NOT_SCALEBENCH = "not a ScaleBench split: no benchmark fitter or published rows"
# the modules of held-out splits of public runs
RUN_SPLITS = (
    porian_splits,
    gadre_splits,
    l2l_splits,
    gpt3_splits,
    opt_splits,
    olmo_ladder_splits,
    gemstones_splits,
    marin_splits,
    alabdulmohsin_splits,
    pandey_splits,
    misfit_splits,
    oellm_splits,
    xlstm_splits,
    llama3_splits,
)
for _module in RUN_SPLITS:
    SPLITS.update(
        {
            name: Spec(
                "chinchilla",  # each module's declared law; its `_auto` split: --law auto's
                _six_nd,
                PARAMS_TOKENS,
                no_benchmark_fit=NOT_SCALEBENCH,
                data=_module.DATA,
                runs=runs,
            )
            for name, runs in _module.SPLITS.items()
        }
    )


def aliases(score: str) -> dict[str, tuple[str, ...]]:
    """The names `--splits` expands in the command `score` (run_splits.SCORES): each module's
    ALIAS, to its splits that the command scores."""
    return {
        m.ALIAS: tuple(n for n, runs in m.SPLITS.items() if score in runs.scores)
        for m in RUN_SPLITS
    }


def aliases_text() -> str:
    """The held-out sweeps' aliases as the commands' `--splits` help names them."""
    return ", ".join(m.ALIAS + (" (with --source)" if m.DATA is None else "") for m in RUN_SPLITS)


def add_source_argument(p: argparse.ArgumentParser) -> None:
    """--source DIR: where the splits not shipped are read from (each module of RUN_SPLITS whose
    DATA is None: bench/l2l_splits.py's a checkout of the authors' repository, the others' the
    folder their bench/data/<name>/convert.py wrote), default the environment's
    `l2l_splits.SOURCE_ENV`."""
    converted = [m.ALIAS for m in RUN_SPLITS if m.DATA is None and m is not l2l_splits]
    p.add_argument(
        "--source",
        type=Path,
        default=os.environ.get(l2l_splits.SOURCE_ENV) or None,
        help="a checkout of github.com/KempnerInstitute/loss-to-loss-notebooks at 457ce81, for "
        f"--splits l2l (not shipped: no licence; default ${l2l_splits.SOURCE_ENV}); for --splits "
        f"{', '.join(converted)} (not shipped either), the folder the sweep's "
        "bench/data/<name>/convert.py wrote (its README says how)",
    )


# Dev splits and why; every other split is held out.
DEV = {
    # The planner's discrepancy sd and scale, its cost exponent and its least-squares solver were
    # chosen on Farseer's scores (docs/planner.md, "What changed").
    "farseer": "the planner's discrepancy sd and scale, cost exponent and solver were chosen on it",
    # The scaled Huber delta (fit_law_scaled_huber) was chosen on a data-constrained selection,
    # and the discrepancy settings checked on its scores (docs/planner.md).
    "data_constrained": "the scaled Huber delta was chosen on it and the planner checked on it",
}

# Splits dev for the prediction band's coverage alone (`bench.scalebench --coverage`), and why:
# their planner rows stay as DEV says. Their band coverage decided a change of the band's
# extrapolation factor (rejected by the rule declared before it was measured: docs/laws.md).
# The public sweeps' splits too: their band coverage was used to design and compare a candidate
# band rule, "drift" (2026-12-07; docs/laws.md, "A candidate band rule"), and GPT-3's and OPT's
# band coverage decided that it is not adopted.
BAND_DEV = {
    **{
        name: "its band coverage decided whether the band's factor should count how far an input "
        "lies outside the pool's range (measured 2026-12-04, rejected by the rule set beforehand)"
        for name in ("vocab", "lr_bsz", "moe", "parallel", "sparsity")
    },
    **{
        name: "its band coverage was used to design and compare the candidate band rule drift "
        "(2026-12-07, docs/laws.md)"
        for module in (porian_splits, gadre_splits, l2l_splits)
        for name in module.SPLITS
    },
    **{
        name: "its band coverage decided, by the rule declared beforehand, that the candidate "
        "band rule drift is not adopted (2026-12-07, docs/laws.md)"
        for module in (gpt3_splits, opt_splits)
        for name in module.SPLITS
    },
    **{
        name: "its band coverage was used to design and compare the band rule sizes "
        "(2026-12-07, docs/laws.md)"
        for name in gemstones_splits.SPLITS
    },
    **{
        name: "its band coverage decided, by the rule declared beforehand, that the band rule "
        "sizes is adopted as the default (2026-12-07, docs/laws.md)"
        for name in marin_splits.SPLITS
    },
}

# Splits dev for the planner alone (their band coverage keeps its mark), and why: the replay's
# first-budget pilot changed after their planner rows had been seen, and their rows changed with
# it (docs/planner.md, "A pilot the first budget's share cannot hold"); misfit's planner rows
# were scored with the candidate first budget --pilot cheapest by its rule, which it passed
# there, not adopted on that pass after failing on gzip (docs/held_out.md, "Two deciding sweeps,
# one pass"); oellm's planner rows were its third deciding sweep, which it passed too, so by that
# rule it is adopted, the default since its own commit (design.PILOTS). These marks are the
# spread pilot's, the default when every planner row so far was measured (docs/held_out.md);
# llama3's planner rows are the default cheapest's, beside which --pilot spread, a candidate to
# return as the default, was scored by its rule (docs/planner.md, "After the switch").
PLANNER_DEV = {
    **{
        name: "the replay's first-budget pilot rule changed after its planner scores were seen "
        "(2026-12-04), and its planner rows changed with it"
        for name in ("sparsity", *(n for n in l2l_splits.SPLITS if "_c80" in n))
    },
    **{
        name: "its planner rows scored the candidate first budget --pilot cheapest by its rule, "
        "which --pilot cheapest passed (2026-12-07, docs/planner.md; not adopted on that pass, "
        "adopted after oellm: docs/held_out.md)"
        for name in misfit_splits.SPLITS
    },
    **{
        name: "its planner rows scored the candidate first budget --pilot cheapest by its rule, "
        "its third deciding sweep, which it passed: adopted, two passes of three (2026-12-07, "
        "docs/planner.md; docs/held_out.md, 'Two deciding sweeps, one pass')"
        for name in oellm_splits.SPLITS
    },
    **{
        name: "its planner rows scored the candidate first budget --pilot spread by its rule, its "
        "first deciding sweep, which it failed (2026-12-08, docs/planner.md; docs/held_out.md, "
        "'Two deciding sweeps, one pass')"
        for name in llama3_splits.SPLITS
    },
    # the default first budget, cheapest, was designed on Gadre's planner rows and failed its rule
    # on Pandey's; their held-out planner tables are the spread pilot's, the default then
    **{
        name: "the default first budget --pilot cheapest was designed on its planner rows "
        "(2026-12-06, docs/planner.md); its table is the spread pilot's, the default then"
        for name in gadre_splits.SPLITS
    },
    **{
        name: "the default first budget --pilot cheapest was scored on it by its rule and failed "
        "(2026-12-07, docs/planner.md); its table is the spread pilot's, the default then"
        for name in pandey_splits.SPLITS
    },
}

# Splits dev for the law choice (`--law auto`: `law_choice.LAW_CHOICES`; bench.law_choice_why,
# the `_auto` twins of bench.point_query and --coverage), and why: every public sweep's, each used
# to design a candidate law choice or scored with one by its adoption rule (docs/laws.md, "A
# candidate law choice, monotone" and "... sizes"); ScaleBench's own splits too. A new sweep is
# held out for it until then.
LAW_CHOICE_DEV = {
    **{
        name: "used to design the candidate law choice monotone (2026-12-07: docs/laws.md, 'A "
        "candidate law choice, monotone', its dev figures)"
        for name in SCALEBENCH
    },
    **{
        name: "used to design the candidate law choice monotone (its Farseer choices, 2026-12-07: "
        "docs/laws.md, 'Why --law auto chose Farseer on OPT's and Gadre's pools')"
        for module in (gadre_splits, gpt3_splits, opt_splits)
        for name in module.SPLITS
    },
    **{
        name: "the candidate law choice monotone's dev figures were measured on it (2026-12-07)"
        for module in (porian_splits, l2l_splits)
        for name in module.SPLITS
    },
    **{
        name: "the candidate law choice monotone was scored on it by its adoption rule "
        "(2026-12-07; it said nothing), and sizes measured on it as dev"
        for module in (olmo_ladder_splits, gemstones_splits, marin_splits)
        for name in module.SPLITS
    },
    **{
        name: "the candidate law choices monotone and sizes were scored on it by their adoption "
        "rules (2026-12-07; both said nothing), and the unstable check's constants set on it"
        for name in alabdulmohsin_splits.SPLITS
    },
    **{
        name: "the candidate law choices monotone and sizes were scored on it by their adoption "
        "rules (2026-12-07: monotone changed gzip_061's choice and was not adopted, sizes said "
        "nothing)"
        for name in pandey_splits.SPLITS
    },
    **{
        name: "the candidate law choices monotone and sizes were scored on it by their adoption "
        "rules (2026-12-07: monotone changed its choice, farseer to chinchilla, and passed its "
        "rule, not adopted after failing on gzip; sizes said nothing)"
        for name in misfit_splits.SPLITS
    },
    **{
        name: "the candidate law choices monotone and sizes were scored on it by their adoption "
        "rules (2026-12-07: both chose chinchilla, as the default did, so it said nothing about "
        "either and does not count for monotone)"
        for name in oellm_splits.SPLITS
    },
    **{
        name: "the candidate law choices monotone and sizes were scored on it by their adoption "
        "rules (2026-12-07: on xlstm_ctx2048 both changed the choice, farseer to chinchilla, and "
        "both failed: monotone's third deciding sweep, one pass of three, so it is dropped)"
        for name in xlstm_splits.SPLITS
    },
    **{
        name: "the candidate law choice sizes was scored on it by its adoption rule (2026-12-08: "
        "it chose chinchilla, as the default did, so it said nothing and is not counted; "
        "monotone, dropped, not run)"
        for name in llama3_splits.SPLITS
    },
}

# ScaleBench's splits not replayed, and why (printed by every run).
SKIPPED = {
    "domain_mixture": "five losses per run (one per domain) fitted jointly by one law, and mixture "
    "proportions of 0: andrea's laws predict one positive loss from positive inputs",
    **{
        name: "absent from the released benchmark (github PlanarG/active-sl at e0a58ff: its "
        "authors deleted it before release, and the dataset's CC-BY-4.0 card covers the eight "
        "released splits only); no published rows"
        for name in ("chinchilla", "distillation", "sae", "sft", "easy_question")
    },
}

# Published target-region R² (mean, sd) at the split's three budgets, and the fit to all data:
# Table 2 of Li et al. 2026 as their repository's README reproduces it. Rows average the
# benchmark's law instances of the split (one instance only for Farseer).
PUBLISHED = {
    "lr_bsz": {
        "Random": ((-0.65, 0.49), (-0.45, 0.61), (-0.33, 0.66)),
        "Cheapest": ((-0.92, 0.29), (-0.88, 0.34), (-0.8, 0.46)),
        "Cost Rand": ((-0.89, 0.31), (-0.79, 0.43), (-0.79, 0.39)),
        "D-opt": ((-0.92, 0.23), (-0.66, 0.57), (-0.53, 0.57)),
        "V-opt": ((-0.7, 0.47), (-0.06, 0.59), (0.18, 0.54)),
        "Li et al. (MSPE)": ((-0.66, 0.53), (0.0, 0.59), (0.22, 0.55)),
        "All Data": ((0.04, 0.67),),
    },
    "vocab": {
        "Random": ((0.54, 0.57), (0.53, 0.62), (0.59, 0.54)),
        "Cheapest": ((0.3, 0.71), (0.53, 0.62), (0.55, 0.63)),
        "Cost Rand": ((0.86, 0.38), (0.89, 0.27), (0.83, 0.34)),
        "D-opt": ((0.95, 0.03), (0.97, 0.01), (0.97, 0.0)),
        "V-opt": ((0.96, 0.02), (0.97, 0.0), (0.98, 0.0)),
        "Li et al. (MSPE)": ((0.96, 0.02), (0.98, 0.0), (0.98, 0.0)),
        "All Data": ((0.93, 0.16),),
    },
    "parallel": {
        "Random": ((-1.0, 0.0), (0.27, 0.02), (0.19, 0.01)),
        "Cheapest": ((-1.0, 0.0), (0.42, 0.03), (0.42, 0.03)),
        "Cost Rand": ((-1.0, 0.0), (0.03, 0.87), (0.53, 0.81)),
        "D-opt": ((-1.0, 0.0), (0.7, 0.52), (0.99, 0.0)),
        "V-opt": ((-1.0, 0.0), (0.69, 0.53), (0.99, 0.0)),
        "Li et al. (MSPE)": ((-1.0, 0.0), (0.77, 0.39), (0.99, 0.0)),
        "All Data": ((0.99, 0.0),),
    },
    "moe": {
        "Random": ((-0.47, 0.66), (0.01, 0.72), (0.26, 0.65)),
        "Cheapest": ((0.3, 0.57), (0.74, 0.19), (0.81, 0.14)),
        "Cost Rand": ((-0.11, 0.7), (0.68, 0.33), (0.78, 0.23)),
        "D-opt": ((0.34, 0.54), (0.55, 0.34), (0.74, 0.14)),
        "V-opt": ((0.67, 0.24), (0.8, 0.05), (0.8, 0.11)),
        "Li et al. (MSPE)": ((0.59, 0.39), (0.65, 0.27), (0.83, 0.07)),
        "All Data": ((0.81, 0.04),),
    },
    "data_constrained": {
        "Random": ((-0.74, 0.48), (-0.36, 0.71), (0.12, 0.62)),
        "Cheapest": ((-0.58, 0.64), (-0.56, 0.65), (-0.4, 0.64)),
        "Cost Rand": ((-0.38, 0.7), (-0.39, 0.65), (-0.22, 0.67)),
        "D-opt": ((0.71, 0.43), (0.8, 0.17), (0.77, 0.16)),
        "V-opt": ((0.58, 0.53), (0.83, 0.17), (0.85, 0.13)),
        "Li et al. (MSPE)": ((0.73, 0.37), (0.85, 0.16), (0.86, 0.11)),
        "All Data": ((0.79, 0.23),),
    },
    "sparsity": {
        "Random": ((-0.25, 0.63), (0.37, 0.26), (0.38, 0.25)),
        "Cheapest": ((-0.95, 0.14), (0.04, 0.46), (0.32, 0.2)),
        "Cost Rand": ((-0.41, 0.52), (-0.06, 0.52), (0.12, 0.38)),
        "D-opt": ((-0.07, 0.56), (0.23, 0.32), (0.19, 0.41)),
        "V-opt": ((0.12, 0.53), (0.39, 0.2), (0.51, 0.15)),
        "Li et al. (MSPE)": ((0.31, 0.39), (0.44, 0.17), (0.53, 0.08)),
        "All Data": ((0.37, 0.1),),
    },
    "farseer": {
        "Random": ((-0.77, 0.55), (0.78, 0.18), (0.79, 0.09)),
        "Cheapest": ((-0.89, 0.17), (0.41, 0.4), (0.68, 0.18)),
        "Cost Rand": ((-0.25, 0.63), (0.56, 0.38), (0.74, 0.11)),
        "D-opt": ((-0.11, 0.8), (0.49, 0.18), (0.87, 0.03)),
        "V-opt": ((0.67, 0.22), (0.87, 0.01), (0.92, 0.01)),
        "Li et al. (MSPE)": ((0.6, 0.11), (0.88, 0.02), (0.93, 0.0)),
        "All Data": ((0.91, 0.01),),
    },
}


class SplitError(ValueError):
    """A split's file that cannot be replayed; the message names the file and what is wrong."""


@dataclass
class Group:
    """One group of a split: its pool (X, y, cost), its target region (X_test, y_test, and
    cost_test, the same proxy of its runs) and its budgets."""

    name: str
    X: dict[str, np.ndarray]
    y: np.ndarray
    cost: np.ndarray
    X_test: dict[str, np.ndarray]
    y_test: np.ndarray
    budgets: list[float] = field(default_factory=list)  # cumulative, one per fraction
    cost_test: np.ndarray | None = None


@dataclass
class Split:
    name: str
    spec: Spec
    law: Law
    groups: list[Group]
    data: Path | None = None  # the folder it was read from

    @property
    def dev(self) -> bool:
        return self.name in DEV

    @property
    def why_dev(self) -> str | None:
        """Why the split is dev for the planner's rows (DEV, then PLANNER_DEV), or None."""
        return DEV.get(self.name) or PLANNER_DEV.get(self.name)

    @property
    def mark(self) -> str:
        """dev or held-out for the planner's rows."""
        return "dev" if self.why_dev else "held-out"

    @property
    def band_mark(self) -> str:
        """dev or held-out for the prediction band's coverage (DEV, then BAND_DEV)."""
        return "dev" if self.dev or self.name in BAND_DEV else "held-out"

    @property
    def law_choice_mark(self) -> str:
        """dev or held-out for the law choice (DEV, then LAW_CHOICE_DEV)."""
        return "dev" if self.dev or self.name in LAW_CHOICE_DEV else "held-out"

    @property
    def n_train(self) -> int:
        return sum(len(g.y) for g in self.groups)

    @property
    def n_test(self) -> int:
        return sum(len(g.y_test) for g in self.groups)


def _read(path: Path, need: tuple[str, ...], why: dict[str, str]) -> dict[str, list[str]]:
    """The CSV's columns (as text), checked for the `need`ed ones (`why[c]`: who reads c)."""
    if not path.is_file():
        raise SplitError(f"{path}: no such file")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    have = list(rows[0]) if rows else []
    for c in need:
        if c not in have:
            raise SplitError(
                f"{path}: no column {c!r} ({why[c]} reads it); the file has "
                f"{', '.join(have) or 'no rows'}"
            )
    return {c: [r[c] for r in rows] for c in have}


def _numbers(path: Path, cols: dict, c: str) -> np.ndarray:
    """Column c as positive finite numbers, or a SplitError naming the row."""
    out = []
    for i, v in enumerate(cols[c]):
        try:
            x = float(v)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and x > 0):
            raise SplitError(f"{path}: row {i + 2}: {c} must be a positive number, got {v!r}")
        out.append(x)
    return np.array(out)


def _parts(name: str, spec: Spec, law: Law, data: Path) -> dict[str, dict[str, np.ndarray]]:
    """{"train": columns, "test": columns} of a split read from <name>_{train,test}.csv."""
    why = {c: f"the {law.name} law" for c in law.inputs}
    why.update({c: f"the {name} split's cost" for c in spec.cost_columns if c not in why})
    why["loss"] = "the score"
    parts = {}
    for part in ("train", "test"):
        need = law.inputs + ("loss",) + spec.cost_columns
        path = Path(data) / f"{name}_{part}.csv"
        cols = _read(path, tuple(dict.fromkeys(need)), why)
        num = {c: _numbers(path, cols, c) for c in dict.fromkeys(need)}
        n = len(next(iter(cols.values())))
        num["group"] = np.array(cols.get("group", ["all"] * n))
        parts[part] = num
    return parts


def _rows_of(runs: RunSplit, path: Path) -> dict[str, np.ndarray]:
    """The split's rows (`runs.where`) of the file at `path`: its columns as text, and
    `runs.numeric` as positive numbers."""
    if runs.fetch and not path.is_file():
        raise SplitError(f"{path}: no such file; {runs.fetch}")
    cols = _read(path, runs.columns, {c: runs.who for c in runs.columns})
    mine = [i for i in range(len(cols[runs.columns[0]])) if all(
        cols[c][i] == v for c, v in runs.where)]  # fmt: skip
    if not mine:
        rows = " and ".join(f"{c} {v!r}" for c, v in runs.where)
        raise SplitError(f"{path}: no run of {rows}")
    cols = {c: [cols[c][i] for i in mine] for c in runs.columns}
    return {**{c: np.array(v) for c, v in cols.items()}, **{
        c: _numbers(path, cols, c) for c in runs.numeric}}  # fmt: skip


def run_parts(runs: RunSplit, data: Path) -> dict[str, dict[str, np.ndarray]]:
    """{"train": pool, "test": target} of a split's rows (`runs.where`) in `data`/`runs.file`,
    parted by `runs.in_pool`, and every row of `runs.target_file` in the target; its loss
    column read as "loss"."""
    cols = _rows_of(runs, Path(data) / runs.file)
    pool = np.asarray(runs.in_pool(cols), bool)
    if runs.target_file:
        more = _rows_of(runs, Path(data) / runs.target_file)
        cols = {c: np.concatenate([cols[c], more[c]]) for c in cols}
        pool = np.concatenate([pool, np.zeros(len(more[runs.loss]), bool)])
    num = {c: cols[c] for c in runs.numeric}
    num["loss"] = num.pop(runs.loss)
    group = np.array([runs.group] * len(pool))
    return {
        part: {**{c: v[keep] for c, v in num.items()}, "group": group[keep]}
        for part, keep in (("train", pool), ("test", ~pool))
    }


_AUTO: dict[tuple, str] = {}  # (split, folder[, law choice]) -> its --law auto choice, once


def auto_law(X: dict, y, cost, X_test: dict, law_choice: str = "rollouts") -> Law:
    """The law `--law auto` chooses on a pool (`pool_law.choose`, among the registry's laws
    whose inputs the pool and the target have): the law of a run split's `_auto`. `law_choice`:
    `law_choice.LAW_CHOICES` (default "rollouts", andrea's; "monotone" and "sizes": the
    candidates declared in docs/laws.md)."""
    laws = candidates(law_registry.laws(), X, X_test)
    names = [f"pool:{i}" for i in range(len(y))]
    # the law alone: no stability check (it adds lines, never changes the choice)
    return choose(laws, X, y, names, cost=cost, rule=law_choice, nudge=False)[0]


def load_split(
    name: str, data: Path | None = None, source: Path | None = None, law_choice: str = "rollouts"
) -> Split:
    """The split `name` from `data` (default: the split's own folder; for a split not shipped,
    `source`: the user's checkout), grouped and with its budgets; an `_auto` split fitted with
    the law `--law auto` chooses by `law_choice` (`auto_law`)."""
    spec = SPLITS[name]
    law = get_law(spec.law)
    data = spec.data if data is None else data
    if data is None:
        if source is None:
            raise SplitError(f"{name}: {spec.runs.fetch}")
        data = Path(source)
    parts = run_parts(spec.runs, data) if spec.runs else _parts(name, spec, law, data)
    tr, te = parts["train"], parts["test"]
    if spec.runs and spec.runs.auto:
        key = (name, str(Path(data).resolve()))
        key += (law_choice,) if law_choice != "rollouts" else ()
        if key not in _AUTO:
            X = {c: tr[c] for c in PARAMS_TOKENS}
            X_test = {c: te[c] for c in X}
            _AUTO[key] = auto_law(X, tr["loss"], spec.cost(tr), X_test, law_choice).name
        law = get_law(_AUTO[key])
    groups = []
    for g in sorted(set(tr["group"])):
        a, b = tr["group"] == g, te["group"] == g
        if not b.any():
            continue  # no target runs: the benchmark's loader drops the group too
        cost = spec.cost({c: tr[c][a] for c in spec.cost_columns})
        groups.append(
            Group(
                g,
                {c: tr[c][a] for c in law.inputs},
                tr["loss"][a],
                cost,
                {c: te[c][b] for c in law.inputs},
                te["loss"][b],
                [f * float(cost.sum()) for f in spec.fractions],
                cost_test=spec.cost({c: te[c][b] for c in spec.cost_columns}),
            )
        )
    return Split(name, spec, law, groups, Path(data))


def load_splits(
    names, data: Path | None = None, source: Path | None = None, law_choice: str = "rollouts"
) -> list[Split] | str:
    """The splits `names` (`load_split`, `_auto` ones by `law_choice`), or the `error:` line of
    the first that cannot be read."""
    try:
        return [load_split(n, data, source, law_choice) for n in names]
    except SplitError as e:
        return f"error: {e}"
