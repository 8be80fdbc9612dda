"""Why `--law auto` chose the law it chose on a run split's pool: the rollouts' cuts, law by law.
`python -m bench.law_choice_why [--splits S,..] [--source DIR] [--law-choice RULE]`

Per split (bench/run_splits.py's names or the aliases of `scalebench_splits.RUN_SPLITS`, `--help`
lists them; `--source DIR` for a sweep not shipped), the pool's rows as `--law auto` reads
them (`pool_law.as_runs`) and the choice it makes (`law_choice.select_law`, among the laws
`pool_law.candidates` gives it, by `--law-choice`: `law_choice.LAW_CHOICES`), printed as:
- the pool against the target: its sizes (params) and tokens, the target's, and how far the
  target's largest params lie past the pool's;
- the compute levels: the pool's configurations, the compute levels the rollouts cut between
  (`rollouts.levels`: configurations whose computes agree within `rollouts.LEVEL_RTOL`, as runs of
  one isoFLOP line whose 6·N·D differ by floating-point rounding only, are one level), and how many
  distinct computes lie within ISO_RTOL of another;
- per cut (by params for `--law-choice sizes`, whose size rollouts are printed, the default's
  choice and compute-rollout scores beside them): its compute, the runs fitted below and held
  out above, the sizes held out and whether each was also fitted below the cut (the held-out
  runs of a size fitted below it extrapolate in tokens only), the factors the held-out runs
  reach past the cut, and each law's RMS and mean log error (measured over predicted) there;
  then each law's RMS over every cut (the score), the laws refused and why;
- each law fitted on all the pool's runs: its parameters at a bound (`laws.params_at_bounds`),
  whether its loss rises with an input at a measured point (`law_choice.rising`), and its median
  and largest |error| on the target's runs per target size (a measurement: the choice never
  sees the target's losses).
A measurement only; nothing of andrea's choice is changed by it.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np

from analysis.estimates import rollouts
from analysis.estimates.estimate import fit_variants
from analysis.estimates.law_choice import LAW_CHOICES, rising, select_law
from analysis.estimates.pool_law import LABEL, as_runs, candidates
from analysis.fits import law_registry
from analysis.fits.laws import params_at_bounds
from analysis.fits.settings import FitSettings
from bench.point_query import names_of
from bench.scalebench_splits import SplitError, add_source_argument, aliases_text, load_split

ISO_RTOL = 1e-6  # the near pairs counted (a measurement; the rollouts group by rollouts.LEVEL_RTOL)


def pool_of(split) -> tuple[dict, np.ndarray, dict, np.ndarray, np.ndarray]:
    """(the pool's params and tokens, its losses, the target's params and tokens, its losses,
    the pool's costs) of a run split as `load_split` read it."""
    g = split.groups[0]
    return g.X, g.y, g.X_test, g.y_test, g.cost


def near_levels(computes, rtol: float = ISO_RTOL) -> int:
    """How many of the distinct computes lie within `rtol` of the next one up."""
    lv = np.unique(np.asarray(computes, float))
    return int(np.sum(np.diff(lv) <= rtol * lv[1:])) if len(lv) > 1 else 0


def cut_rows(sel: dict, runs) -> list[dict]:
    """Per cut of `select_law`'s answer: its compute (its params, for the size rollouts of
    `--law-choice sizes`), runs fitted and held out, the held-out sizes (params) and which of
    them were fitted below it too, the factors reached, and per law the RMS and mean log
    residual (%) of its held-out runs there."""
    by_params = sel.get("by") == "params"
    # by level, as the cuts were made
    conf = rollouts.config_params(runs) if by_params else rollouts.config_computes(runs)
    rows = []
    for cut in sel["cuts"]:
        held = [r for r in runs if conf.get((r.label, r.size), 0.0) > cut.cut]
        fitted_params = {r.params for r in runs if conf.get((r.label, r.size), 0.0) <= cut.cut}
        held_params = sorted({r.params for r in held if r.params is not None})
        row = {
            "cut": cut.cut,
            "n_fitted": cut.n_fitted,
            "n_held": cut.n_held,
            "held_params": held_params,
            "held_params_fitted_below": [p for p in held_params if p in fitted_params],
            "laws": {},
        }
        for law, ro in sel["rollouts"].items():
            res = [x for x in ro.residuals if x.cut == cut.cut]
            if not res:
                continue
            lr = np.array([x.log_residual for x in res])
            row["factor"] = (min(x.factor for x in res), max(x.factor for x in res))
            row["laws"][law] = {
                "rms_pct": 100 * float(np.sqrt(np.mean(lr**2))),
                "mean_pct": 100 * float(lr.mean()),
                "n": len(res),
            }
        rows.append(row)
    return rows


def default_choice(sel: dict) -> str:
    """The law the default rule chooses, read off a "monotone" choice: the best-scored law among
    those ranked and those refused only because their loss rises (`rising`: the one refusal the
    default does not make; it is checked after every other). A choice by other cuts (rule
    "sizes") cannot be read so: `split_lines` asks the default rule itself."""
    kept = [r["law"] for r in sel["ranking"]]
    kept += [law for law, why in sel["refused"].items() if "its loss rises with" in why]
    if not kept:
        return "none (its caller's fallback)"
    return min(kept, key=lambda law: sel["rollouts"][law].rms)


def _g(v) -> str:
    return f"{v:.3g}"


def split_lines(name: str, source=None, rule: str = LAW_CHOICES[0]) -> list[str]:
    """The printed account of `--law auto`'s choice on the run split `name` (module docstring)."""
    split = load_split(name, source=source)
    X, y, Xt, yt, cost = pool_of(split)
    laws = candidates(law_registry.laws(), X, Xt)
    runs = as_runs(X, y, [f"pool:{i}" for i in range(len(y))], cost)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        sel = select_law(laws, runs, runs, FitSettings(seed=0), rule)
    pmax = float(X["params"].max())
    out = [
        f"== {name} [{split.law_choice_mark} for the law choice]: "
        f"{len(y)} pool runs, params {' '.join(map(_g, sorted(set(X['params']))))}, "
        f"tokens {_g(X['tokens'].min())}-{_g(X['tokens'].max())}; target {len(yt)} runs, params "
        f"{' '.join(map(_g, sorted(set(Xt['params']))))} (up to "
        f"{float(Xt['params'].max()) / pmax:.3g}x the pool's), tokens "
        f"{_g(Xt['tokens'].min())}-{_g(Xt['tokens'].max())}",
        f"  compute levels: {len({r.size for r in runs})} configurations in "
        f"{len(set(rollouts.config_computes(runs).values()))} levels (within "
        f"{rollouts.LEVEL_RTOL:g}), {near_levels([r.compute for r in runs])} computes within "
        f"{ISO_RTOL:g} of another",
        f"  --law-choice {rule}: "
        + (
            f"chose {sel['ranking'][0]['law']}"
            if sel["ranking"]
            else f"no law ranked ({sel.get('why', '')})"
        )
        + (f" (by the default rule: {sel['fallback']})" if sel.get("fallback") else "")
        + (f", by {sel['by']} cuts" if rule == "sizes" else ""),
    ]
    for row in cut_rows(sel, runs):
        lo, hi = row.get("factor", (np.nan, np.nan))
        out.append(
            f"  cut {row['cut']:.4g}{' params' * (sel.get('by') == 'params')}: "
            f"{row['n_fitted']} fitted, {row['n_held']} held out "
            f"(params {' '.join(map(_g, row['held_params']))}; "
            f"{len(row['held_params_fitted_below'])} of those sizes also fitted below), "
            f"factors {lo:.2g}-{hi:.2g}; "
            + "; ".join(
                f"{law} RMS {v['rms_pct']:.2f} % mean {v['mean_pct']:+.2f} %"
                for law, v in row["laws"].items()
            )
        )
    for r in sel["ranking"]:
        out.append(f"  score {r['law']}: RMS {r['rms_log_pct']:.2f} % over {r['n']} held-out runs")
    if rule == "sizes":
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ds = select_law(laws, runs, runs, FitSettings(seed=0), nudge=False)  # its law alone
        scores = ", ".join(f"{r['law']} {r['rms_log_pct']:.2f} %" for r in ds["ranking"])
        chosen = ds["ranking"][0]["law"] if ds["ranking"] else "none (its caller's fallback)"
        out.append(
            f"  the default ({LAW_CHOICES[0]}) would choose {chosen} (compute rollouts: "
            f"{scores or 'none ranked'})"
        )
    elif rule != LAW_CHOICES[0]:
        out.append(f"  the default ({LAW_CHOICES[0]}) would choose {default_choice(sel)}")
    for law, why in {**sel["refused"], **sel["skipped"]}.items():
        out.append(f"  refused or skipped {law}: {why}")
    for law, why in sel["unstable"].items():
        out.append(f"  unstable {law}: {why}")
    for law in laws:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            res = fit_variants(runs, LABEL, FitSettings(n_bootstrap=0), law)
        if LABEL not in res.fits:
            out.append(f"  {law.name} on all runs: not fitted")
            continue
        fit = res.fits[LABEL]
        bounds = params_at_bounds(law, fit.theta)
        err = 100 * (np.asarray(fit.predict({k: Xt[k] for k in law.inputs}), float) / yt - 1)
        per = [
            f"{_g(p)} ({p / pmax:.3g}x): median {np.median(np.abs(err[m])):.2f} %, "
            f"largest {np.abs(err[m]).max():.2f} %, mean {err[m].mean():+.2f} %"
            for p in sorted(set(Xt["params"]))
            for m in [Xt["params"] == p]
        ]
        out.append(
            f"  {law.name} on all runs: at bounds {bounds or 'none'}; "
            f"{rising(fit, runs) or 'falls in every input at every measured point'}; "
            f"target error by size: {'; '.join(per)}"
        )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--splits",
        default="opt,gadre,gpt3",
        help=f"comma-separated split names or aliases: {aliases_text()} (default: %(default)s)",
    )
    add_source_argument(p)
    p.add_argument("--law-choice", default=LAW_CHOICES[0], choices=LAW_CHOICES)
    args = p.parse_args(argv)
    names = names_of(args.splits, ())
    if isinstance(names, str):
        print(names, file=sys.stderr)
        return 2
    t0 = time.time()
    for name in names:
        try:
            print("\n".join(split_lines(name, args.source, args.law_choice)), flush=True)
        except SplitError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    print(f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
