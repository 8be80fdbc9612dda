"""The fit table in four renderings: terminal, Markdown, CSV (one number per cell) and LaTeX
(booktabs).

Every rendering is built from the same rows (`table_rows`), so they cannot disagree.
"""

from __future__ import annotations

import csv
import io
import math

from analysis.fits.laws import LawFit


def _g(x, digits=4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _m(x) -> str:
    """Multipliers: two decimals, so a column of them lines up."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return "inf" if math.isinf(x) else f"{x:.2f}"


def _ci(lo, hi, digits=4) -> str:
    return f"[{_g(lo, digits)}, {_g(hi, digits)}]"


def table_rows(fits: dict[str, LawFit], multipliers: list[dict], baseline: str) -> list[dict]:
    """One dict per fitted variant, baseline first; multiplier columns use the first C_ref. The
    columns are the C laws' parameters A, alpha and E (None where the law has no E)."""
    first = {}
    for m in multipliers:
        first.setdefault(m["variant"], m)
    order = sorted(fits, key=lambda k: (k != baseline, k))
    rows = []
    for label in order:
        f = fits[label]
        m = first.get(label)
        p, ci = f.params(), f.ci()
        lsq = f.params(f.lsq_theta) if f.lsq_theta is not None else {}
        rows.append(
            {
                "variant": label,
                "form": f.name,
                "n_points": f.n_points,
                "A": p["A"],
                "A_lo": ci["A"][0],
                "A_hi": ci["A"][1],
                "alpha": p["alpha"],
                "alpha_lo": ci["alpha"][0],
                "alpha_hi": ci["alpha"][1],
                "E": p.get("E"),
                "E_lo": ci.get("E", (None, None))[0],
                "E_hi": ci.get("E", (None, None))[1],
                "r2": f.r2,
                "rmse_log": f.rmse_log,
                "lsq_A": lsq.get("A"),
                "lsq_alpha": lsq.get("alpha"),
                "lsq_E": lsq.get("E"),
                "c_ref_pflops_days": m["c_ref_pflops_days"] if m else None,
                "multiplier": m["multiplier"] if m else None,
                "multiplier_lo": m["ci"][0] if m else None,
                "multiplier_hi": m["ci"][1] if m else None,
            }
        )
    return rows


def _with_e(rows) -> bool:
    """Whether the rows' law has an irreducible term (its E column)."""
    return any(r["E"] is not None for r in rows)


def _display(rows, ci_level):
    """(header, body) of strings shared by the terminal and Markdown tables."""
    pct = f"{ci_level:.0%}"
    irreducible = _with_e(rows)
    header = ["variant", "n", "A", f"{pct} CI", "alpha", f"{pct} CI"]
    if irreducible:
        header += ["E", f"{pct} CI"]
    header += ["R²", "LSQ A", "LSQ alpha", "multiplier", f"{pct} CI"]
    body = []
    for r in rows:
        cells = [
            r["variant"],
            str(r["n_points"]),
            _g(r["A"]),
            _ci(r["A_lo"], r["A_hi"]),
            _g(r["alpha"], 3),
            _ci(r["alpha_lo"], r["alpha_hi"], 3),
        ]
        if irreducible:
            cells += [_g(r["E"]), _ci(r["E_lo"], r["E_hi"])]
        is_ref = r["multiplier"] is None
        cells += [
            f"{r['r2']:.4f}",
            _g(r["lsq_A"]),
            _g(r["lsq_alpha"], 3),
            "1 (ref)" if is_ref else f"{_m(r['multiplier'])}x",
            "" if is_ref else f"[{_m(r['multiplier_lo'])}, {_m(r['multiplier_hi'])}]",
        ]
        body.append(cells)
    return header, body


def terminal_table(rows, ci_level) -> str:
    header, body = _display(rows, ci_level)
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, body)])


def markdown_table(rows, ci_level, c_ref=None, loss="huber", interval=None) -> str:
    header, body = _display(rows, ci_level)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(b) + " |" for b in body]
    note = (
        f"\nFits of log L by {'least squares' if loss == 'lsq' else 'Huber loss'}; "
        + "L = A·C^-alpha"
        + (" + E" if _with_e(rows) else "")
        + ", C in PFLOP/s-days. LSQ = plain least squares on log L"
        + (" (cross-check)." if loss != "lsq" else " (the fit itself).")
    )
    if interval:
        note += (
            " CIs: bootstrap over "
            + " and ".join(sorted(set(interval.values())))
            + " (seeds: within each size, paired across variants, a run's points together)."
        )
    if c_ref is not None:
        note += f" Multiplier vs baseline at C_ref = {c_ref:.4g} PFLOP/s-days."
    return "\n".join(out) + "\n" + note + "\n"


