"""`bench.scalebench`'s table: printed per split, and written as markdown, CSV and JSON.

One row per (split, method, fit): the published rows of Li et al. 2026 (Table 2; "not
published" where the paper has none), then this harness's, each cell the mean ± sd of the
target-region R² over the repetitions at one budget (the fit to the whole pool: one cell) and,
beside it, their median: R² is clipped at -1, so a few failed fits pull a mean far from what
most repetitions score, and the issue's goals compare with the median random choice. The paper
publishes no medians. Every harness row also gives the RMS relative error of the predicted loss
over the target runs, mean ± sd and median over the repetitions (`rms_...` in the CSV and JSON,
a second table in the printout and the markdown; inf where no fit predicted): the headline where
a target region holds a few runs. Every row carries its split's mark, dev or held-out
(bench/scalebench_splits.py: DEV and PLANNER_DEV).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from andrea.run.rundir import atomic_write_bytes
from bench.scalebench_splits import PUBLISHED, SKIPPED

FIT_LABEL = {"benchmark": "benchmark's fit", "andrea": "andrea's fit", "published": "published"}


def _stats(values) -> tuple[list | None, list | None]:
    """([(mean, sd)], [median]) per budget of a [reps, cells] array; None, None for a failed
    method. A cell with an inf (a repetition without a fit) has mean inf and sd nan."""
    if values is None:
        return None, None
    with np.errstate(invalid="ignore"):
        cells = [(float(c.mean()), float(c.std())) for c in values.T]
    return cells, [float(np.median(c)) for c in values.T]


def table_rows(split, result, methods) -> list[dict]:
    base = {"split": split.name, "set": split.mark, "law": split.law.name}
    rows = []
    for label, cells in PUBLISHED.get(split.name, {"not published": ()}).items():
        rows.append({**base, "method": f"paper: {label}", "fit": "published", "cells": cells})
    for m in methods:
        for fit, r2 in result["rows"][m].items():
            rms = result["rms"][m][fit]
            cells, medians = _stats(r2)
            rms_cells, rms_medians = _stats(rms)
            rows.append(
                {**base, "method": m, "fit": fit, "cells": cells, "medians": medians, "values": r2}
                | {"rms_cells": rms_cells, "rms_medians": rms_medians, "rms_values": rms}
            )
    return rows


def _cell(c) -> str:
    return f"{c[0]:+.2f} ± {c[1]:.2f}"


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %" if np.isfinite(x) else "inf"


def _rms_cells(row, n: int) -> list[str]:
    """The RMS relative error's cells of a harness row, "mean ± sd [median]", in percent."""
    if row["rms_cells"] is None:
        return ["failed (see stderr)"] + [""] * (n - 1)
    out = [
        (f"{100 * m:.2f} ± {100 * sd:.2f}" if np.isfinite(m) else "inf") + f" [{_pct(med)}]"
        for (m, sd), med in zip(row["rms_cells"], row["rms_medians"])
    ]
    return out + [""] * (n - len(out))


def _cells(row, n: int) -> list[str]:
    if row["cells"] is None:
        return ["failed (see stderr)"] + [""] * (n - 1)
    out = [_cell(c) for c in row["cells"]]
    return (out or ["not published"]) + [""] * (n - len(out or [0]))


def _medians(row, n: int) -> list[str]:
    """The median cells of a row: blank where the paper publishes none or the method failed."""
    out = [f"{m:+.2f}" for m in row.get("medians") or []]
    return out + [""] * (n - len(out))


def _paired(row, n: int) -> list[str]:
    """mean ± sd, median, for each of n budgets: the markdown row's cells."""
    return [x for pair in zip(_cells(row, n), _medians(row, n)) for x in pair]


def _budgets(split) -> str:
    return "/".join(f"{100 * f:g}" for f in split.spec.fractions) + " %"


def print_split(split, result, methods, reps) -> None:
    g = len(split.groups)
    why = f"dev: {split.why_dev}" if split.why_dev else "held out"
    print(
        f"\n{split.name} [{why}]: {split.n_train} candidate runs"
        + (f" in {g} groups" if g > 1 else "")
        + f", {split.n_test} target runs; law {split.law.name} ({', '.join(split.law.inputs)}); "
        f"target-region R², mean ± sd [median] over {reps} repetitions"
        + (
            f"; not scored with the benchmark's fit: {split.spec.no_benchmark_fit}"
            if split.spec.no_benchmark_fit
            else ""
        )
    )
    heads = [f"{100 * f:g} % budget" for f in split.spec.fractions]
    print(f"{'method':<28} {'fit':<16} " + " ".join(f"{h:>22}" for h in heads))
    for row in table_rows(split, result, methods):
        name = row["method"] if row["fit"] == "published" else f"here: {row['method']}"
        if row["method"] == "full":
            name = "here: all runs"
        n = len(heads)
        cells = [c + (f" [{m}]" if m else "") for c, m in zip(_cells(row, n), _medians(row, n))]
        print(f"{name:<28} {FIT_LABEL[row['fit']]:<16} " + " ".join(f"{c:>22}" for c in cells))
    print(f"RMS relative error over the {split.n_test} target runs, mean ± sd [median], %:")
    for row in table_rows(split, result, methods):
        if row["fit"] == "published":
            continue
        name = "here: all runs" if row["method"] == "full" else f"here: {row['method']}"
        cells = _rms_cells(row, len(heads))
        print(f"{name:<28} {FIT_LABEL[row['fit']]:<16} " + " ".join(f"{c:>22}" for c in cells))
    secs = ", ".join(f"{m} {s:.0f} s" for m, s in result["seconds"].items())
    print(f"({secs} on this machine)")


