"""`python -m analysis.predict FIT_DIR QUERY.csv --out PRED.csv`: the loss a fitted law predicts.

FIT_DIR is an `analysis.fit --out` directory: its fits.json keeps the chosen law's parameters and
bootstrap per variant (`--law`; the C power law by default). Each row of QUERY.csv names where to
predict: `params` and `tokens` (a law in N and D; a C law takes C = 6·N·D), or `compute` (FLOPs as
a number, 1e22, or PFLOP/s-days with the unit, 3PF-days; a law in N and D answers with its
compute-optimal loss there); an optional `variant` column picks the variant (default: every
fitted variant). PRED.csv gets, per row and variant, the predicted loss, its confidence interval
from the fit's bootstrap (ci_lo/ci_hi: the fitted law's uncertainty, the expected loss, not one
run's seed noise), its prediction interval of a new run's loss (pi_lo/pi_hi: the band calibrated
on the sweep's own rollouts, `analysis.estimates.band_intervals.loss_row`; for a compute query
to a law in N and D, at the compute-optimal loss, though the band was calibrated on the runs' own
(N, D), not on the frontier) and the extrapolation factor (the row's compute over the largest
compute fitted). Past the factor at which an interval's coverage was measured (docs/laws.md) it
is withheld and the row's note says why.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

import numpy as np

from analysis.estimates.band_intervals import loss_line, loss_row, withheld_notes
from analysis.estimates.conformal import Band
from analysis.estimates.law_fits import withheld_interval
from analysis.fits import law_registry
from analysis.fits.laws import LawError, LawFit
from analysis.report.arguments import common_parser
from andrea.run.rundir import atomic_write_bytes, read_json
from andrea.run.units import parse_compute, to_pflops_days

QUERY_COLUMNS = ("params", "tokens", "compute")
OUT_COLUMNS = (
    "variant",
    "law",
    "params",
    "tokens",
    "compute_pflops_days",
    "loss",
    "ci_lo",
    "ci_hi",
    "ci_level",
    "pi_lo",
    "pi_hi",
    "pi_level",
    "extrapolation",
    "note",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m analysis.predict",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        parents=[common_parser(out="the predictions CSV to write", out_required=True)],
    )
    p.add_argument("fit_dir", type=Path, help="an analysis.fit --out directory (its fits.json)")
    p.add_argument(
        "query",
        type=Path,
        help="CSV with params,tokens and/or compute per row (compute: FLOPs as a number, 1e22, "
        "or PFLOP/s-days with the unit, 3PF-days; optional: variant)",
    )
    return p


def load_fits(fit_dir: Path) -> tuple[str, dict[str, LawFit]]:
    """(law name, label → LawFit) from fits.json; ValueError saying what is missing."""
    name, fits, _ = load_saved(fit_dir)
    return name, fits


def load_saved(fit_dir: Path) -> tuple[str, dict[str, LawFit], dict]:
    """(law name, label → LawFit, the saved law's prediction band) from fits.json."""
    rep = read_json(fit_dir / "fits.json")
    if not isinstance(rep, dict):
        raise ValueError(
            f"{fit_dir}/fits.json is missing or unreadable: run python -m "
            f"analysis.fit ... --out {fit_dir} first"
        )
    saved = rep.get("law")
    if not isinstance(saved, dict) or not saved.get("fits"):
        raise ValueError(
            f"{fit_dir}/fits.json keeps no fitted law (an older analysis.fit, or "
            "nothing fitted): rerun python -m analysis.fit"
        )
    law = law_registry.get(saved["chosen"])
    fits = {label: LawFit.from_json(label, d, law) for label, d in saved["fits"].items()}
    return law.name, fits, saved.get("prediction_band") or {}


def read_query(path: Path, labels) -> list[dict]:
    """Rows as {"variant": label or None, "params", "tokens", "compute" (PF-days)}, ValueError
    naming the row and column at fault."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: cannot read the query ({e})") from None
    reader = csv.DictReader(io.StringIO(text))
    cols = [c.strip() for c in reader.fieldnames or []]
    if not any(c in cols for c in QUERY_COLUMNS):
        raise ValueError(
            f"{path}: a query needs params and tokens, or compute, per row; its "
            f"columns are {', '.join(cols) or 'none'}"
        )
    if ("params" in cols) != ("tokens" in cols) and "compute" not in cols:
        raise ValueError(f"{path}: params and tokens go together (or give compute)")
    rows = []
    for i, raw in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
        q = {"variant": row.get("variant") or None, "line": i, "source": str(path)}
        if q["variant"] is not None and q["variant"] not in labels:
            raise ValueError(
                f"{path} line {i}: variant {q['variant']!r} was not fitted; fitted: "
                f"{', '.join(sorted(labels))}"
            )
        for k in ("params", "tokens"):
            if row.get(k):
                try:
                    q[k] = float(row[k])
                except ValueError:
                    raise ValueError(f"{path} line {i}: {k}={row[k]!r} is not a number") from None
                if not q[k] > 0:
                    raise ValueError(f"{path} line {i}: {k}={row[k]} must be > 0")
        if row.get("compute"):
            try:
                q["compute"] = parse_compute(row["compute"])
                q["compute_text"] = row["compute"].strip()
            except ValueError as e:
                raise ValueError(f"{path} line {i}: {e}") from None
        if "compute" not in q and not ("params" in q and "tokens" in q):
            raise ValueError(f"{path} line {i}: needs params and tokens, or compute")
        rows.append(q)
    if not rows:
        raise ValueError(f"{path}: no rows to predict")
    return rows


def _inputs(fit: LawFit, q: dict) -> tuple[dict, str]:
    """The law's inputs for one query row, and a note on how they were made."""
    if all(k in q for k in fit.law.inputs):
        return {k: np.array([q[k]]) for k in fit.law.inputs}, ""
    if fit.law.inputs == ("compute",) and "params" in q:
        c = to_pflops_days(6.0 * q["params"] * q["tokens"])
        return {"compute": np.array([c])}, "compute = 6·params·tokens"
    if "compute" in q:
        return {"compute": np.array([q["compute"]])}, "compute-optimal loss at this compute"
    raise LawError(f"law {fit.name} needs {', '.join(fit.law.inputs)} (or compute)")


def check_row(fit: LawFit, q: dict) -> None:
    """ValueError for a row the fit cannot answer: inputs it lacks, a compute below the data
    (a law fitted to larger runs says nothing reliable about smaller ones)."""
    X, _ = _inputs(fit, q)
    c = float(fit.compute_of(X)[0])
    if fit.compute_min and c < fit.compute_min / 1.0001:
        raise ValueError(
            f"{q.get('source', 'query')} line {q['line']}: compute {c:.4g} PF-days "
            f"is below the data (the smallest fitted compute of {fit.label} is "
            f"{fit.compute_min:.4g} PF-days)" + _flops_hint(q)
        )


def _flops_hint(q: dict) -> str:
    """A bare number in the compute column is FLOPs; say so where the row wrote one, as a user
    reading the fit table's PFLOP/s-days may have meant those."""
    text = q.get("compute_text", "")
    try:
        float(text)
    except ValueError:
        return ""
    return f"; a bare number is FLOPs: PFLOP/s-days are written {text}PF-days"


def _band(saved: dict) -> tuple[Band | None, str]:
    if saved.get("q") is not None:
        return Band.from_json(saved), ""
    return None, saved.get("withheld") or "no prediction band in fits.json (an older analysis.fit)"


def predict_rows(fits: dict[str, LawFit], rows: list[dict], band_saved=None) -> list[dict]:
    band, band_why = _band(band_saved or {})
    out = []
    for q in rows:
        for label in [q["variant"]] if q["variant"] else sorted(fits):
            X, note = _inputs(fits[label], q)
            r = loss_row(
                fits[label], X, note, band, band_why, lambda r: withheld_interval(r, "loss")
            )
            r["params"], r["tokens"] = q.get("params", ""), q.get("tokens", "")
            out.append(r)
    return out


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=OUT_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        law, fits, band_saved = load_saved(args.fit_dir)
        rows = read_query(args.query, fits)
        for q in rows:  # every row answerable, before any prediction
            for label in [q["variant"]] if q["variant"] else fits:
                check_row(fits[label], q)
    except (ValueError, LawError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    pred = predict_rows(fits, rows, band_saved)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out, to_csv(pred).encode())
    print(f"Law {law} from {args.fit_dir}/fits.json; {len(pred)} prediction(s):")
    for r in pred:
        print(loss_line(r))
        for n in withheld_notes(r):
            print(f"      ! {n}")
    print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
