"""Downstream task metrics in the analysis: `--metric task:<task>/<metric>`.

`python -m andrea.eval` records a run's task metrics in `<run>/tasks/<settings-hash>.json`
(andrea/eval/tasks.py). `read_task_metrics` gives a finished run's *final point* the keys
`task:<task>/<metric>` — `acc`, `acc_norm`, `loss` (nats per token of the correct continuation),
`bpb` (bits per byte of it), every metric the harness reported, and `n` (documents) and
`chance` (a uniform guess's accuracy) — from the evaluations of its final checkpoint (the newest
evaluation when several settings recorded the same task). `metric_value(run, name)` is the one
lookup from a run record and a metric name to a number.

Two kinds of task metric, two fits:

- lower is better (`loss`, `bpb`, perplexities): fitted against compute exactly like the
  validation loss, L = A·C^-alpha, with the same seed bootstrap and multiplier. At small sizes
  this is the usable signal (DataDecide, Magnusson et al. 2025, arXiv:2504.11393: the correct
  answer's continuous loss ranks models where accuracy is still at chance).
- higher is better (`acc`, `acc_norm`): the two-step prediction of Bhagia et al. 2024
  (arXiv:2412.04403, OLMo's model ladder): step 1, the task's bpb against compute per variant
  (the power law above); step 2, accuracy as a sigmoid of that bpb shared by every variant and
  size, here with its floor fixed at the chance rate and its ceiling at 1 (Bhagia et al. fit
  both; a tiny ladder cannot pin four parameters):

      acc(L) = chance + (1 - chance) / (1 + exp(k · (L - L0)))       k > 0

  Because step 2 is one increasing map shared by all variants, equal accuracy means equal bpb:
  the compute multiplier at equal accuracy is the bpb multiplier of step 1.

A task whose accuracy sits at chance at these sizes has a meaningless accuracy multiplier:
`chance_verdict` says so when every run's accuracy lies within its 95 % binomial (Wilson)
interval of the chance rate.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Optional

import numpy as np

from andrea.rundir import RunDir, read_json

TASK_PREFIX = "task:"
# Metrics where higher is better (the harness's accuracy family); everything else is a loss.
HIGHER_IS_BETTER = ("acc", "acc_norm", "acc_bytes", "acc_mutual_info", "exact_match", "f1",
                    "mcc")
# Keys of a task record that are bookkeeping, not metrics.
_NOT_METRICS = ("output_type", "harness")
Z95 = 1.959963984540054


class MetricError(ValueError):
    """A metric name the analysis does not know, or one no run carries."""


def parse_metric(name: str) -> tuple[str, str] | None:
    """(task, metric) of `task:<task>/<metric>`; None for val_loss. MetricError otherwise."""
    if name == "val_loss":
        return None
    if not name.startswith(TASK_PREFIX) or "/" not in name[len(TASK_PREFIX):]:
        raise MetricError(f"unknown metric {name!r}: use val_loss or task:<task>/<metric> "
                          f"(e.g. task:copa_local/bpb; python -m andrea.eval records them)")
    task, _, metric = name[len(TASK_PREFIX):].rpartition("/")
    if not task or not metric:
        raise MetricError(f"metric {name!r} needs both a task and a metric: task:<task>/<metric>")
    return task, metric


def higher_is_better(name: str) -> bool:
    parsed = parse_metric(name)
    return parsed is not None and parsed[1].split("@")[0] in HIGHER_IS_BETTER


def metric_value(run, name: str) -> Optional[float]:
    """The value of metric `name` for one run record (an analysis.collect.Run), or None when
    the run does not carry it (task metrics exist only on a run's final point)."""
    if name == "val_loss":
        return run.val_loss
    value = getattr(run, "metrics", {}).get(name)
    return None if value is None or not math.isfinite(value) else float(value)


# --------------------------------------------------------------------------------------------
# Reading the records
# --------------------------------------------------------------------------------------------
def read_task_metrics(rd: RunDir, results: dict) -> dict[str, float]:
    """`task:<task>/<metric>` -> value from the evaluations of the run's final checkpoint."""
    steps = results.get("steps")
    folder = Path(rd.root) / "tasks"
    if not folder.is_dir():
        return {}
    newest: dict[str, tuple[str, dict]] = {}
    for path in sorted(folder.glob("*.json")):
        rec = read_json(path)
        if not isinstance(rec, dict) or not isinstance(rec.get("tasks"), dict):
            continue
        if steps is not None and rec.get("step") != steps:
            continue  # an evaluation of an earlier checkpoint: not the final point's
        when = str(rec.get("evaluated_utc") or "")
        for task, metrics in rec["tasks"].items():
            if isinstance(metrics, dict) and (task not in newest or when > newest[task][0]):
                newest[task] = (when, metrics)
    out: dict[str, float] = {}
    for task, (_, metrics) in newest.items():
        values = dict(metrics.get("harness") or {})
        values.update({k: v for k, v in metrics.items() if k not in _NOT_METRICS})
        for k, v in values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[f"{TASK_PREFIX}{task}/{k}"] = float(v)
    return out


def with_metric(runs: list, name: str) -> tuple[list, list]:
    """(copies of the runs that carry `name`, with their val_loss replaced by its value, so
    every fit reads it; the runs that lack it). A fit on them is a fit of that metric."""
    have, lack = [], []
    for r in runs:
        v = metric_value(r, name)
        if v is None or v <= 0:
            lack.append(r)
            continue
        c = copy.copy(r)
        c.val_loss = v
        have.append(c)
    return have, lack


def available(runs: list) -> list[str]:
    return sorted({k for r in runs for k in getattr(r, "metrics", {})
                   if not k.endswith(("/n", "/chance"))})


# --------------------------------------------------------------------------------------------
# Chance
# --------------------------------------------------------------------------------------------
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
    key = f"{TASK_PREFIX}{task}/{metric}"
    rows = []
    for r in runs:
        m = getattr(r, "metrics", {})
        if key in m and f"{TASK_PREFIX}{task}/n" in m and f"{TASK_PREFIX}{task}/chance" in m:
            rows.append((m[key], int(m[f"{TASK_PREFIX}{task}/n"]), m[f"{TASK_PREFIX}{task}/chance"]))
    if not rows:
        return {"at_chance": None, "chance": None, "above": 0, "n_runs": 0, "line": None}
    chance = float(np.mean([c for _, _, c in rows]))
    above = sum(1 for p, n, c in rows if wilson(p, n)[0] > c)
    at = above == 0
    n_docs = sorted({n for _, n, _ in rows})
    accs = [p for p, _, _ in rows]
    docs = f"{n_docs[0]}" if len(n_docs) == 1 else f"{n_docs[0]}-{n_docs[-1]}"
    if at:
        line = (f"{task}/{metric} sits at chance at these sizes: no run's accuracy is above the "
                f"chance rate {chance:.3f} at 95 % ({min(accs):.3f}-{max(accs):.3f} over "
                f"{len(rows)} runs of {docs} documents; binomial intervals), so an accuracy "
                f"multiplier means nothing here; the continuous task:{task}/bpb is the signal")
    else:
        line = (f"{task}/{metric}: {above} of {len(rows)} runs above chance ({chance:.3f}) at "
                f"95 %")
    return {"at_chance": at, "chance": chance, "above": above, "n_runs": len(rows), "line": line}


# --------------------------------------------------------------------------------------------
# Two-step prediction (Bhagia et al. 2024): compute -> task bpb -> accuracy
# --------------------------------------------------------------------------------------------
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
                r = least_squares(resid, [math.log(k0), L00],
                                  bounds=([math.log(1e-3 / span), lo - 10 * span],
                                          [math.log(1e3 / span), hi + 10 * span]))
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
    return {"ok": True, "k": k, "L0": L0, "chance": chance, "n": int(len(bpb)), "r2": r2,
            "rmse": float(np.sqrt(np.mean((acc - pred) ** 2)))}


def pair_bpb_acc(runs: list, task: str, metric: str) -> tuple[np.ndarray, np.ndarray, list]:
    b, a, used = [], [], []
    for r in runs:
        m = getattr(r, "metrics", {})
        kb, ka = f"{TASK_PREFIX}{task}/bpb", f"{TASK_PREFIX}{task}/{metric}"
        if kb in m and ka in m:
            b.append(m[kb])
            a.append(m[ka])
            used.append(r)
    return np.array(b), np.array(a), used


def predicted_accuracy(fit, sig: dict, C: float, level: float) -> tuple[float, float, float]:
    """(accuracy, lo, hi) at compute C: step 1's bpb (its bootstrap curves for the interval)
    through step 2's sigmoid (held fixed)."""
    from analysis.bootstrap import percentile_ci
    from analysis.powerlaw import predict

    bpb = float(fit.predict(C))
    acc = float(sigmoid_acc(bpb, sig["k"], sig["L0"], sig["chance"]))
    lo = hi = float("nan")
    if fit.boot and len(fit.boot.get("A", [])):
        with np.errstate(all="ignore"):
            curves = predict(C, fit.boot["A"], fit.boot["alpha"], fit.boot.get("E", 0.0))
        accs = sigmoid_acc(curves[np.isfinite(curves)], sig["k"], sig["L0"], sig["chance"])
        if len(accs):
            lo, hi = (float(v) for v in percentile_ci(np.asarray(accs), level))
    return acc, lo, hi


def two_step(runs: list, task: str, metric: str, fits: dict, c_refs: list[float],
             ci: float) -> dict:
    """Step 2 fitted on `runs` (every run's final point that carries both), and each fitted
    variant's predicted accuracy at each C_ref."""
    bpb, acc, used = pair_bpb_acc(runs, task, metric)
    chance = chance_verdict(used, task, metric)
    if chance["chance"] is None:
        return {"ok": False, "why": f"no run records task:{task}/chance (re-evaluate with "
                                    f"python -m andrea.eval)", "chance": chance}
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
            out["predictions"].append({"variant": label, "c_ref_pflops_days": C, "acc": a,
                                       "lo": lo, "hi": hi,
                                       "overlaps_chance": bool(lo <= chance["chance"] <= hi)
                                       if math.isfinite(lo) else None})
    return out


def two_step_lines(res: dict, task: str, metric: str) -> list[str]:
    if not res.get("sigmoid"):
        return [f"Two-step prediction of {task}/{metric}: not fitted ({res.get('why')})"]
    sig = res["sigmoid"]
    lines = [f"Two-step prediction of {task}/{metric} (Bhagia et al. 2024): compute -> "
             f"task:{task}/bpb (the power-law fits above) -> accuracy "
             f"= chance + (1 - chance) / (1 + exp(k (bpb - L0))), one sigmoid for every variant"]
    if not sig["ok"]:
        lines.append(f"  step 2 not fitted: {sig['why']}")
        return lines
    lines.append(f"  step 2: k = {sig['k']:.3g}, L0 = {sig['L0']:.4g} bits/byte, chance = "
                 f"{sig['chance']:.3f}, R² = {sig['r2']:.3f}, RMSE {sig['rmse']:.3f} over "
                 f"{sig['n']} runs")
    if res.get("why") == "accuracy at chance":
        lines.append("  no predicted accuracies: the accuracy sits at chance (below), so the "
                     "sigmoid is fitted to noise; the multipliers above are of bpb")
    elif res["predictions"]:
        lines.append("  equal accuracy is equal bpb under one shared sigmoid: the multipliers "
                     "above are this task's at equal accuracy too")
    for p in res["predictions"]:
        iv = (f" [{p['lo']:.3f}, {p['hi']:.3f}]" if math.isfinite(p["lo"]) else "")
        flag = "  (interval holds chance)" if p["overlaps_chance"] else ""
        lines.append(f"  {p['variant']:<24} predicted {metric} {p['acc']:.3f}{iv} at C = "
                     f"{p['c_ref_pflops_days']:.3g}{flag}")
    return lines


def backtest_two_step(runs: list, task: str, metric: str, baseline: str, n_boot: int, ci: float,
                      seed: int) -> dict:
    """Hold out each variant's largest size: fit step 1 (bpb, per variant) and step 2 (the
    sigmoid, pooled) on the rest, predict the held-out size's mean accuracy, and compare. The
    interval adds the held-out mean's own binomial noise (its documents and seeds) to step 1's
    bootstrap, as analysis.backtest adds the seed noise to a loss."""
    from analysis.estimate import final_points, fit_variants
    from analysis.replicates import arrange

    bpb_runs, _ = with_metric(final_points(runs), f"{TASK_PREFIX}{task}/bpb")
    reps = arrange(bpb_runs)
    held = {label: rep.cells[-1].size for label, rep in reps.items() if len(rep.cells) >= 3}
    skipped = {label: f"{len(rep.cells)} size(s); a backtest fits all but the largest and "
               f"needs 3+" for label, rep in reps.items() if label not in held}
    train = [r for r in bpb_runs if r.label in held and held[r.label] != r.size]
    fitted = fit_variants(train, baseline, n_bootstrap=n_boot, ci=ci, seed=seed)
    skipped.update(fitted.skipped)
    _, _, used = pair_bpb_acc(train, task, metric)
    chance = chance_verdict(used, task, metric)
    rows = []
    if chance["chance"] is None:
        return {"rows": rows, "skipped": skipped, "why": "no chance rate recorded",
                "chance": chance}
    b, a, _ = pair_bpb_acc(train, task, metric)
    sig = fit_sigmoid(b, a, chance["chance"])
    if not sig["ok"]:
        return {"rows": rows, "skipped": skipped, "why": sig["why"], "chance": chance}
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x7A5C]))
    for label, f in sorted(fitted.fits.items()):
        test = [r for r in bpb_runs if r.label == label and r.size == held[label]]
        obs_pairs = [(r.metrics[f"{TASK_PREFIX}{task}/{metric}"],
                      int(r.metrics.get(f"{TASK_PREFIX}{task}/n", 0))) for r in test
                     if f"{TASK_PREFIX}{task}/{metric}" in r.metrics]
        if not obs_pairs:
            continue
        C = float(np.exp(np.mean([math.log(r.compute) for r in test])))
        obs = float(np.mean([p for p, _ in obs_pairs]))
        n_docs = sum(n for _, n in obs_pairs)
        acc, lo, hi = predict_with_noise(f, sig, C, obs, n_docs, f.boot_level or ci, rng)
        rows.append({"variant": label, "size": held[label], "compute_pflops_days": C,
                     "n_seeds": len(obs_pairs), "observed": obs, "predicted": acc, "lo": lo,
                     "hi": hi, "inside": bool(lo <= obs <= hi) if math.isfinite(lo) else None})
    return {"rows": rows, "skipped": skipped, "sigmoid": sig, "chance": chance}