def csv_rows(header, rows) -> str:
    """CSV text of a header and rows of cells ('\n' line ends; None is an empty cell)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def csv_table(rows) -> str:
    buf = io.StringIO()
    fields = list(rows[0]) if rows else ["variant"]
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue()


def _tex(s: str) -> str:
    return (
        s.replace("\\", r"\textbackslash{}")
        .replace("_", r"\_")
        .replace("%", r"\%")
        .replace("&", r"\&")
    )


def latex_table(rows, ci_level, c_ref=None) -> str:
    irreducible = _with_e(rows)
    pct = _tex(f"{ci_level:.0%}")
    cols = (
        ["Variant", "$n$", "$A$", r"$\alpha$"]
        + (["$E$"] if irreducible else [])
        + ["$R^2$", "Multiplier"]
    )
    lines = [
        r"% requires \usepackage{booktabs}",
        r"\begin{tabular}{l" + "r" * (len(cols) - 1) + "}",
        r"\toprule",
        " & ".join(cols) + r" \\",
        r"\midrule",
    ]
    for r in rows:
        cells = [
            r"\texttt{" + _tex(r["variant"]) + "}",
            str(r["n_points"]),
            f"{_g(r['A'])} {_ci(r['A_lo'], r['A_hi'])}",
            f"{_g(r['alpha'], 3)} {_ci(r['alpha_lo'], r['alpha_hi'], 3)}",
        ]
        if irreducible:
            cells.append(f"{_g(r['E'])} {_ci(r['E_lo'], r['E_hi'])}")
        cells.append(f"{r['r2']:.4f}")
        cells.append(
            "1 (ref.)"
            if r["multiplier"] is None
            else rf"{_m(r['multiplier'])}$\times$ "
            rf"[{_m(r['multiplier_lo'])}, {_m(r['multiplier_hi'])}]"
        )
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    caption = f"% Brackets: {pct} bootstrap CIs. C in PFLOP/s-days" + (
        f"; multiplier at C_ref = {c_ref:.4g}." if c_ref is not None else "."
    )
    return "\n".join(lines) + "\n" + caption + "\n"


def terminal_multipliers(multipliers: list[dict]) -> str:
    if not multipliers:
        return "No compute multipliers (need a fitted baseline and at least one other variant)."
    out = []
    for m in multipliers:
        pct = f"{m['ci_level']:.0%}"
        lo, hi = m["ci"]
        s = (
            f"  {m['variant']:<24} {_m(m['multiplier']):>5}x  ({pct} CI {_m(lo)}–{_m(hi)}; "
            f"LSQ {_m(m['lsq_multiplier'])}x)  at C_ref = {m['c_ref_pflops_days']:.4g} PFLOP/s-days"
        )
        if m["extrapolated"]:
            s += " *"
        if m.get("c_ref_outside_baseline_data"):
            s += " (! C_ref outside the baseline's runs: its fit is extrapolated)"
        if m.get("c_ref_outside_variant_data"):
            s += " (C_ref outside this variant's runs: its fit is extrapolated)"
        out.append(s)
        if m["warning"]:
            out.append(f"      ! {m['warning']}")
    if any(m["extrapolated"] for m in multipliers):
        out.append(
            "  * the baseline reaches that loss only beyond its largest run: its fit is "
            "extrapolated there"
        )
    return "\n".join(out)


def terminal_noise(rows: list[dict], baseline: str) -> str:
    """Seed noise per size (`analysis.fits.replicates.seed_noise`): what the intervals rest on."""
    if not any(r["std_log_loss"] is not None for r in rows):
        return (
            "Seed noise: one seed per size, so it cannot be measured; run >= 2 seeds "
            "(train.seed=0,1,2) for intervals that resample seeds"
        )
    out = [
        f"Seed noise (std across seeds of log loss; of the paired gap to {baseline}, same seed):",
        f"  {'variant':<24} {'size':<12} {'seeds':>5} {'points':>6} {'log loss':>9} {'gap':>9}",
    ]
    pct = lambda x: "–" if x is None else f"{100 * x:.2f} %"  # noqa: E731
    for r in sorted(
        rows, key=lambda r: (r["label"] != baseline, r["label"], r["compute_pflops_days"])
    ):
        out.append(
            f"  {r['label']:<24} {r['size']:<12} {r['n_seeds']:>5} {r['n_points_per_run']:>6} "
            f"{pct(r['std_log_loss']):>9} {pct(r['std_paired_gap']):>9}"
        )
    return "\n".join(out)
