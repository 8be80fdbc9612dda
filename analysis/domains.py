"""`python -m analysis.domains <sweep dirs or CSVs…> [--out DIR]`: the multiplier per metric and
held-out domain, and where domains disagree beyond their intervals (docs/metrics.md).

For every metric the runs recorded — val_loss (nats/token), bpb (bits per byte), and each
`eval.domains` entry's loss and bpb — it fits the C-law on each run's final point exactly as
`analysis.fit` does (least squares on log L, seed bootstrap paired across variants) and prints
each variant's compute multiplier with its interval at one C_ref, the geometric middle of the
compute all variants share (the same for every metric: the runs are the same).

Do the domains agree? Every domain is scored on the same runs, so with one bootstrap seed
replicate i resamples the same runs for every metric. For each variant and each pair of domains
the statistic is the log ratio of their multipliers, log M_a - log M_b, computed replicate by
replicate: its percentile interval (at the fits' expanded level) is a paired seed-bootstrap
interval, narrower than comparing two marginal intervals, since the seed luck shared by the
domains cancels. The domains disagree when that interval excludes 0 (a ratio of 1).

Bits per byte is nats per token times a constant for one tokenizer and one eval set (its tokens
over its bytes, over ln 2): the power law's A absorbs it, so the bpb multiplier equals the nats
multiplier (printed, as a check, not as news); bpb is what compares across tokenizers and with
published ladders (Gao et al. 2020; Magnusson et al. 2023).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import warnings as _warnings

import numpy as np

from analysis.estimates.estimate import default_c_ref, fit_variants
from analysis.estimates.multiplier import boot_multipliers, multiplier_at
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import collect_or_report, final_points
from analysis.inputs.metrics import domain_of, is_domain_loss, is_domain_metric, with_metric
from analysis.report.arguments import common_parser, parse_or_refuse
from andrea.run.rundir import atomic_write_json

UNITS = {"loss": "nats/token", "bpb": "bits/byte"}


def metrics_of(runs) -> list[str]:
    """The metrics every run recorded, in display order: val_loss, bpb, then per domain."""
    if not runs:
        return []
    common = set(runs[0].metrics)
    for r in runs[1:]:
        common &= set(r.metrics)
    head = [m for m in ("val_loss", "bpb") if m in common]
    return head + sorted(
        (m for m in common if is_domain_metric(m)),
        key=lambda m: (m.rsplit("/", 1)[0], not m.endswith("/loss")),
    )


def unit(metric: str) -> str:
    return UNITS["bpb"] if metric.endswith("bpb") else UNITS["loss"]


def analyse(runs, baseline: str, n_bootstrap: int, ci: float, seed: int) -> dict:
    """{metric: {"fits", "c_ref", "multipliers": {label: multiplier_at dict}, "boot": {label:
    array}}}, all metrics at one C_ref."""
    finals = final_points(runs)
    settings = FitSettings(n_bootstrap=n_bootstrap, ci=ci, seed=seed)
    out, c_ref = {}, None
    for metric in metrics_of(finals):
        with _warnings.catch_warnings():
            _warnings.simplefilter("ignore", RuntimeWarning)
            res = fit_variants(with_metric(finals, metric)[0], baseline, settings)
        fits = res.fits
        if baseline not in fits:
            continue
        if c_ref is None:
            c_ref, _ = default_c_ref(fits, baseline)
        mults, boots = {}, {}
        for label in sorted(fits):
            if label == baseline:
                continue
            mults[label] = multiplier_at(fits[baseline], fits[label], c_ref)
            boots[label] = boot_multipliers(fits[baseline], fits[label], c_ref)
        out[metric] = {
            "fits": fits,
            "c_ref": c_ref,
            "multipliers": mults,
            "boot": boots,
            "baseline_at_c_ref": float(fits[baseline].predict(c_ref)),
        }
    return out


def compare_domains(result: dict, ci: float) -> list[dict]:
    """Each variant, each pair of domains (their loss): the paired log ratio of multipliers."""
    domains = [m for m in result if is_domain_loss(m)]
    rows = []
    for a, b in itertools.combinations(domains, 2):
        for label, ma in result[a]["multipliers"].items():
            mb = result[b]["multipliers"].get(label)
            ba, bb = result[a]["boot"].get(label), result[b]["boot"].get(label)
            if mb is None:
                continue
            ratio = ma["multiplier"] / mb["multiplier"]
            lo = hi = float("nan")
            if ba is not None and bb is not None and len(ba) == len(bb):
                with np.errstate(divide="ignore", invalid="ignore"):
                    lr = np.log(ba) - np.log(bb)
                level = result[a]["fits"][label].boot_level or ci
                lo, hi = (math.exp(v) for v in percentile_ci(lr[np.isfinite(lr)], level))
            rows.append(
                {
                    "variant": label,
                    "a": a,
                    "b": b,
                    "ratio": ratio,
                    "ci": [lo, hi],
                    "disagree": bool(math.isfinite(lo) and (lo > 1 or hi < 1)),
                }
            )
    return rows


def _cell(m: dict) -> str:
    lo, hi = m["ci"]
    ci = f" [{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else ""
    return f"{m['multiplier']:.2f}x{ci}"


def render(
    result: dict, comparisons: list[dict], baseline: str, ci: float, n_bootstrap: int
) -> str:
    if not result:
        return (
            "Held-out domains: nothing to fit (no metric every run recorded has a fitted baseline)"
        )
    first = next(iter(result.values()))
    labels = sorted({l for r in result.values() for l in r["multipliers"]})
    header = ["metric", "unit", f"{baseline} L(C_ref)", *labels]
    rows = [
        [
            m,
            unit(m),
            f"{r['baseline_at_c_ref']:.4f}",
            *(_cell(r["multipliers"][l]) if l in r["multipliers"] else "–" for l in labels),
        ]
        for m, r in result.items()
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    out = [
        f"Multiplier per metric and held-out domain vs {baseline} (C-law on every seed's final "
        f"point, {n_bootstrap} seed-bootstrap resamples, {ci:.0%} intervals) at C_ref = "
        f"{first['c_ref']:.4g} PFLOP/s-days:",
        line(header),
        line(["-" * w for w in widths]),
        *map(line, rows),
    ]
    if "val_loss" in result and "bpb" in result:
        out.append(
            "  bpb multipliers equal the nats ones: for one tokenizer and eval set, bpb is "
            "nats/token times a constant (tokens / bytes / ln 2), which A absorbs"
        )
    if comparisons:
        out.append(
            f"Do the domains agree? Paired seed bootstrap of M_a / M_b (the same resampled "
            f"runs score both domains; {ci:.0%} interval; disagree when it excludes 1):"
        )
        for c in comparisons:
            lo, hi = c["ci"]
            verdict = (
                "DISAGREE beyond the interval" if c["disagree"] else "agree within the interval"
            )
            a, b = (domain_of(x) for x in (c["a"], c["b"]))
            out.append(
                f"  {c['variant']:<20} {a} / {b}: {c['ratio']:.2f}x [{lo:.2f}, {hi:.2f}]  {verdict}"
            )
    elif sum(is_domain_loss(m) for m in result) < 2:
        out.append(
            "  (fewer than two domains recorded by every run: no comparison between domains)"
        )
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m analysis.domains",
        description=__doc__.split("\n\n")[0],
        parents=[
            common_parser(
                inputs="sweep/run directories or CSVs (columns named val_loss, bpb, "
                "domain:<name>/loss, "
                "domain:<name>/bpb)",
                out="write domains.json there",
                baseline=True,
                bootstrap=True,
                level="--ci",
                seed=True,
            )
        ],
    )
    args = parse_or_refuse(p, argv)
    if args is None:
        return 2
    if args.bootstrap < 0 or not 0 < args.ci < 1:
        print("error: need --bootstrap >= 0 and 0 < --ci < 1", file=sys.stderr)
        return 2
    coll = collect_or_report(args.inputs)
    if coll is None:
        return 2
    if not coll.runs:
        print("error: no completed runs to fit", file=sys.stderr)
        return 1
    result = analyse(coll.runs, args.baseline, args.bootstrap, args.ci, args.seed)
    comparisons = compare_domains(result, args.ci)
    print(render(result, comparisons, args.baseline, args.ci, args.bootstrap))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        report = {
            "baseline": args.baseline,
            "ci_level": args.ci,
            "bootstrap": args.bootstrap,
            "method": "C-law on each run's final point; seed bootstrap; paired log ratio "
            "of multipliers between domains",
            "metrics": {
                m: {
                    "unit": unit(m),
                    "c_ref_pflops_days": r["c_ref"],
                    "baseline_at_c_ref": r["baseline_at_c_ref"],
                    "multipliers": r["multipliers"],
                }
                for m, r in result.items()
            },
            "domain_comparisons": comparisons,
        }
        from analysis.report.files import jsonable

        atomic_write_json(args.out / "domains.json", jsonable(report))
        print(f"Wrote {args.out / 'domains.json'}")
    return 0 if result else 1


if __name__ == "__main__":
    sys.exit(main())
