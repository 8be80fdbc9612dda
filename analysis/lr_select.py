"""Select each size's peak learning rate on the baseline, as the report does, and write it where
the scaling sweep reads it (`hparams=<name>`, conf/hparams/<name>.yaml).

    python -m analysis.lr_select runs/lr_scan_cpu --name lr_scan_cpu --out docs/lr_scan_cpu

Reads every completed baseline run under the given sweep directories through
`analysis.inputs.collect` (size, lr, batch_tokens, beta2, val_loss; analysis/estimates/lr_pick.py
picks), averages seeds per (size, batch, beta2, lr), and per size picks the
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
import shlex
import sys
from pathlib import Path

from analysis.estimates.lr_pick import optimizer_of, own_picks, picks, robustness_rows, scan_runs
from analysis.inputs.collect import collect_or_report
from analysis.report.arguments import common_parser, parse_or_refuse
from analysis.report.lr_scan import (
    hparams_yaml,
    picks_table,
    plot,
    robustness_table,
    selection_json,
)
from andrea.run.rundir import atomic_write_bytes, atomic_write_json

REPO = Path(__file__).resolve().parent.parent


def _parser() -> argparse.ArgumentParser:
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
    return p


def _refused(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _read(dirs: list[Path], metric: str, variant: str):
    """(every usable run, the selected variant's, their optimizer), or an error message."""
    for root in dirs:
        if not root.is_dir():
            return f"{root}: not a directory (give the LR scan's sweep directory)"
    coll = collect_or_report(dirs, metric)
    if coll is None:
        return None
    every_run, notes = scan_runs(coll)
    try:
        optimizer = optimizer_of(every_run)
    except ValueError as e:
        return str(e)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    runs = [r for r in every_run if r.variant == variant]
    if not runs:
        return f"no completed {variant} runs with an lr under {', '.join(map(str, dirs))}"
    return every_run, runs, optimizer


def _write(args, name, command, optimizer, curves, chosen, robust, variant_curves):
    """The figure, lr_select.json and the hparams file(s); (hparams path, own hparams path)."""
    out = Path(args.out) if args.out else Path(args.sweeps[0]) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    own = own_picks(variant_curves)
    plot(curves, chosen, out / "lr_scan.png", variant_curves, args.variant, optimizer)
    atomic_write_json(
        out / "lr_select.json",
        selection_json(command, optimizer, curves, chosen, robust, args.variant),
    )
    scanned = {s: sum(c.size == s for c in curves) for s in chosen}
    hp_path = Path(args.hparams_dir) / f"{name}.yaml"
    text = hparams_yaml(name, command, chosen, scanned, optimizer, selected_on=args.variant)
    atomic_write_bytes(hp_path, text.encode())
    own_path = Path(args.hparams_dir) / f"{name}_own.yaml"
    if own:
        text = hparams_yaml(f"{name}_own", command, chosen, scanned, optimizer, own, args.variant)
        atomic_write_bytes(own_path, text.encode())
    return hp_path, own_path


def _print(args, name, curves, chosen, robust, own, hp_path, own_path) -> None:
    out = Path(args.out) if args.out else Path(args.sweeps[0]) / "analysis"
    print("\n".join(picks_table(curves, chosen) + robustness_table(robust, args.variant)))
    print(
        f"\nwrote {hp_path} (select it with hparams={name}: every variant at "
        f"{args.variant}'s pick), {out / 'lr_scan.png'}, {out / 'lr_select.json'}"
    )
    if own:
        print(
            f"wrote {own_path} (hparams={name}_own: each of {args.variant}, "
            f"{', '.join(sorted(own))} at its own pick; the multiplier both ways: "
            f"python -m analysis.tuning {' '.join(map(str, args.sweeps))})"
        )
    edge = [c.size for c in chosen.values() if "EDGE" in c.how]
    if edge:
        print(
            f"warning: the best LR of {', '.join(edge)} is at the edge of the scan", file=sys.stderr
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_or_refuse(_parser(), argv)
    if args is None:
        return 2
    dirs = [Path(d) for d in args.sweeps]
    name = args.name or dirs[0].resolve().name
    if not name.replace("_", "").replace("-", "").isalnum() or name == "rule":
        return _refused(f"--name={name!r}: use letters, digits, _ and - (and not 'rule')")
    read = _read(dirs, args.metric, args.variant)
    if not isinstance(read, tuple):
        return 2 if read is None else _refused(read)
    every_run, runs, optimizer = read
    curves, chosen = picks(runs)
    robust, variant_curves = robustness_rows(every_run, args.variant, chosen)
    command = "python -m analysis.lr_select " + " ".join(
        shlex.quote(a) for a in (argv or sys.argv[1:])
    )
    paths = _write(args, name, command, optimizer, curves, chosen, robust, variant_curves)
    _print(args, name, curves, chosen, robust, own_picks(variant_curves), *paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
