"""The steps of bench/heldout.sh, in order: `python -m bench.heldout_steps OUT_DIR [--quick]`

One line a step, `NAME<TAB>ARGS` (the arguments after `python -m`, quoted for the shell: the
script runs them), or `skipped<TAB>WHY` for the steps of a sweep that is not shipped and whose
`--source` is not set. The held-out sweeps' steps come from the one list of them,
`scalebench_splits.RUN_SPLITS`: three a sweep, named after its `ALIAS` — the replay (`ALIAS`),
the band's coverage (`ALIAS_coverage`) and the point query (`ALIAS_point_query`, or the module's
`QUERY_STEP`) — so a sweep registered there is in the script with nothing else to edit. Around
them stand the steps that are not a sweep's: ScaleBench's own splits first, then the candidate
rules as they were scored on unseen sweeps and `bench.coverage_nd`'s two tables.

`--quick` (HELDOUT_QUICK=1) gives each step its smallest settings: a sweep's `QUICK` splits
(declared in its module; the first of them for --coverage, `QUICK_QUERY` or that same first for
the point query), one repetition, two sweeps of one truth. It checks the script, not figures to
quote.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from bench.scalebench_splits import RUN_SPLITS

# --quick's ScaleBench split: moe; --quick's other, farseer (a law of 9 parameters), took most of
# the smoke run's time, and tests/test_scalebench.py runs `bench.scalebench --quick` itself
QUICK_SCALEBENCH = "moe"
QUICK_REPLAY = ("--methods", "random,full", "--reps", "1")
QUICK_QUERY_BOOTSTRAP = ("--bootstrap", "10")


def sweep_steps(module, out: Path, quick: bool) -> list[tuple[str, list[str]]]:
    """A held-out sweep's three steps: (name, the arguments after `python -m`)."""
    alias = module.ALIAS
    source = []
    if module.DATA is None:  # not shipped: the caller checked its SOURCE_ENV is set
        source = ["--source", os.environ[module.SOURCE_ENV]]
    if quick:
        replay = [",".join(module.QUICK), *QUICK_REPLAY]
        coverage = [module.QUICK[0]]
        query = [getattr(module, "QUICK_QUERY", module.QUICK[0]), *QUICK_QUERY_BOOTSTRAP]
    else:
        replay = coverage = query = [alias]
    query_step = getattr(module, "QUERY_STEP", None)
    query_name = query_step or f"{alias}_point_query"
    return [
        (
            alias,
            [
                "bench.scalebench",
                "--splits",
                *replay,
                *source,
                "--jobs",
                "2",
                "--out",
                str(out / alias),
            ],
        ),
        (f"{alias}_coverage", ["bench.scalebench", "--coverage", "--splits", *coverage, *source]),
        (
            query_name,
            [
                f"bench.{query_step or 'point_query'}",
                "--splits",
                *query,
                *source,
                "--out",
                str(out / f"{query_name}.csv"),
            ],
        ),
    ]


def skipped(module) -> str:
    """The log's line for a sweep not shipped whose --source is not set."""
    names = ", ".join(f"{module.ALIAS}{s}" for s in ("", "_coverage", "_point_query"))
    return f"skipped {names}: {module.SOURCE_ENV} is not set ({module.NOT_SHIPPED})"


def steps(out: Path, quick: bool) -> list[tuple[str, list[str] | None, str]]:
    """Every step in order: (name, its arguments, ""), or ("skipped", None, why)."""
    scalebench = ["--splits", QUICK_SCALEBENCH, *QUICK_REPLAY] if quick else []
    result = [
        (
            "scalebench",
            ["bench.scalebench", *scalebench, "--jobs", "2", "--out", str(out / "scalebench")],
            "",
        ),
        (
            "scalebench_coverage",
            ["bench.scalebench", "--coverage", *(["--splits", QUICK_SCALEBENCH] if quick else [])],
            "",
        ),
    ]
    for module in RUN_SPLITS:
        if module.DATA is None and not os.environ.get(module.SOURCE_ENV):
            result.append(("skipped", None, skipped(module)))
            continue
        result += [(name, args, "") for name, args in sweep_steps(module, out, quick)]
    # the two candidate rules as they were scored on unseen sweeps (docs/laws.md): the band rule
    # drift on GPT-3's and OPT's splits (the log rule's figures: the gpt3_ and opt_coverage
    # steps), the law choice monotone on the OLMo ladder
    drift = "gpt3" if quick else "gpt3,opt"
    result += [
        (
            "band_drift",
            ["bench.scalebench", "--coverage", "--splits", drift, "--band-rule", "drift"],
            "",
        ),
        (
            "law_choice_monotone",
            ["bench.law_choice_why", "--splits", "olmo_ladder", "--law-choice", "monotone"],
            "",
        ),
    ]
    # bench.coverage_nd's tables behind MULTIPLIER_COVERED_UP_TO and conformal.COVERED_UP_TO: in
    # full, the exact command lines of docs/laws.md's two tables
    truths = ["kaplan"] if quick else ["kaplan", "besiroglu"]
    size = ["--reps", "2", "--bootstrap", "10"] if quick else ["--reps", "40", "--bootstrap", "100"]
    for name, factors, design in (
        ("coverage_nd_gpu6", ["1", "3", "10", "30"], "nd-gpu6"),
        ("coverage_nd_pi", ["3", "10", "30"], "nd-gpu"),
    ):
        args = ["bench.coverage_nd", "--factors", *factors, "--designs", design, "--truths"]
        result.append((name, [*args, *truths, *size], ""))
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.heldout_steps", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("out", type=Path, help="the script's OUT_DIR (absolute)")
    p.add_argument("--quick", action="store_true", help="the smallest settings (HELDOUT_QUICK=1)")
    a = p.parse_args(argv)
    for name, args, why in steps(a.out, a.quick):
        print(f"{name}\t{why if args is None else shlex.join(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
