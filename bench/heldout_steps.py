"""The steps of bench/heldout.sh, in order: `python -m bench.heldout_steps OUT_DIR [--quick]
[--score ALIAS]`

One line a step, `NAME<TAB>ARGS` (the arguments after `python -m`, quoted for the shell: the
script runs them), or `skipped<TAB>WHY` for the steps of a sweep that is not shipped and whose
`--source` is not set. The held-out sweeps' steps come from the one list of them,
`scalebench_splits.RUN_SPLITS`: three a sweep, named after its `ALIAS` — the replay (`ALIAS`),
the band's coverage (`ALIAS_coverage`) and the point query (`ALIAS_point_query`, or the module's
`QUERY_STEP`) — so a sweep registered there is in the script with nothing else to edit. Around
them stand the steps that are not a sweep's: ScaleBench's own splits first, then the candidate
rules as they were scored on unseen sweeps and `bench.coverage_nd`'s two tables.

`--score ALIAS` (HELDOUT_SCORE=ALIAS) lists instead the steps that score one newly registered
sweep once (`score_steps`): the commands docs/held_out.md's "Score once" names, in one run.

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


def source_args(module) -> list[str]:
    """`--source DIR` for a sweep not shipped (the caller checked its SOURCE_ENV is set)."""
    return [] if module.DATA is not None else ["--source", os.environ[module.SOURCE_ENV]]


def sweep_steps(module, out: Path, quick: bool) -> list[tuple[str, list[str]]]:
    """A held-out sweep's three steps: (name, the arguments after `python -m`)."""
    alias, source = module.ALIAS, source_args(module)
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


def score_steps(module, out: Path) -> list[tuple[str, list[str]]]:
    """A newly registered sweep scored once (docs/held_out.md, "Score once"): its point query,
    band and law choice, the law choice's and the planner's live candidates beside the defaults
    (`law_choice.CANDIDATES`, `design.CANDIDATE_PILOTS`), and its replay, each a step."""
    from analysis.estimates.design import CANDIDATE_PILOTS
    from analysis.estimates.law_choice import CANDIDATES

    alias, source = module.ALIAS, source_args(module)
    query = getattr(module, "QUERY_STEP", None) or "point_query"
    splits = ["--splits", alias, *source]
    result = [
        (
            f"{alias}_{query}",
            [f"bench.{query}", *splits, "--out", str(out / f"{alias}_{query}.csv")],
        )
    ]
    result += [
        (f"{alias}_coverage", ["bench.scalebench", "--coverage", *splits]),
        (f"{alias}_law_choice", ["bench.law_choice_why", *splits]),
    ]
    for rule in CANDIDATES:
        result += [
            (f"{alias}_law_choice_{rule}", ["bench.law_choice_why", *splits, "--law-choice", rule]),
            (
                f"{alias}_{query}_{rule}",
                [f"bench.{query}", *splits, "--law-choice", rule, "--out",
                 str(out / f"{alias}_{query}_{rule}.csv")],
            ),
        ]  # fmt: skip
    replay = ["bench.scalebench", *splits, "--jobs", "1"]
    result.append((alias, [*replay, "--out", str(out / alias)]))
    for pilot in CANDIDATE_PILOTS:
        result.append(
            (
                f"{alias}_pilot_{pilot}",
                [*replay, "--methods", "planner", "--pilot", pilot, "--out",
                 str(out / f"{alias}_pilot_{pilot}")],
            )
        )  # fmt: skip
    return result


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
    p.add_argument(
        "--score",
        metavar="ALIAS",
        help="instead, the steps that score one newly registered sweep once (HELDOUT_SCORE=ALIAS)",
    )
    a = p.parse_args(argv)
    if a.score is None:
        listed = steps(a.out, a.quick)
    else:
        module = {m.ALIAS: m for m in RUN_SPLITS}.get(a.score)
        if module is None:
            known = ", ".join(m.ALIAS for m in RUN_SPLITS)
            p.error(f"--score {a.score!r}: not a sweep of RUN_SPLITS: {known}")
        if module.DATA is None and not os.environ.get(module.SOURCE_ENV):
            p.error(f"--score {a.score}: {module.SOURCE_ENV} is not set ({module.NOT_SHIPPED})")
        listed = [(name, args, "") for name, args in score_steps(module, a.out)]
    for name, args, why in listed:
        print(f"{name}\t{why if args is None else shlex.join(args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
