"""Held-out splits read from a file of public runs, and parted into pool and target by a rule
declared before any score on them was computed.

A module of such splits (each of `scalebench_splits.RUN_SPLITS`, e.g. bench/gemstones_splits.py)
holds the protocol in its docstring and gives `DATA` (its folder), `ALIAS` (the name
`bench.scalebench --splits` expands to all its splits) and `SPLITS`: split name -> `RunSplit`,
the rows of its file that are the split and which of them are the pool.
bench/scalebench_splits.py registers every such module (`RUN_SPLITS`), loads a split from its
file (`run_parts`) and fits a split named with `AUTO` appended with the law `--law auto` chooses
on its pool. No benchmark fitter and no published rows
score them: only andrea's fit. A module whose runs are not shipped (no licence to copy them)
gives `DATA = None`, `SOURCE_ENV` and `NOT_SHIPPED`, and its splits are read from the folder
named by `--source`; `fetch` says where to get it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

AUTO = "_auto"  # the suffix of a split fitted with --law auto's choice on its pool
PARAMS_TOKENS = ("params", "tokens")  # the inputs of the law these splits are fitted with
# what scores a split: bench.scalebench's replay, its --coverage, bench.point_query
SCORES = ("replay", "coverage", "point_query")


@dataclass(frozen=True)
class RunSplit:
    who: str  # whose runs, for error messages: "a Porian et al. 2024 split"
    file: str  # the CSV in the module's DATA folder
    columns: tuple[str, ...]  # the columns the file must have
    where: tuple[tuple[str, str], ...]  # (column, value): the rows of this split
    numeric: tuple[str, ...]  # the columns read as positive numbers (law inputs and loss)
    loss: str  # the column scored as the loss
    # the split's columns (text, and `numeric` as numbers) -> True for the rows of its pool
    in_pool: Callable[[dict[str, np.ndarray]], np.ndarray]
    group: str  # the name of its one group
    auto: bool = False  # fitted with the law --law auto chooses on the pool
    # a second file whose rows of `where` are all target, beside `file`'s parted by `in_pool`
    target_file: str | None = None
    fetch: str = ""  # where to get the files, said when they are absent (a source not shipped)
    scores: tuple[str, ...] = SCORES  # the commands whose `--splits ALIAS` names the split


def with_auto(name: str, split: RunSplit) -> dict[str, RunSplit]:
    """{name: the split, name + AUTO: the same runs fitted with --law auto's choice}."""
    return {name: split, name + AUTO: replace(split, auto=True)}


def base_name(name: str) -> str:
    """The split's name without AUTO: the split whose law is the registry's given one."""
    return name.removesuffix(AUTO)


def models_in_pool(
    models, pool: tuple[str, ...], target: tuple[str, ...], what: str = "models"
) -> np.ndarray:
    """Which rows are the pool, by their model (or another label, `what`: bench/xlstm_splits.py's
    budgets): the module's pool models against its target models. A model that is neither is an
    error, not a silent target."""
    models = np.asarray(models)
    other = sorted(set(models) - set(pool) - set(target))
    if other:
        raise ValueError(f"{what} neither pool nor target: {', '.join(other)}")
    return np.isin(models, pool)


def by_model(
    who: str,
    loss: str,
    pool: tuple[str, ...],
    target: tuple[str, ...],
    group: str,
    where: tuple[tuple[str, str], ...] = (),
) -> RunSplit:
    """A split of a module's `runs.csv` (columns: the `where` columns, model, params, tokens and
    the loss) parted by model (`models_in_pool`): the layout of Gadre et al.'s, GPT-3's, OPT's
    and the OLMo ladder's files."""
    return RunSplit(
        who=who,
        file="runs.csv",
        columns=(*(column for column, _ in where), "model", *PARAMS_TOKENS, loss),
        where=where,
        numeric=(*PARAMS_TOKENS, loss),
        loss=loss,
        in_pool=lambda cols: models_in_pool(cols["model"], pool, target),
        group=group,
    )