def predict_with_noise(fit, sig, C, obs, n_docs, level, rng):
    from analysis.bootstrap import percentile_ci
    from analysis.powerlaw import predict

    acc = float(sigmoid_acc(float(fit.predict(C)), sig["k"], sig["L0"], sig["chance"]))
    if not (fit.boot and len(fit.boot.get("A", []))):
        return acc, float("nan"), float("nan")
    with np.errstate(all="ignore"):
        curves = predict(C, fit.boot["A"], fit.boot["alpha"], fit.boot.get("E", 0.0))
    accs = sigmoid_acc(curves[np.isfinite(curves)], sig["k"], sig["L0"], sig["chance"])
    p = min(max(obs, 1e-3), 1 - 1e-3)
    accs = accs + rng.normal(0.0, math.sqrt(p * (1 - p) / max(n_docs, 1)), size=accs.shape)
    lo, hi = percentile_ci(accs, level)
    return acc, float(lo), float(hi)


def backtest_markdown(bt: dict, task: str, metric: str, ci: float) -> str:
    pct = f"{100 * ci:.0f} %"
    lines = [f"Two-step backtest of {task}/{metric}: step 1 (bpb ~ compute, per variant) and "
             f"step 2 (accuracy ~ bpb, a sigmoid over every run) fitted without each variant's "
             f"largest size, {pct} prediction intervals (step 1's seed bootstrap + the held-out "
             f"mean's binomial noise).", ""]
    if bt.get("why"):
        lines.append(f"not backtested: {bt['why']}")
    else:
        lines += ["| variant | size | compute (PF-days) | predicted | interval | observed "
                  "(seeds) | inside |", "|---|---|---|---|---|---|---|"]
        for r in bt["rows"]:
            iv = f"[{r['lo']:.3f}, {r['hi']:.3f}]" if math.isfinite(r["lo"]) else "–"
            inside = "–" if r["inside"] is None else ("yes" if r["inside"] else "**no**")
            lines.append(f"| {r['variant']} | {r['size']} | {r['compute_pflops_days']:.3g} | "
                         f"{r['predicted']:.3f} | {iv} | {r['observed']:.3f} ({r['n_seeds']}) | "
                         f"{inside} |")
    if bt.get("chance", {}).get("line"):
        lines += ["", bt["chance"]["line"]]
    for label, why in bt.get("skipped", {}).items():
        lines.append(f"not backtested: {label}: {why}")
    return "\n".join(lines) + "\n"
