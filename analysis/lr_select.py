"""Select each size's peak learning rate on the baseline, as the report does, and write it where
the scaling sweep reads it (`hparams=<name>`, conf/hparams/<name>.yaml).

    python -m analysis.lr_select runs/lr_scan_cpu --name lr_scan_cpu --out docs/lr_scan_cpu

Reads every completed baseline run under the given sweep directories (results.json: size, lr,
batch_tokens, beta2, val_loss), averages seeds per (size, batch, beta2, lr), and per size picks the
LR at the minimum of a parabola fitted to val_loss against log LR over the best grid point and its
two neighbours on each side (the loss is close to quadratic in log LR near its optimum; a fit
uses five points instead of the noise of one). The pick is the grid's best point instead when the
best point is at the edge of the scan (extend the scan: the optimum may lie outside) or the
fitted parabola opens downward. Where several (batch, beta2) settings were scanned, the one with
the lowest fitted loss wins.

Where the scan also holds another variant's runs (`sweeps=lr_scan_cpu` scans Block AttnRes too),
a robustness table gives that variant at its own best LR: its pick, its loss there and at the
baseline's LR, and the gain (the report gives every variant the baseline's hyper-parameters; the
gain says how much that choice costs the variant at each size). The hparams file is the baseline's
(every variant at the baseline's pick, the report's protocol); a second file,
conf/hparams/<name>_own.yaml, gives each scanned variant its own pick per size by the same rule
(`variants:`; `hparams=<name>_own` trains each variant at its own tuned LR). The multiplier both
ways, and their difference with an interval, is `python -m analysis.tuning` on the scan.

Writes: <out>/lr_scan.png (loss vs LR per size, fit and pick marked), <out>/lr_select.json (every
point, fit and pick), and conf/hparams/<name>.yaml (the picks, with the command and the run
directories they came from as provenance). Exit 2 on unusable input.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.fits import parabola
from analysis.fits.parabola import HALF_WINDOW
from analysis.inputs.metrics import DEFAULT_METRIC, check_metric, record_value
from analysis.report.arguments import common_parser, parse_or_refuse
from andrea.run import results as results_file
from andrea.run.rundir import atomic_write_bytes, atomic_write_json, find_run_dirs

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Curve:
    """One (size, batch, beta2) setting: mean val_loss per LR over seeds."""

    size: str
    batch_tokens: int
    beta2: float
    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)  # seeds averaged at each LR
    runs: list[str] = field(default_factory=list)
    pick: float | None = None
    pick_loss: float | None = None
    how: str = ""
    fit: list[float] | None = None  # parabola coefficients in log10(lr), highest power first
    variant: str = "baseline"


def read_runs(dirs: list[Path], metric: str = DEFAULT_METRIC) -> tuple[list[dict], list[str]]:
    """Completed runs of every variant with an lr under the sweep directories; each run's
    val_loss holds `metric` (--metric, analysis.inputs.metrics.record_value)."""
    check_metric(metric)
    runs, notes = [], []
    for root in dirs:
        if not root.is_dir():
            raise ValueError(f"{root}: not a directory (give the LR scan's sweep directory)")
        for rd in find_run_dirs(root):
            path = rd.results
            if not path.is_file():
                continue  # running, or never started
            res = results_file.read(rd)
            if not isinstance(res, results_file.Record):
                notes.append(f"{path}: unreadable, skipped")
                continue
            if not res.completed:
                notes.append(f"{path.parent}: status {res.get('status')!r}, skipped")
                continue
            if metric != DEFAULT_METRIC:
                if record_value(res, metric) is None:
                    notes.append(f"{path.parent}: {metric} not recorded, skipped")
                    continue
                res = {**res, "val_loss": record_value(res, metric)}
            missing = [k for k in ("size", "lr", "val_loss", "batch_tokens") if res.get(k) is None]
            if missing:
                notes.append(
                    f"{path}: no {', '.join(missing)} (written before andrea recorded "
                    "them?), skipped"
                )
                continue
            if not math.isfinite(float(res["val_loss"])):
                notes.append(f"{path.parent}: val_loss {res['val_loss']}, skipped")
                continue
            runs.append({**res, "run_dir": str(path.parent)})
    if metric != DEFAULT_METRIC and not runs and notes:
        raise ValueError(
            f"--metric {metric}: no completed run under {', '.join(map(str, dirs))} recorded it"
        )
    return runs, notes


def curves_of(runs: list[dict]) -> list[Curve]:
    by_point: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        key = (r["size"], int(r["batch_tokens"]), float(r.get("beta2") or 0.0), float(r["lr"]))
        by_point[key].append(r)
    curves: dict[tuple, Curve] = {}
    for (size, batch, beta2, lr), rs in sorted(by_point.items()):
        c = curves.setdefault((size, batch, beta2), Curve(size, batch, beta2))
        c.lrs.append(lr)
        c.losses.append(float(np.mean([float(r["val_loss"]) for r in rs])))
        c.seeds.append(len(rs))
        c.runs.extend(r["run_dir"] for r in rs)
    return list(curves.values())


def select(c: Curve) -> None:
    """Set c.pick: the parabola's vertex in log LR, or the grid's best point
    (analysis.fits.parabola)."""
    v = parabola.vertex(np.log10(np.asarray(c.lrs)), c.losses)
    c.fit = v.fit
    c.pick, c.pick_loss = c.lrs[v.best], v.y
    if v.kind == parabola.PARABOLA:
        c.pick = float(f"{10**v.x:.3g}")
        c.how = f"parabola in log10(lr) over {v.window[1] - v.window[0]} LRs"
    else:
        c.how = {
            parabola.FEW: f"grid best (only {len(c.lrs)} LRs: a parabola needs 3)",
            parabola.EDGE: "grid best, at the EDGE of the scan: the optimum may lie beyond "
            "it; extend train.lr_scale",
            parabola.CONCAVE: "grid best (the fitted parabola opens downward: noisy losses)",
        }[v.kind]


def best_per_size(curves: list[Curve]) -> dict[str, Curve]:
    out: dict[str, Curve] = {}
    for c in curves:
        if c.size not in out or c.pick_loss < out[c.size].pick_loss:
            out[c.size] = c
    return out


@dataclass
class RobustnessRow:
    """A variant at its own best LR against the selected variant's pick, at one size."""

    size: str
    label: str
    own_pick: float  # the variant's own pick, by the same rule as the baseline's
    own_best_lr: float  # its grid point with the lowest mean loss
    own_best_loss: float
    loss_at_reference_lr: float | None  # its mean loss at the reference's grid-best LR
    reference_lr: float

    @property
    def gain(self) -> float | None:
        """Loss the variant would gain at its own best grid LR instead of the reference's
        (>= 0; grid values, not fitted ones, so it cannot come out negative)."""
        if self.loss_at_reference_lr is None:
            return None
        return self.loss_at_reference_lr - self.own_best_loss


