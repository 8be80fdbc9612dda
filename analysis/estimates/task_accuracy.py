"""Downstream task metrics as scaling laws: the two-step prediction of Bhagia et al. 2024
(arXiv 2412.04403): compute -> the task's bits per byte (a power law per variant, as the loss),
then bits per byte -> accuracy (one sigmoid shared by the variants, floor at the chance rate),
and its backtest on a held-out size; and whether an accuracy sits at chance (`chance_verdict`).
The metric names: analysis/inputs/metrics.py; the records: andrea/run/evaluations.py.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.estimates.estimate import fit_variants
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.replicates import arrange
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import final_points
from analysis.inputs.metrics import task_key, with_metric

Z95 = 1.959963984540054


def wilson(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927)."""
    if n <= 0:
        return 0.0, 1.0
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def chance_verdict(runs: list, task: str, metric: str) -> dict:
    """Is `task`'s accuracy metric at chance in these runs? {"at_chance", "chance", "above",
    "n_runs", "line"}. At chance: no run's Wilson interval lies above the chance rate."""
    key = task_key(task, metric)
    rows = []
    for r in runs:
        m = getattr(r, "metrics", {})
        if key in m and task_key(task, "n") in m and task_key(task, "chance") in m:
            rows.append((m[key], int(m[task_key(task, "n")]), m[task_key(task, "chance")]))
    if not rows:
        return {"at_chance": None, "chance": None, "above": 0, "n_runs": 0, "line": None}
    chance = float(np.mean([c for _, _, c in rows]))
    above = sum(1 for p, n, c in rows if wilson(p, n)[0] > c)
    at = above == 0
    n_docs = sorted({n for _, n, _ in rows})
    accs = [p for p, _, _ in rows]
    docs = f"{n_docs[0]}" if len(n_docs) == 1 else f"{n_docs[0]}-{n_docs[-1]}"
    if at:
        line = (
            f"{task}/{metric} sits at chance at these sizes: no run's accuracy is above the "
            f"chance rate {chance:.3f} at 95 % ({min(accs):.3f}-{max(accs):.3f} over "
            f"{len(rows)} runs of {docs} documents; binomial intervals), so an accuracy "
            f"multiplier means nothing here; the continuous task:{task}/bpb is the signal"
        )
    else:
        line = f"{task}/{metric}: {above} of {len(rows)} runs above chance ({chance:.3f}) at 95 %"
    return {"at_chance": at, "chance": chance, "above": above, "n_runs": len(rows), "line": line}


def sigmoid_acc(L, k: float, L0: float, chance: float):
    return chance + (1.0 - chance) / (1.0 + np.exp(np.clip(k * (np.asarray(L) - L0), -60, 60)))


def fit_sigmoid(bpb: np.ndarray, acc: np.ndarray, chance: float) -> dict:
    """Step 2: least squares of acc on bpb over every run (all variants, all sizes)."""
    from scipy.optimize import least_squares

    bpb, acc = np.asarray(bpb, float), np.asarray(acc, float)
    if len(bpb) < 3:
        return {"ok": False, "why": f"{len(bpb)} runs with both bpb and accuracy; need 3+"}
    lo, hi = float(bpb.min()), float(bpb.max())
    span = max(hi - lo, 1e-3)

    def resid(th):
        return sigmoid_acc(bpb, math.exp(th[0]), th[1], chance) - acc

    best = None
    for k0 in (1.0 / span, 4.0 / span, 16.0 / span):
        for L00 in (lo, 0.5 * (lo + hi), hi):
            try:
                r = least_squares(
                    resid,
                    [math.log(k0), L00],
                    bounds=(
                        [math.log(1e-3 / span), lo - 10 * span],
                        [math.log(1e3 / span), hi + 10 * span],
                    ),
                )
            except ValueError:
                continue
            if best is None or r.cost < best.cost:
                best = r
    if best is None:
        return {"ok": False, "why": "the sigmoid fit did not converge"}
    k, L0 = math.exp(best.x[0]), float(best.x[1])
    pred = sigmoid_acc(bpb, k, L0, chance)
    ss = float(((acc - acc.mean()) ** 2).sum())
    r2 = 1 - float(((acc - pred) ** 2).sum()) / ss if ss > 0 else float("nan")
    return {
        "ok": True,
        "k": k,
        "L0": L0,
        "chance": chance,
        "n": int(len(bpb)),
        "r2": r2,
        "rmse": float(np.sqrt(np.mean((acc - pred) ** 2))),
    }


