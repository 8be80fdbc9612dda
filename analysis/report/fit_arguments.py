"""The command line of `python -m analysis.fit`: the arguments every analysis command shares
(`analysis.report.arguments`) and the fit's own (--law, --at-compute, the fit loss, the interval,
C_ref, the figures' runs, the measured throughput, W&B)."""

from __future__ import annotations

import argparse

from analysis.fits.settings import DEFAULT_LOSS
from analysis.report.arguments import common_parser


def fit_parser(description: str) -> argparse.ArgumentParser:
    """The parser of `python -m analysis.fit` (console script `andrea-fit`): the shared
    arguments (`common_parser`) and the fit's own."""
    p = argparse.ArgumentParser(
        prog="andrea-fit",
        description=description,
        parents=[
            common_parser(
                inputs="sweep/run directories (every results.json below them is read) or CSVs with "
                "columns variant,size,flops,val_loss",
                out="output directory",
                out_required=True,
                metric=True,
                baseline=True,
                irreducible=True,
                bootstrap=True,
                level="--ci",
                seed=True,
                c_law_points="points the C-law and its multiplier are fitted on: each run's final "
                "point (default; its earlier budgets sit on other tokens-per-parameter "
                "rays and biased the multiplier, docs/statistics.md) or all of them; "
                "L(N, D) always uses all",
            )
        ],
    )
    p.add_argument(
        "--law",
        default=None,
        metavar="NAME",
        help="the scaling law to fit (docs/laws.md): power (default), irreducible (as "
        "--irreducible), chinchilla, farseer, data_constrained, a plug-in's "
        "(entry points andrea.laws), or auto: the one with the smallest error in "
        "expanding-window compute rollouts (runs above a cut predicted from those below), "
        "never one absurd inside the data. A law in (params, tokens) is reported after "
        "the C-law's table, with its multipliers",
    )
    p.add_argument(
        "--law-bootstrap",
        type=int,
        default=200,
        metavar="N",
        help="resamples for the intervals of a --law in (params, tokens), one L-BFGS-B "
        "each (default: %(default)s)",
    )
    p.add_argument(
        "--at-compute",
        nargs="+",
        default=None,
        metavar="C",
        help="computes at which to give each variant's multiplier with its interval, "
        "beside the one at C_ref: FLOPs (1e22) or PFLOP/s-days with the unit "
        "(3PF-days)",
    )
    p.add_argument(
        "--loss",
        choices=["lsq", "huber"],
        default=DEFAULT_LOSS,
        help="fit loss on log L: least squares or Huber (default: %(default)s, the one "
        "whose intervals passed bench/coverage.py; see docs/statistics.md)",
    )
    p.add_argument(
        "--huber-delta",
        type=float,
        default=1e-3,
        help="Huber delta on log-loss residuals, with --loss huber (default: %(default)s)",
    )
    p.add_argument(
        "--interval",
        choices=["auto", "seeds", "sizes"],
        default="auto",
        help="what the bootstrap resamples: seeds within each size, paired across "
        "variants, a run's points together (auto: when every size has >= 2 "
        "seeds), or sizes (the old method; covers poorly)",
    )
    p.add_argument(
        "--paired-bootstrap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --interval sizes: resample sizes jointly across variants that share "
        "the baseline's sizes (default), so a size's shared data/seed noise cancels "
        "in the multiplier; --no-paired-bootstrap resamples each variant's points "
        "independently (the seed bootstrap always pairs by seed)",
    )
    p.add_argument(
        "--c-ref",
        type=float,
        nargs="+",
        default=None,
        metavar="C",
        help="reference compute(s) in PFLOP/s-days for the multiplier (default: the "
        "geometric middle of the compute range the variants share with the "
        "baseline, where the multiplier is interpolated)",
    )
    p.add_argument(
        "--ablation-size",
        default=None,
        help="size for the block-size ablation figure "
        "(default: the size with the most block sizes)",
    )
    p.add_argument(
        "--dynamics-runs",
        nargs="+",
        default=None,
        metavar="RUN",
        help="run directories or LABEL:SIZE for the dynamics figure "
        "(default: the largest size of each variant)",
    )
    p.add_argument(
        "--chinchilla-bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="seed-bootstrap resamples for the L(N, D) multiplier's interval (one "
        "L-BFGS-B per resample and variant: seconds each hundred; covered "
        "94 %% at GPU-like sizes, 88 %% demo-like, docs/statistics.md; default: "
        "%(default)s, point estimates)",
    )
    p.add_argument(
        "--throughput",
        default=None,
        metavar="FILE",
        help="measured throughput for the device-seconds multiplier (default: an "
        "input directory's throughput.json, written by python -m andrea.launch.throughput "
        "--sweep; 'none': the runs' own timings)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    p.add_argument("--wandb", action="store_true", help="log table and figures to W&B")
    p.add_argument(
        "--wandb-mode",
        default="offline",
        choices=["offline", "online", "disabled"],
        help="W&B mode (default: %(default)s; offline never touches the network)",
    )
    p.add_argument("--wandb-project", default="andrea", help="W&B project (default: %(default)s)")
    p.add_argument(
        "--wandb-group", default=None, help="W&B group (default: the first input's name)"
    )
    return p