def markdown(splits, results, methods, reps, load) -> str:
    out = [
        f"Target-region R², mean ± sd and median over {reps} repetitions (budgets: fractions of "
        f"the pool's cost, cumulative; the paper publishes no medians; load average "
        f"{load[0]:.1f}, {load[1]:.1f}).",
        "",
        "| split (budgets) | set | law | method | fit | budget 1 | median 1 | budget 2 | median 2 "
        "| budget 3 | median 3 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in splits:
        for row in table_rows(s, results[s.name], methods):
            method = "all runs" if row["method"] == "full" else row["method"]
            cells = " | ".join(_paired(row, 3))
            out.append(
                f"| {s.name} ({_budgets(s)}) | {row['set']} | {row['law']} | {method} | "
                f"{FIT_LABEL[row['fit']]} | {cells} |"
            )
    out += [
        "",
        f"RMS relative error of the predicted loss over the target runs, %, mean ± sd [median] "
        f"over {reps} repetitions (inf: a repetition without a fit).",
        "",
        "| split (budgets) | set | law | method | fit | budget 1 | budget 2 | budget 3 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in splits:
        for row in table_rows(s, results[s.name], methods):
            if row["fit"] == "published":
                continue
            method = "all runs" if row["method"] == "full" else row["method"]
            cells = " | ".join(_rms_cells(row, 3))
            out.append(
                f"| {s.name} ({_budgets(s)}) | {row['set']} | {row['law']} | {method} | "
                f"{FIT_LABEL[row['fit']]} | {cells} |"
            )
    out += ["", "Not replayed:", ""] + [f"- {k}: {v}" for k, v in SKIPPED.items()]
    return "\n".join(out) + "\n"


def csv_text(splits, results, methods) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["split", "set", "law", "method", "fit", "fraction", "mean", "sd", "median"]
        + ["rms_mean", "rms_sd", "rms_median"]
    )
    for s in splits:
        for row in table_rows(s, results[s.name], methods):
            n = len(row["cells"] or [])
            medians = row.get("medians") or [""] * n
            rms = [
                (*c, m) for c, m in zip(row.get("rms_cells") or [], row.get("rms_medians") or [])
            ]
            rms += [("", "", "")] * (n - len(rms))  # the paper's rows: none
            for k, (c, med, e) in enumerate(zip(row["cells"] or [], medians, rms)):
                frac = 1.0 if n == 1 else s.spec.fractions[k]
                w.writerow(
                    [s.name, row["set"], row["law"], row["method"], row["fit"], frac, *c, med, *e]
                )
    return buf.getvalue()


def _finite(values) -> list:
    """Values for JSON: inf (no fit) as null, which JSON can write."""
    return [float(x) if np.isfinite(x) else None for x in values]


def json_obj(splits, results, methods, reps, load) -> dict:
    out = {"reps": reps, "methods": list(methods), "load": list(load), "skipped": SKIPPED}
    out["splits"] = {}
    for s in splits:
        rows = []
        for row in table_rows(s, results[s.name], methods):
            v = row.get("values")
            e = row.get("rms_values")
            rows.append(
                {k: row[k] for k in ("method", "fit", "cells")}
                | ({"medians": row["medians"]} if row.get("medians") is not None else {})
                | ({"values": np.asarray(v).tolist()} if v is not None else {})
                | ({"rms_medians": _finite(row["rms_medians"])} if e is not None else {})
                | ({"rms_values": [_finite(r) for r in np.asarray(e)]} if e is not None else {})
            )
        out["splits"][s.name] = {
            "set": s.mark,
            "why_dev": s.why_dev,
            "law": s.law.name,
            "formula": s.law.formula,
            "inputs": list(s.law.inputs),
            "groups": [g.name for g in s.groups],
            "n_train": s.n_train,
            "n_test": s.n_test,
            "fractions": list(s.spec.fractions),
            "rows": rows,
            "seconds": results[s.name]["seconds"],
        }
    return out


def write_outputs(out: Path, splits, results, methods, reps, load) -> None:
    """scalebench.md, .csv and .json under `out`, each written atomically."""
    texts = {
        "scalebench.md": markdown(splits, results, methods, reps, load),
        "scalebench.csv": csv_text(splits, results, methods),
        "scalebench.json": json.dumps(json_obj(splits, results, methods, reps, load), indent=1),
    }
    for name, text in texts.items():
        atomic_write_bytes(Path(out) / name, text.encode())