def pair_bpb_acc(runs: list, task: str, metric: str) -> tuple[np.ndarray, np.ndarray, list]:
    b, a, used = [], [], []
    for r in runs:
        m = getattr(r, "metrics", {})
        kb, ka = task_key(task, "bpb"), task_key(task, metric)
        if kb in m and ka in m:
            b.append(m[kb])
            a.append(m[ka])
            used.append(r)
    return np.array(b), np.array(a), used


def predicted_accuracy(fit, sig: dict, C: float, level: float) -> tuple[float, float, float]:
    """(accuracy, lo, hi) at compute C: step 1's bpb (its bootstrap curves for the interval)
    through step 2's sigmoid (held fixed)."""

    bpb = float(fit.predict(C))
    acc = float(sigmoid_acc(bpb, sig["k"], sig["L0"], sig["chance"]))
    lo = hi = float("nan")
    boot = fit.predict_boot(C)
    if boot is not None:
        curves = boot[:, 0]
        accs = sigmoid_acc(curves[np.isfinite(curves)], sig["k"], sig["L0"], sig["chance"])
        if len(accs):
            lo, hi = (float(v) for v in percentile_ci(np.asarray(accs), level))
    return acc, lo, hi


def two_step(
    runs: list, task: str, metric: str, fits: dict, c_refs: list[float], ci: float
) -> dict:
    """Step 2 fitted on `runs` (every run's final point that carries both), and each fitted
    variant's predicted accuracy at each C_ref."""
    bpb, acc, used = pair_bpb_acc(runs, task, metric)
    chance = chance_verdict(used, task, metric)
    if chance["chance"] is None:
        return {
            "ok": False,
            "why": f"no run records task:{task}/chance (re-evaluate with python -m andrea.eval)",
            "chance": chance,
        }
    sig = fit_sigmoid(bpb, acc, chance["chance"])
    out = {"ok": sig["ok"], "sigmoid": sig, "chance": chance, "predictions": []}
    if not sig["ok"]:
        out["why"] = sig["why"]
        return out
    if chance["at_chance"]:  # a sigmoid through noise around chance predicts nothing
        out["why"] = "accuracy at chance"
        return out
    for label, f in sorted(fits.items()):
        for C in c_refs:
            a, lo, hi = predicted_accuracy(f, sig, C, f.boot_level or ci)
            out["predictions"].append(
                {
                    "variant": label,
                    "c_ref_pflops_days": C,
                    "acc": a,
                    "lo": lo,
                    "hi": hi,
                    "overlaps_chance": bool(lo <= chance["chance"] <= hi)
                    if math.isfinite(lo)
                    else None,
                }
            )
    return out


def two_step_lines(res: dict, task: str, metric: str) -> list[str]:
    if not res.get("sigmoid"):
        return [f"Two-step prediction of {task}/{metric}: not fitted ({res.get('why')})"]
    sig = res["sigmoid"]
    lines = [
        f"Two-step prediction of {task}/{metric} (Bhagia et al. 2024): compute -> "
        f"{task_key(task, 'bpb')} (the power-law fits above) -> accuracy "
        f"= chance + (1 - chance) / (1 + exp(k (bpb - L0))), one sigmoid for every variant"
    ]
    if not sig["ok"]:
        lines.append(f"  step 2 not fitted: {sig['why']}")
        return lines
    lines.append(
        f"  step 2: k = {sig['k']:.3g}, L0 = {sig['L0']:.4g} bits/byte, chance = "
        f"{sig['chance']:.3f}, R² = {sig['r2']:.3f}, RMSE {sig['rmse']:.3f} over "
        f"{sig['n']} runs"
    )
    if res.get("why") == "accuracy at chance":
        lines.append(
            "  no predicted accuracies: the accuracy sits at chance (below), so the "
            "sigmoid is fitted to noise; the multipliers above are of bpb"
        )
    elif res["predictions"]:
        lines.append(
            "  equal accuracy is equal bpb under one shared sigmoid: the multipliers "
            "above are this task's at equal accuracy too"
        )
    for p in res["predictions"]:
        iv = f" [{p['lo']:.3f}, {p['hi']:.3f}]" if math.isfinite(p["lo"]) else ""
        flag = "  (interval holds chance)" if p["overlaps_chance"] else ""
        lines.append(
            f"  {p['variant']:<24} predicted {metric} {p['acc']:.3f}{iv} at C = "
            f"{p['c_ref_pflops_days']:.3g}{flag}"
        )
    return lines