def robustness_rows(
    runs: list[dict], reference: str, chosen: dict[str, Curve]
) -> tuple[list[RobustnessRow], list[Curve]]:
    """For every other variant (by label) scanned at the reference's (size, batch, beta2): its
    own best LR. The report gives every variant the baseline's hyper-parameters; if a variant's
    own optimum lies elsewhere, the multiplier at the baseline's LR understates it. These rows
    say by how much, where the scan holds such runs."""
    rows, curves = [], []
    by_label: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if r.get("variant") != reference:
            by_label[str(r.get("label") or r.get("variant"))].append(r)
    for label, lruns in sorted(by_label.items()):
        for c in curves_of(lruns):
            ref = chosen.get(c.size)
            if ref is None or (c.batch_tokens, c.beta2) != (ref.batch_tokens, ref.beta2):
                continue
            select(c)
            c.variant = label
            curves.append(c)
            ref_lr = ref.lrs[int(np.argmin(ref.losses))]
            at_ref = next(
                (
                    loss
                    for lr, loss in zip(c.lrs, c.losses)
                    if math.isclose(lr, ref_lr, rel_tol=1e-6)
                ),
                None,
            )
            best = int(np.argmin(c.losses))
            rows.append(
                RobustnessRow(c.size, label, c.pick, c.lrs[best], c.losses[best], at_ref, ref_lr)
            )
    return sorted(rows, key=lambda r: (_size_order(r.size), r.label)), curves


