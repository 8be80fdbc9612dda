"""`python -m analysis.tuning <LR scan sweep dirs…> --out DIR`: the multiplier both ways.

The report gives every variant "identical hyperparameters selected under the baseline", and its
multiplier is measured there. Small-scale conclusions can hinge on that choice (Lourie et al.
2026, "Small-scale experiments: are we there yet?": laws appear on the tuned frontier), so this
command measures how much the multiplier moves when each variant is trained at its own best LR
instead — from the runs of one LR scan that holds several variants (`sweeps=lr_scan_cpu`, or
`sweeps=lr_scan model=baseline,attnres_block_n8,...`), with no extra training:

- **at the baseline's LR** (the report's protocol): at each size, every variant's runs at the
  grid LR where the baseline's seed-mean final loss is lowest;
- **at its own LR** (the tuned frontier): each variant's runs at its own grid-best LR;
- **own / baseline's**: the ratio of the two multipliers, > 1 when tuning the variant helps it.

Both are fitted as `analysis.fit` fits by default (L = A·C^-alpha on each seed's final point,
least squares on log L) with the seed bootstrap paired across variants by seed; the two
conditions are fitted in one bootstrap, so each resample draws the same seeds for both and the
ratio's interval is the percentile interval of the per-resample ratios (at the expanded level
the fits use). The baseline is the same runs in both, so the ratio is the variant's own change.

What the interval does not hold: the LR selection itself. The grid-best LR is chosen on the same
seeds' means it is then scored with, which favours the tuned condition slightly (a winner's
curse of the order of the seed noise of a mean); the grid (not lr_select's parabola vertex) is
used because only grid points have runs. A ratio within its interval of 1 says the conclusion
does not depend on tuning at this precision.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from dataclasses import replace

import numpy as np

from analysis.estimates.estimate import default_c_ref, fit_variants
from analysis.estimates.multiplier import boot_multipliers, multiplier_at
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.settings import DEFAULT_LOSS, FitSettings
from analysis.inputs.collect import Run, collect_or_report, final_points
from analysis.report.arguments import common_parser, parse_or_refuse
from analysis.report.files import jsonable
from andrea.run.rundir import atomic_write_bytes, atomic_write_json

OWN = " @own-LR"  # label suffix of a variant's runs at its own grid-best LR


def grid_choice(runs: list[Run], lrs: dict[str, float]) -> dict[tuple[str, str], dict]:
    """(label, size) → {lr: mean final loss over seeds, "best": the grid-best LR, "seeds": …}."""
    cells: dict[tuple[str, str], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        cells[(r.label, r.size)][lrs[r.run_id]].append(r.val_loss)
    out = {}
    for key, by_lr in cells.items():
        means = {lr: float(np.mean(v)) for lr, v in sorted(by_lr.items())}
        out[key] = {
            "means": means,
            "best": min(means, key=means.get),
            "seeds": {lr: len(v) for lr, v in by_lr.items()},
        }
    return out


def _same_lr(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6)


def conditions(runs: list[Run], lrs: dict[str, float], baseline: str):
    """The runs of both conditions, relabelled: variant labels at the baseline's LR, `label
    @own-LR` at the variant's own; (runs, choice, problems)."""
    choice = grid_choice(runs, lrs)
    labels = sorted({r.label for r in runs})
    sizes = sorted({r.size for r in runs if r.label == baseline})
    problems = []
    ref = {s: choice[(baseline, s)]["best"] for s in sizes}
    out = [r for r in runs if r.label == baseline and _same_lr(lrs[r.run_id], ref[r.size])]
    for label in labels:
        if label == baseline:
            continue
        for s in sizes:
            c = choice.get((label, s))
            if c is None:
                problems.append(f"{label} has no runs at size {s}")
                continue
            at_ref = [lr for lr in c["means"] if _same_lr(lr, ref[s])]
            if not at_ref:
                problems.append(
                    f"{label} at size {s} was not run at {baseline}'s grid-best LR "
                    f"{ref[s]:.3g} (its LRs: {', '.join(f'{x:.3g}' for x in c['means'])})"
                )
                continue
            for r in runs:
                if r.label != label or r.size != s:
                    continue
                if _same_lr(lrs[r.run_id], ref[s]):
                    out.append(r)
                if _same_lr(lrs[r.run_id], c["best"]):
                    out.append(replace(r, display_label=label + OWN, run_id=r.run_id + OWN))
    return out, choice, problems


def not_an_lr_scan(choice: dict, baseline: str) -> str | None:
    """Why these runs are not an LR scan, or None when they are. A variant's own grid-best LR can
    differ from the baseline's only where it ran at two or more LRs at a size; where no variant
    did (a scaling sweep: one LR per size), "its own LR" is the baseline's by construction and
    the ratio is 1 with an interval of [1, 1], a sensitivity nothing measured."""
    variants = {key: c for key, c in choice.items() if key[0] != baseline}
    if any(len(c["means"]) >= 2 for c in variants.values()):
        return None
    first = min(variants, default=None)
    one = (
        f" ({first[0]} at {first[1]}: lr {next(iter(variants[first]['means'])):.3g} only)"
        if first
        else ""
    )
    return (
        f"not an LR scan: no variant beside {baseline} ran at two or more LRs at a size"
        f"{one}, so its own best LR is {baseline}'s by construction; analysis.tuning reads "
        "an LR scan of several variants (sweeps=lr_scan_cpu, or sweeps=lr_scan "
        "model=<a list>); fit a scaling sweep with `python -m analysis.fit`"
    )


def sensitivity(
    runs: list[Run],
    lrs: dict[str, float],
    baseline: str = "baseline",
    n_bootstrap: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    loss: str = DEFAULT_LOSS,
    c_ref: float | None = None,
) -> dict:
    """The multiplier at the baseline's LR, at each variant's own, and their ratio, per variant
    (module docstring). `runs`: final points of an LR scan; `lrs`: run_id → peak LR."""
    picked, choice, problems = conditions(runs, lrs, baseline)
    why = not_an_lr_scan(choice, baseline)
    if why or problems:
        raise ValueError(why or "; ".join(problems))
    settings = FitSettings(
        loss=loss,
        n_bootstrap=n_bootstrap,
        ci=ci,
        seed=seed,
        interval="seeds" if n_bootstrap else "auto",
    )
    res = fit_variants(picked, baseline, settings)
    fits = res.fits
    if baseline not in fits:
        raise ValueError(f"{baseline} could not be fitted: {res.skipped.get(baseline, 'no runs')}")
    if c_ref is None:
        c_ref, _ = default_c_ref(fits, baseline)
    base = fits[baseline]
    rows = []
    for label in sorted(fits):
        if label == baseline or label.endswith(OWN) or label + OWN not in fits:
            continue
        at_base, at_own = (multiplier_at(base, fits[lab], c_ref) for lab in (label, label + OWN))
        row = {
            "variant": label,
            "at_baseline_lr": at_base,
            "at_own_lr": at_own,
            "ratio": at_own["multiplier"] / at_base["multiplier"],
            "ratio_ci": [float("nan")] * 2,
            "interval": fits[label].resampled,
            "lrs": {
                s: {
                    "baseline": choice[(baseline, s)]["best"],
                    "own": choice[(label, s)]["best"],
                    "loss_at_baseline_lr": next(
                        v
                        for lr, v in choice[(label, s)]["means"].items()
                        if _same_lr(lr, choice[(baseline, s)]["best"])
                    ),
                    "loss_at_own_lr": choice[(label, s)]["means"][choice[(label, s)]["best"]],
                    "seeds": choice[(label, s)]["seeds"][choice[(label, s)]["best"]],
                }
                for s in sorted({r.size for r in runs if r.label == baseline})
            },
        }
        own, at = (boot_multipliers(base, fits[lab], c_ref) for lab in (label + OWN, label))
        if n_bootstrap and own is not None and at is not None and len(own) == len(at):
            with np.errstate(all="ignore"):
                ratio = own / at
            # the two conditions share the seed draws; a variant whose own LR is the baseline's
            # at every size has the same runs in both, so every resample's ratio is exactly 1
            row["ratio_ci"] = list(percentile_ci(ratio, fits[label].boot_level or ci))
        rows.append(row)
    return {
        "baseline": baseline,
        "c_ref_pflops_days": c_ref,
        "ci_level": ci,
        "n_bootstrap": n_bootstrap,
        "variants": rows,
        "warnings": res.warnings,
        "not_fitted": res.skipped,
    }


def _m(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def _ci(ci) -> str:
    lo, hi = ci
    return "" if not (math.isfinite(lo) and math.isfinite(hi)) else f"[{lo:.2f}, {hi:.2f}]"


def render(report: dict) -> str:
    b = report["baseline"]
    lines = [
        f"Multiplier vs {b} at C_ref = {report['c_ref_pflops_days']:.4g} PFLOP/s-days, two "
        f"ways ({report['ci_level']:.0%} intervals, {report['n_bootstrap']} seed-bootstrap "
        "resamples shared by both):",
        "",
        f"| variant | at {b}'s LR (the report's protocol) | at its own LR (tuned) | "
        "own / baseline's (sensitivity to tuning) |",
        "|---|---|---|---|",
    ]
    for r in report["variants"]:
        a, o = r["at_baseline_lr"], r["at_own_lr"]
        lines.append(
            f"| {r['variant']} | {_m(a['multiplier'])} {_ci(a['ci'])} | "
            f"{_m(o['multiplier'])} {_ci(o['ci'])} | {_m(r['ratio'])} {_ci(r['ratio_ci'])} |"
        )
    lines += [
        "",
        "Grid-best LR per size (mean final loss over seeds there):",
        "",
        f"| variant | size | {b}'s LR | own LR | loss at {b}'s | at own | gain |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["variants"]:
        for size, x in r["lrs"].items():
            gain = x["loss_at_baseline_lr"] - x["loss_at_own_lr"]
            lines.append(
                f"| {r['variant']} | {size} | {x['baseline']:.3g} | {x['own']:.3g} | "
                f"{x['loss_at_baseline_lr']:.4f} | {x['loss_at_own_lr']:.4f} | "
                f"{gain:.4f} |"
            )
    lines += [
        "",
        "The interval treats the grid-best LRs as given: they were chosen on the same "
        "seeds' means (a slight bias towards the tuned column).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m analysis.tuning",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        parents=[
            common_parser(
                inputs="sweep directories of an LR scan holding several variants "
                "(every results.json "
                "below them is read; each records its lr)",
                out="writes tuning.json and tuning.md",
                out_required=True,
                baseline=True,
                bootstrap=True,
                level="--ci",
                seed=True,
            )
        ],
    )
    p.add_argument(
        "--c-ref",
        type=float,
        default=None,
        help="reference compute in PFLOP/s-days "
        "(default: the geometric middle of the shared compute range, as analysis.fit)",
    )
    args = parse_or_refuse(p, argv)
    if args is None:
        return 2
    if args.bootstrap < 0 or not 0 < args.ci < 1 or (args.c_ref is not None and not args.c_ref > 0):
        print("error: need --bootstrap >= 0, 0 < --ci < 1, --c-ref > 0", file=sys.stderr)
        return 2
    coll = collect_or_report(args.inputs)
    if coll is None:
        return 2
    runs = final_points(coll.runs)
    lrs = {r.run_id: r.lr for r in runs}
    no_lr = sorted(r.source for r in runs if lrs[r.run_id] is None)
    if no_lr:
        print(
            f"error: {len(no_lr)} run(s) record no lr (a CSV, or results.json from before "
            f"andrea recorded it): {', '.join(no_lr[:3])}{' …' if len(no_lr) > 3 else ''}",
            file=sys.stderr,
        )
        return 2
    labels = sorted({r.label for r in runs})
    if args.baseline not in labels or len(labels) < 2:
        print(
            f"error: the scan holds {', '.join(labels) or 'no runs'}; it needs {args.baseline} "
            "and at least one other variant (sweeps=lr_scan_cpu, or model=<a list>)",
            file=sys.stderr,
        )
        return 2
    try:
        report = sensitivity(
            runs, lrs, args.baseline, args.bootstrap, args.ci, args.seed, c_ref=args.c_ref
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["inputs"] = [str(x) for x in args.inputs]
    text = render(report)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "tuning.json", jsonable(report))
    atomic_write_bytes(args.out / "tuning.md", text.encode())
    for w in report["warnings"]:
        print(f"warning: {w}")
    print(text)
    print(f"Wrote tuning.json and tuning.md to {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
