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
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY, RUN_INPUTS, InputError, Run
from analysis.inputs.pool import COST

FALLBACK = "chinchilla"  # the law when too few measured rows can be held out to choose one
LABEL = "pool"  # the one label the pool's rows are runs of


def candidates(laws: dict[str, Law], *columns) -> list[Law]:
    """The laws whose inputs every one of `columns` (the pool's, the target's) holds."""
    have = set.intersection(*(set(c) for c in columns))
    return [law for law in laws.values() if set(law.inputs) <= have]


def _flops(X: dict, n: int, cost) -> np.ndarray:
    """Each row's FLOPs: 6·N·D where the rows have params and tokens, else their `compute`
    (PFLOP/s-days), else their cost (`cost`, else the pool's cost column) as a compute in its
    own unit: the rollouts read only the order of computes and their ratios (the cuts, the
    factors past them). InputError where the rows have none of these."""
    if "params" in X and "tokens" in X:
        return 6.0 * X["params"] * X["tokens"]
    for c in (X.get("compute"), cost, X.get(COST)):
        if c is not None:
            return np.broadcast_to(np.asarray(c, float), (n,)) * FLOPS_PER_PFLOPS_DAY
    raise InputError(
        f"rows with {', '.join(X) or 'no columns'}: neither params and tokens (C = 6·N·D) nor a "
        f"compute nor a {COST} to order them by, as a compute rollout needs"
    )


def _size(row: dict, flops: float) -> str:
    """A configuration's name: its (params, tokens) and every other input, so that rows of one
    configuration (replicates) share it and no two configurations do; its compute where it
    has no other input."""
    named = {k: v for k, v in row.items() if k not in ("compute", COST)}
    if not named:
        return f"{flops:.6g}"
    head = [named.pop(k) for k in ("params", "tokens") if k in named]
    rest = [f"{k}={named[k]:.6g}" for k in sorted(named)]
    return ",".join(["x".join(f"{v:.6g}" for v in head)] * bool(head) + rest)


def as_runs(X: dict, y, names, cost=None) -> list[Run]:
    """The measured rows as runs of one label, each its own run, with every column of X by
    name (params, tokens and unique_tokens as fields, any other in `Run.law_inputs`: a plug-in
    law's inputs), sized by all of them (`_size`: rows of one size are replicates, fitted or held
    out together), and with the FLOPs `_flops` gives them (`cost`: each row's, where X has
    no params and tokens nor a compute): what `select_law`'s rollouts read."""
    y = np.asarray(y, float)
    cols = {k: np.asarray(v, float).reshape(-1) for k, v in X.items()}
    flops = _flops(cols, len(y), cost)
    out = []
    for i, name in enumerate(names):
        row = {k: float(v[i]) for k, v in cols.items()}
        out.append(
            Run(
                source=str(name),
                variant=LABEL,
                block_size=None,
                size=_size(row, float(flops[i])),
                flops=float(flops[i]),
                val_loss=float(y[i]),
                params=row.get("params"),
                tokens=row.get("tokens"),
                unique_tokens=row.get("unique_tokens"),
                seed=0,
                run_id=f"{name}#{i}",
                law_inputs={k: v for k, v in row.items() if k not in (*RUN_INPUTS, "compute")},
            )
        )
    return out


def choose(
    laws: list[Law],
    X: dict,
    y,
    names,
    seed: int = 0,
    cost=None,
    rule: str = "rollouts",
    nudge: bool = True,
) -> tuple[Law, list[str]]:
    """(the law --law auto chooses on these rows, or FALLBACK; the lines that say which and
    why). `cost`: each row's, the compute of rows without params and tokens (`as_runs`).
    `rule`: `law_choice.LAW_CHOICES` ("rollouts", the default; "monotone" and "sizes", the
    candidates declared in docs/laws.md). `nudge`: `select_law`'s (False where no line is read)."""
    runs = as_runs(X, y, names, cost)
    sel = select_law(laws, runs, runs, FitSettings(seed=seed), rule, nudge)
    by_name = {law.name: law for law in laws}
    if sel["ranking"]:
        return by_name[sel["ranking"][0]["law"]], selection_lines(sel, "")
    fallback = by_name.get(FALLBACK, laws[0])
    return fallback, selection_lines(sel, fallback.name)