def optimizer_of(runs: list[dict]) -> str:
    """The one optimizer the runs were trained with (results.json before it was recorded:
    adamw); ValueError when they mix optimizers, whose best LRs differ."""
    found = sorted({str(r.get("optimizer") or "adamw") for r in runs})
    if len(found) > 1:
        raise ValueError(
            f"the runs mix optimizers ({', '.join(found)}); give the scan of one "
            "optimizer (train.optimizer) at a time"
        )
    return found[0] if found else "adamw"


def _size_entries(
    chosen: dict[str, Curve], scanned: dict[str, int] | None, indent: str
) -> list[str]:
    lines = []
    for size in sorted(chosen, key=_size_order):
        c = chosen[size]
        settings = f"{scanned[size]} setting(s), " if scanned else ""
        lines += [
            f"{indent}# {size}: {c.how}; {settings}{len(c.lrs)} LRs, "
            f"loss {c.pick_loss:.4f} at the pick",
            f"{indent}{size}:",
            f"{indent}  lr: {c.pick}",
            f"{indent}  batch_tokens: {c.batch_tokens}",
        ]
        if c.beta2:
            lines.append(f"{indent}  beta2: {c.beta2}")
        lines.append(f"{indent}  runs:")
        lines += [f"{indent}    - {json_str(r)}" for r in sorted(c.runs)]
    return lines


def hparams_yaml(
    name: str,
    command: str,
    chosen: dict[str, Curve],
    scanned: dict[str, int],
    optimizer: str = "adamw",
    variants: dict[str, dict[str, Curve]] | None = None,
    selected_on: str = "baseline",
) -> str:
    """The hparams file: `sizes` (selected_on's picks, shared by every variant unless
    `variants` is given) and, for a per-variant file, `variants` (each label's own picks)."""
    lines = [
        f"# Generated by analysis/lr_select.py: hyper-parameters selected on {selected_on}"
        + (", and each variant's own (variants:)." if variants else "."),
        "# Do not edit by hand; re-run the command below on the scan's runs instead.",
        f"name: {name}",
        f"selected_by: {json_str(command)}",
        f"optimizer: {optimizer}  # the scan's train.optimizer; runs of another are refused",
    ]
    if variants or selected_on != "baseline":
        lines.append(f"selected_on: {selected_on}  # `sizes` are its picks")
    lines += ["sizes:", *_size_entries(chosen, scanned, "  ")]
    if variants:
        lines.append("variants:  # each variant at its own pick (the same rule as sizes)")
        for label in sorted(variants):
            lines += [f"  {label}:", "    sizes:", *_size_entries(variants[label], None, "      ")]
    return "\n".join(lines) + "\n"


def json_str(s: str) -> str:
    import json

    return json.dumps(s)  # a JSON string is a valid YAML scalar


def _size_order(size: str):
    """tiny-1 < tiny-2 < ... < andrea-12m < andrea-25m ... (without importing torch)."""
    prefix, _, rest = size.partition("-")
    num = rest.rstrip("mb")
    if num.isdigit():
        return ({"tiny": 0, "andrea": 1}.get(prefix, 2), int(num), size)
    return (3, 0, size)


OPTIMIZER_NAMES = {"adamw": "AdamW", "muon": "Muon (+ AdamW)"}


