"""The command-line arguments the analysis commands share, each defined once.

Every command (fit, backtest, next_runs, ablations, architecture, lr_select, tuning, domains)
builds its parser on `common_parser(...)` (argparse's `parents=`), naming the shared arguments it
takes; only what the command alone takes is added there. A shared argument keeps one flag, one
default and one help text in every command. Each parses with `parse_or_refuse`, which refuses an
--out a file is in the way of before any run is read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.estimates.estimate import C_LAW_POINTS
from analysis.inputs.metrics import DEFAULT_METRIC, METRIC_HELP
from analysis.report.files import out_dir_refused

DEFAULT_BASELINE = "baseline"
DEFAULT_BOOTSTRAP = 1000
DEFAULT_LEVEL = 0.95
DEFAULT_SEED = 0


def common_parser(
    *,
    inputs: str | None = None,
    inputs_name: str = "inputs",
    metric: bool = False,
    out: str | None = None,
    out_required: bool = False,
    out_type: type = Path,
    baseline: bool = False,
    bootstrap: bool = False,
    level: str | None = None,
    seed: bool = False,
    irreducible: bool = False,
    c_law_points: str | None = None,
) -> argparse.ArgumentParser:
    """A parent parser (add_help=False) with the shared arguments asked for:

    inputs: the positional input paths' help (they are `inputs_name`, one or more);
    metric: `--metric` (analysis.inputs.metrics);
    out: `--out`'s help (what the command writes there), `out_required` when it has no default;
    baseline: `--baseline`, the reference label; bootstrap: `--bootstrap` resamples;
    level: the interval level's flag (`--ci`, or `--level` where a command spells it so);
    seed: `--seed`, the bootstrap's; irreducible: `--irreducible`, the law's form;
    c_law_points: `--c-law-points`' help (the points the C-law is fitted on).
    """
    p = argparse.ArgumentParser(add_help=False)
    if inputs is not None:
        p.add_argument(inputs_name, nargs="+", help=inputs)
    if metric:
        p.add_argument("--metric", default=DEFAULT_METRIC, metavar="M", help=METRIC_HELP)
    if out is not None:
        p.add_argument("--out", required=out_required, type=out_type, help=out)
    if baseline:
        p.add_argument(
            "--baseline",
            default=DEFAULT_BASELINE,
            help="the reference variant's label (default: %(default)s)",
        )
    if irreducible:
        p.add_argument("--irreducible", action="store_true", help="fit L = E + A·C^-alpha")
    if c_law_points is not None:
        p.add_argument(
            "--c-law-points", choices=["final", "all"], default=C_LAW_POINTS, help=c_law_points
        )
    if bootstrap:
        p.add_argument(
            "--bootstrap",
            type=int,
            default=DEFAULT_BOOTSTRAP,
            help="bootstrap resamples, 0 for no intervals (default: %(default)s)",
        )
    if level is not None:
        p.add_argument(
            level,
            type=float,
            default=DEFAULT_LEVEL,
            help="level of the intervals (default: %(default)s)",
        )
    if seed:
        p.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed (default: %(default)s)"
        )
    return p


def sweep_report_parser(prog: str, description: str, **shared) -> argparse.ArgumentParser:
    """The parser of a command that reports on sweep directories (ablations, architecture): its
    description printed as written, the inputs, --metric, --out beside the first input, --level
    and --baseline, and the other shared arguments `shared` asks for (as common_parser)."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[
            common_parser(
                inputs="sweep directories (or results.json files)",
                metric=True,
                out="output directory (default: <first input>/analysis)",
                level="--level",
                baseline=True,
                **shared,
            )
        ],
    )


def parse_or_refuse(
    parser: argparse.ArgumentParser, argv, level: str | None = None
) -> argparse.Namespace | None:
    """`parser`'s arguments; None, after one `error:` line, when --out cannot be made a
    directory (out_dir_refused: checked before any run is read). With `level` (the dest of the
    interval level, e.g. "level"), a level outside (0, 1) is the parser's usage error."""
    args = parser.parse_args(argv)
    if out_dir_refused(args.out):
        return None
    if level is not None and not 0 < getattr(args, level) < 1:
        parser.error(f"--{level}={getattr(args, level)} must lie in (0, 1)")
    return args