def backtest_two_step(
    runs: list, task: str, metric: str, baseline: str, n_boot: int, ci: float, seed: int
) -> dict:
    """Hold out each variant's largest size: fit step 1 (bpb, per variant) and step 2 (the
    sigmoid, pooled) on the rest, predict the held-out size's mean accuracy, and compare. The
    interval adds the held-out mean's own binomial noise (its documents and seeds) to step 1's
    bootstrap, as analysis.backtest adds the seed noise to a loss."""

    bpb_runs, _ = with_metric(final_points(runs), task_key(task, "bpb"))
    reps = arrange(bpb_runs)
    held = {label: rep.cells[-1].size for label, rep in reps.items() if len(rep.cells) >= 3}
    skipped = {
        label: f"{len(rep.cells)} size(s); a backtest fits all but the largest and needs 3+"
        for label, rep in reps.items()
        if label not in held
    }
    train = [r for r in bpb_runs if r.label in held and held[r.label] != r.size]
    fitted = fit_variants(train, baseline, FitSettings(n_bootstrap=n_boot, ci=ci, seed=seed))
    skipped.update(fitted.skipped)
    _, _, used = pair_bpb_acc(train, task, metric)
    chance = chance_verdict(used, task, metric)
    rows = []
    if chance["chance"] is None:
        return {
            "rows": rows,
            "skipped": skipped,
            "why": "no chance rate recorded",
            "chance": chance,
        }
    b, a, _ = pair_bpb_acc(train, task, metric)
    sig = fit_sigmoid(b, a, chance["chance"])
    if not sig["ok"]:
        return {"rows": rows, "skipped": skipped, "why": sig["why"], "chance": chance}
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7A5C]))
    for label, f in sorted(fitted.fits.items()):
        test = [r for r in bpb_runs if r.label == label and r.size == held[label]]
        obs_pairs = [
            (r.metrics[task_key(task, metric)], int(r.metrics.get(task_key(task, "n"), 0)))
            for r in test
            if task_key(task, metric) in r.metrics
        ]
        if not obs_pairs:
            continue
        C = float(np.exp(np.mean([math.log(r.compute) for r in test])))
        obs = float(np.mean([p for p, _ in obs_pairs]))
        n_docs = sum(n for _, n in obs_pairs)
        acc, lo, hi = predict_with_noise(f, sig, C, obs, n_docs, f.boot_level or ci, rng)
        rows.append(
            {
                "variant": label,
                "size": held[label],
                "compute_pflops_days": C,
                "n_seeds": len(obs_pairs),
                "observed": obs,
                "predicted": acc,
                "lo": lo,
                "hi": hi,
                "inside": bool(lo <= obs <= hi) if math.isfinite(lo) else None,
            }
        )
    return {"rows": rows, "skipped": skipped, "sigmoid": sig, "chance": chance}


def predict_with_noise(fit, sig, C, obs, n_docs, level, rng):

    acc = float(sigmoid_acc(float(fit.predict(C)), sig["k"], sig["L0"], sig["chance"]))
    boot = fit.predict_boot(C)
    if boot is None:
        return acc, float("nan"), float("nan")
    curves = boot[:, 0]
    accs = sigmoid_acc(curves[np.isfinite(curves)], sig["k"], sig["L0"], sig["chance"])
    p = min(max(obs, 1e-3), 1 - 1e-3)
    accs = accs + rng.normal(0.0, math.sqrt(p * (1 - p) / max(n_docs, 1)), size=accs.shape)
    lo, hi = percentile_ci(accs, level)
    return acc, float(lo), float(hi)


def backtest_markdown(bt: dict, task: str, metric: str, ci: float) -> str:
    pct = f"{100 * ci:.0f} %"
    lines = [
        f"Two-step backtest of {task}/{metric}: step 1 (bpb ~ compute, per variant) and "
        f"step 2 (accuracy ~ bpb, a sigmoid over every run) fitted without each variant's "
        f"largest size, {pct} prediction intervals (step 1's seed bootstrap + the held-out "
        f"mean's binomial noise).",
        "",
    ]
    if bt.get("why"):
        lines.append(f"not backtested: {bt['why']}")
    else:
        lines += [
            "| variant | size | compute (PF-days) | predicted | interval | observed "
            "(seeds) | inside |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in bt["rows"]:
            iv = f"[{r['lo']:.3f}, {r['hi']:.3f}]" if math.isfinite(r["lo"]) else "–"
            inside = "–" if r["inside"] is None else ("yes" if r["inside"] else "**no**")
            lines.append(
                f"| {r['variant']} | {r['size']} | {r['compute_pflops_days']:.3g} | "
                f"{r['predicted']:.3f} | {iv} | {r['observed']:.3f} ({r['n_seeds']}) | "
                f"{inside} |"
            )
    if bt.get("chance", {}).get("line"):
        lines += ["", bt["chance"]["line"]]
    for label, why in bt.get("skipped", {}).items():
        lines.append(f"not backtested: {label}: {why}")
    return "\n".join(lines) + "\n"