def plot(
    curves: list[Curve],
    chosen: dict[str, Curve],
    path: Path,
    variant_curves: list[Curve] = (),
    reference: str = "baseline",
    optimizer: str = "adamw",
) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    sizes = sorted({c.size for c in curves}, key=_size_order)
    colour = dict(zip(sizes, plt.cm.viridis(np.linspace(0.1, 0.85, max(len(sizes), 1)))))
    for c in sorted(curves, key=lambda c: (_size_order(c.size), c.batch_tokens, c.beta2)):
        tag = (
            c.size
            if sum(d.size == c.size for d in curves) == 1
            else f"{c.size} B={c.batch_tokens} b2={c.beta2}"
        )
        ax.plot(c.lrs, c.losses, "o-", color=colour[c.size], label=tag, alpha=0.9, ms=4)
        if c.fit is not None and c.fit[0] > 0:
            best = int(np.argmin(c.losses))
            lo, hi = max(0, best - HALF_WINDOW), min(len(c.lrs), best + HALF_WINDOW + 1)
            xs = np.linspace(math.log10(c.lrs[lo]), math.log10(c.lrs[hi - 1]), 50)
            ax.plot(10**xs, np.polyval(c.fit, xs), "--", color=colour[c.size], lw=1)
        if chosen.get(c.size) is c:
            ax.plot(
                [c.pick],
                [c.pick_loss],
                "*",
                color=colour[c.size],
                ms=14,
                mec="black",
                label=f"{c.size} pick: lr {c.pick:.3g}"
                + (" (scan edge)" if "EDGE" in c.how else ""),
            )
    for c in variant_curves:  # robustness: other variants, dotted, their own pick as a diamond
        ax.plot(
            c.lrs,
            c.losses,
            "s:",
            color=colour.get(c.size, "grey"),
            alpha=0.7,
            ms=3,
            label=f"{c.size} {c.variant}",
        )
        ax.plot([c.pick], [c.pick_loss], "D", color=colour.get(c.size, "grey"), ms=7, mec="black")
    ax.set_xscale("log")
    ax.set_xlabel("peak learning rate")
    ax.set_ylabel("validation loss (mean over seeds)")
    ax.set_title(
        f"LR scan of {reference} under {OPTIMIZER_NAMES.get(optimizer, optimizer)}: "
        "loss vs LR per size" + ("\n(dotted: other variants)" if variant_curves else ""),
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=130)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m analysis.lr_select",
        description=__doc__.split("\n\n")[0],
        parents=[
            common_parser(
                inputs="sweep directories of the LR scan (runs/lr_scan ...)",
                inputs_name="sweeps",
                metric=True,
                out="directory for lr_scan.png and lr_select.json "
                "(default: <first sweep>/analysis)",
                out_type=str,
            )
        ],
    )
    p.add_argument(
        "--name",
        help="hparams name: writes conf/hparams/<name>.yaml, selected by "
        "hparams=<name> (default: the first sweep directory's name)",
    )
    p.add_argument(
        "--hparams-dir",
        default=str(REPO / "conf" / "hparams"),
        help="where the hparams file goes (default: %(default)s)",
    )
    p.add_argument(
        "--variant", default="baseline", help="the variant selected on (default: %(default)s)"
    )
    args = parse_or_refuse(p, argv)
    if args is None:
        return 2
    dirs = [Path(d) for d in args.sweeps]
    name = args.name or dirs[0].resolve().name
    if not name.replace("_", "").replace("-", "").isalnum() or name == "rule":
        print(
            f"error: --name={name!r}: use letters, digits, _ and - (and not 'rule')",
            file=sys.stderr,
        )
        return 2
    try:
        every_run, notes = read_runs(dirs, args.metric)
        optimizer = optimizer_of(every_run)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs = [r for r in every_run if r.get("variant") == args.variant]
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    if not runs:
        print(
            f"error: no completed {args.variant} runs with an lr under {', '.join(map(str, dirs))}",
            file=sys.stderr,
        )
        return 2
    curves = curves_of(runs)
    for c in curves:
        select(c)
    chosen = best_per_size(curves)
    scanned = {s: sum(c.size == s for c in curves) for s in chosen}
    robust, variant_curves = robustness_rows(every_run, args.variant, chosen)

    out = Path(args.out) if args.out else dirs[0] / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m analysis.lr_select " + " ".join(
        shlex.quote(a) for a in (argv or sys.argv[1:])
    )
    plot(curves, chosen, out / "lr_scan.png", variant_curves, args.variant, optimizer)
    atomic_write_json(
        out / "lr_select.json",
        {
            "command": command,
            "optimizer": optimizer,
            "curves": [
                {
                    "size": c.size,
                    "batch_tokens": c.batch_tokens,
                    "beta2": c.beta2,
                    "lr": c.lrs,
                    "val_loss": c.losses,
                    "seeds": c.seeds,
                    "pick": c.pick,
                    "pick_loss": c.pick_loss,
                    "how": c.how,
                    "fit_log10": c.fit,
                    "chosen": chosen[c.size] is c,
                    "runs": c.runs,
                }
                for c in curves
            ],
            "robustness": [
                {
                    "size": r.size,
                    "label": r.label,
                    "own_pick": r.own_pick,
                    "own_best_lr": r.own_best_lr,
                    "own_best_loss": r.own_best_loss,
                    "loss_at_reference_lr": r.loss_at_reference_lr,
                    "reference": args.variant,
                    "reference_lr": r.reference_lr,
                    "gain": r.gain,
                }
                for r in robust
            ],
        },
    )
    hp_path = Path(args.hparams_dir) / f"{name}.yaml"
    atomic_write_bytes(
        hp_path,
        hparams_yaml(name, command, chosen, scanned, optimizer, selected_on=args.variant).encode(),
    )
    own: dict[str, dict[str, Curve]] = defaultdict(dict)
    for c in variant_curves:
        own[c.variant][c.size] = c
    own_path = Path(args.hparams_dir) / f"{name}_own.yaml"
    if own:
        atomic_write_bytes(
            own_path,
            hparams_yaml(
                f"{name}_own", command, chosen, scanned, optimizer, dict(own), args.variant
            ).encode(),
        )

    print(f"{'size':<12} {'batch':>8} {'beta2':>6} {'LRs':>4} {'grid best':>10} {'pick':>9}  how")
    for c in sorted(curves, key=lambda c: (_size_order(c.size), c.batch_tokens, c.beta2)):
        grid_best = c.lrs[int(np.argmin(c.losses))]
        mark = "*" if chosen[c.size] is c else " "
        print(
            f"{c.size:<12} {c.batch_tokens:>8} {c.beta2:>6} {len(c.lrs):>4} {grid_best:>10.3g} "
            f"{c.pick:>9.3g}{mark} {c.how}"
        )
    if robust:
        print(
            f"\nRobustness: each variant at its own best LR (the scaling sweep gives it "
            f"{args.variant}'s). gain = its mean loss at {args.variant}'s grid-best LR minus at "
            "its own grid-best LR"
        )
        print(
            f"{'size':<12} {'label':<28} {'own pick':>9} {'own best lr':>11} {'loss there':>10} "
            f"{'at ' + args.variant[:8] + ' lr':>15} {'gain':>8}"
        )
        for r in robust:
            at = "–" if r.loss_at_reference_lr is None else f"{r.loss_at_reference_lr:.4f}"
            gain = "–" if r.gain is None else f"{r.gain:.4f}"
            print(
                f"{r.size:<12} {r.label:<28} {r.own_pick:>9.3g} {r.own_best_lr:>11.3g} "
                f"{r.own_best_loss:>10.4f} {at:>15} {gain:>8}"
            )
    print(
        f"\nwrote {hp_path} (select it with hparams={name}: every variant at "
        f"{args.variant}'s pick), {out / 'lr_scan.png'}, {out / 'lr_select.json'}"
    )
    if own:
        print(
            f"wrote {own_path} (hparams={name}_own: each of {args.variant}, "
            f"{', '.join(sorted(own))} at its own pick; the multiplier both ways: "
            f"python -m analysis.tuning {' '.join(map(str, dirs))})"
        )
    edge = [c.size for c in chosen.values() if "EDGE" in c.how]
    if edge:
        print(
            f"warning: the best LR of {', '.join(edge)} is at the edge of the scan", file=sys.stderr
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
