"""Which law the pool planner plans with by default: the one `--law auto` chooses
(`analysis.estimates.law_choice.select_law`, as `python -m analysis.fit --law auto` chooses), run on
the pool's measured rows, among the registry's laws whose inputs the pool and the target both
have. Where it cannot choose (too few measured rows for a compute rollout), FALLBACK, and it
says so."""

from __future__ import annotations

import numpy as np

from analysis.estimates.law_choice import select_law, selection_lines
from analysis.fits.laws import Law
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY, Run

FALLBACK = "chinchilla"  # the law when too few measured rows can be held out to choose one
LABEL = "pool"  # the one label the pool's rows are runs of


def candidates(laws: dict[str, Law], *columns) -> list[Law]:
    """The laws whose inputs every one of `columns` (the pool's, the target's) holds."""
    have = set.intersection(*(set(c) for c in columns))
    return [law for law in laws.values() if set(law.inputs) <= have]


def as_runs(X: dict, y, names) -> list[Run]:
    """The measured rows as runs of one label, each its own run, sized by its (params, tokens)
    (or its compute): what `select_law`'s rollouts read (rows of one size are replicates, fitted
    or held out together)."""
    y = np.asarray(y, float)
    out = []
    for i, name in enumerate(names):
        row = {k: float(np.asarray(v)[i]) for k, v in X.items()}
        if "params" in row and "tokens" in row:
            flops = 6.0 * row["params"] * row["tokens"]
        else:
            flops = row.get("compute", 1.0) * FLOPS_PER_PFLOPS_DAY
        size = f"{row['params']:.6g}x{row['tokens']:.6g}" if "tokens" in row else f"{flops:.6g}"
        out.append(
            Run(
                source=str(name),
                variant=LABEL,
                block_size=None,
                size=size,
                flops=flops,
                val_loss=float(y[i]),
                params=row.get("params"),
                tokens=row.get("tokens"),
                unique_tokens=row.get("unique_tokens"),
                seed=0,
                run_id=f"{name}#{i}",
            )
        )
    return out


def choose(laws: list[Law], X: dict, y, names, seed: int = 0) -> tuple[Law, list[str]]:
    """(the law --law auto chooses on these rows, or FALLBACK; the lines that say which and
    why)."""
    runs = as_runs(X, y, names)
    sel = select_law(laws, runs, runs, FitSettings(seed=seed))
    by_name = {law.name: law for law in laws}
    if sel["ranking"]:
        return by_name[sel["ranking"][0]["law"]], selection_lines(sel, "")
    fallback = by_name.get(FALLBACK, laws[0])
    return fallback, selection_lines(sel, fallback.name)
