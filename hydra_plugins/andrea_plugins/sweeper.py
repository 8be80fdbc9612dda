"""The `andrea` sweeper: Hydra's basic grid sweeper, plus what a scaling-law sweep needs before
and after launching — every job validated and planned first (one bad job stops the sweep before
anything is submitted), each distinct corpus checked and prepared once with the epochs each job
would spend on it (andrea/launch/sufficiency.py), completed runs skipped, `plan=true` as a dry run,
and a summary of each run's outcome at the end, where a failed run is reported and never stops the
others."""

import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser

from andrea.run.results import COMPLETED
from hydra_plugins.andrea_plugins.compose import JobComposer
from hydra_plugins.andrea_plugins.launcher import AndreaLauncher

log = logging.getLogger(__name__)


@dataclass
class AndreaSweeperConf:
    _target_: str = "hydra_plugins.andrea_plugins.sweeper.AndreaSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="andrea", node=AndreaSweeperConf, provider="andrea"
)


class AndreaSweeper(BasicSweeper):
    def __init__(
        self, max_batch_size: Optional[int] = None, params: Optional[Dict[str, str]] = None
    ) -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def sweep(self, arguments: List[str]) -> Any:
        from andrea.run.units import gpu_problem
        from hydra_plugins.andrea_plugins.adaptive import check, run_rounds

        why = check(self.config.design) or gpu_problem(
            self.config.get("plan_gpu", "H100"), "plan_gpu="
        )
        if why:
            print(f"error: {why}", file=sys.stderr)
            sys.exit(2)
        out = self.sweep_round(arguments)
        if self.config.design.kind == "adaptive":  # then rounds chosen by analysis.next_runs
            code = run_rounds(self, arguments, bool(self.config.get("plan", False)))
            if code:
                sys.exit(code)
        return out

    def sweep_round(self, arguments: List[str]) -> Any:
        """The grid `arguments` give (with the config's sweep parameters): plan, skip, launch."""
        from andrea.launch.plan_text import print_summary

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        # matplotlib announces building its font cache at INFO in the middle of the progress
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        plan_only = bool(self.config.get("plan", False))
        jobs = self._plan(self._grid(arguments))
        todo = [j for j in jobs if j.to_run]
        launching = bool(todo) and not plan_only
        self._check_launch(todo, launching)
        refuse = self._prepare_data(jobs, launching)
        self._print_plan(jobs)
        _refuse(refuse)
        if plan_only:
            print("\nplan=true: nothing launched.")
            return []
        skipped = self._say_skipped(jobs, todo)
        returns = self._launch(jobs, todo) if todo else []
        elsewhere = [j for j in jobs if j.elsewhere]
        if elsewhere and self.config.get("wait", False):
            self._wait_for_earlier(elsewhere)
        failed = print_summary(jobs, skipped)
        if self._throughput:
            failed = self._measure_throughput(jobs) or failed
        if failed:
            sys.exit(1)
        return [returns]

    @property
    def _throughput(self) -> bool:
        return bool(self.config.get("sweep", {}).get("throughput", False))

    def _pricing(self) -> Tuple[str, float]:
        """(plan_gpu, plan_mfu): what the plan prices GPU-hours at."""
        return str(self.config.get("plan_gpu", "H100")), float(self.config.get("plan_mfu", 0.35))

    def _grid(self, arguments: List[str]) -> List[List[str]]:
        """Every job's overrides: the config's sweep parameters and the command line's, swept."""
        overrides = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        parsed = overrides.parse_overrides([*self._parse_config(), *arguments])
        return [job for batch in self.split_arguments(parsed, None) for job in batch]

    def _plan(self, grid: List[List[str]]) -> list:
        """Every job composed, validated and planned (andrea/launch/plan.py); one `error:` line
        and exit 2 when any is invalid. One full composition per distinct set of group choices;
        seeds, LRs, budgets are applied to a copy of it (compose.py: the same config as
        composing each job)."""
        from andrea.config.resolve import ConfigError
        from andrea.launch.plan import plan_jobs

        load = JobComposer(self.hydra_context.config_loader, self.config)
        try:
            return plan_jobs(load, grid, *self._pricing())
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    def _check_launch(self, todo: list, launching: bool) -> None:
        """What must hold before anything takes time: the engine answers (a Ray address nobody
        answers at: one bounded probe), and sweep.throughput has a launcher that can run it."""
        if launching:
            _refuse(_engine_problems(todo))
        if (
            self._throughput
            and not isinstance(self.launcher, BasicLauncher)
            and not isinstance(self.launcher, AndreaLauncher)
        ):
            print(
                f"error: sweep.throughput=true needs the basic launcher or andrea's submitit "
                f"launchers, not {type(self.launcher).__name__}; or run python -m "
                f"andrea.launch.throughput --sweep SWEEP_DIR on the runs' device after the sweep",
                file=sys.stderr,
            )
            sys.exit(2)

    def _prepare_data(self, jobs: list, launching: bool) -> List[str]:
        """Each distinct corpus checked and prepared once, here, before any job is submitted
        (plan=true only estimates), then the epochs of each job (andrea/launch/sufficiency.py);
        the problems that refuse the grid. When launching, only exact counts (after preparation)
        can refuse a grid for epochs."""
        from andrea.config.resolve import ConfigError
        from andrea.launch.sufficiency import (
            annotate_epochs,
            estimate_corpora,
            prepare_corpora,
            sufficiency_problems,
        )

        annotate_epochs(jobs, estimate_corpora(jobs))
        refuse = sufficiency_problems(jobs, epochs=not launching)
        if not refuse and launching:
            try:
                annotate_epochs(jobs, prepare_corpora(jobs))
            except ConfigError as e:
                print(f"error: {e}", file=sys.stderr)
                sys.exit(2)
            refuse = sufficiency_problems(jobs)
        return refuse

    def _print_plan(self, jobs: list) -> None:
        """Where the sweep goes, its plan (andrea/launch/plan_text.py) and its power lines."""
        from andrea.launch.packing import read_packing
        from andrea.launch.plan_text import print_plan

        # out_dir=runs/ (as `make demo` passes it) would print runs//demo
        sweep_dir = os.path.normpath(str(self.config.hydra.sweep.dir))
        print(f"sweep '{self.config.sweep_name}' -> {sweep_dir}")
        print_plan(
            jobs, *self._pricing(), packing=read_packing(sweep_dir), launchers=_engine_labels(jobs)
        )
        print("\n" + plan_power(jobs))

    def _say_skipped(self, jobs: list, todo: list) -> int:
        """Say which runs this launch leaves alone; the number of completed ones."""
        skipped = sum(j.state == COMPLETED for j in jobs)
        running = len(jobs) - len(todo) - skipped
        if skipped:
            print(f"\nskipping {skipped} completed run(s); re-running a sweep never redoes them.")
        if running:
            print(
                f"skipping {running} run(s) that a job of an earlier invocation is training "
                "or has queued; "
                + (
                    "waiting for them after the others (wait=true)."
                    if self.config.get("wait", False)
                    else "run the command again once they end, or with wait=true to wait for them."
                )
            )
        return skipped

    def _launch(self, jobs: list, todo: list) -> list:
        """The jobs to run, through the launcher: andrea's get the plan (the configs composed
        here, the FLOPs, the runs per job); the basic launcher runs them in turn here."""
        from analysis.dashboard import maybe_create_dashboard
        from andrea.config.resolve import to_dataclass
        from andrea.launch.plan import LaunchPlan

        maybe_create_dashboard(
            to_dataclass(self.config).wandb,
            str(self.config.sweep_name),
            labels=sorted({j.spec.label for j in jobs}),
        )
        plan = LaunchPlan(todo)
        if isinstance(self.launcher, AndreaLauncher):
            return list(self.launcher.launch(plan.overrides, initial_job_idx=0, plan=plan))
        if isinstance(self.launcher, BasicLauncher) and len(todo) > 1:
            return self._launch_in_turn(todo)
        return list(self.launcher.launch(plan.overrides, initial_job_idx=0))

    def _measure_throughput(self, jobs) -> bool:
        """sweep.throughput=true: one extra short job per device type times the sweep's
        (variant, size) pairs interleaved (`python -m andrea.launch.throughput`), writing
        <sweep>/throughput.json; through the same launcher as the runs (in this process's
        machine for the basic launcher, a submitit job with the first such run's resources
        otherwise). Returns True when a measurement failed."""
        sweep_dir = os.path.normpath(str(self.config.hydra.sweep.dir))
        measured = os.path.join(sweep_dir, "throughput.json")
        ends = [os.path.getmtime(j.run_dir.results) for j in jobs if j.run_dir.results.exists()]
        if os.path.exists(measured) and ends and os.path.getmtime(measured) > max(ends):
            print(
                f"\nsweep.throughput: {measured} is newer than every run's results: kept "
                "(delete it to measure again)"
            )
            return False
        from andrea.launch.throughput import command as throughput_command

        by_device: Dict[str, Any] = {}
        for j in jobs:
            by_device.setdefault(j.spec.train.device, j)
        failed = False
        for device, first in by_device.items():
            cmd = throughput_command(sweep_dir, device)
            print(
                f"\nsweep.throughput: timing the sweep's variants on {device} "
                f"({' '.join(cmd[1:])})",
                flush=True,
            )
            if isinstance(self.launcher, BasicLauncher):
                import subprocess

                rc = subprocess.run(cmd).returncode
            else:
                try:
                    print(self.launcher.run_command(first.overrides, cmd), end="")
                    rc = 0
                except Exception as e:  # noqa: BLE001 -- reported, the runs stand
                    print(f"sweep.throughput: the measurement job failed: {e}", file=sys.stderr)
                    rc = 1
            failed = failed or rc != 0
        return failed

    def _wait_for_earlier(self, elsewhere) -> None:
        """wait=true: block until the jobs of an earlier launch that hold these runs end, with
        their states as they change; Ctrl-C stops the waiting, not their jobs."""
        poll_s = float(self.config.hydra.launcher.get("poll_s", 5.0))
        print(
            f"\nwaiting for {len(elsewhere)} run(s) of an earlier launch (wait=true; Ctrl-C "
            "stops the waiting, not their jobs)",
            flush=True,
        )
        from andrea.launch import scheduler
        from andrea.launch.interrupts import describe, stop_on_signals

        try:
            with stop_on_signals() as guard:  # SIGTERM too, as while the launcher waits
                scheduler.wait_for_earlier(
                    [j.run_dir for j in elsewhere], poll_s, check=guard.check
                )
        except KeyboardInterrupt as e:
            name, code = describe(e)
            markers = [m for m in (j.run_dir.queued_marker() for j in elsewhere) if m]
            print(
                f"\nstopped waiting ({name}): "
                + scheduler.detached_text(
                    markers, os.path.normpath(str(self.config.hydra.sweep.dir))
                ),
                file=sys.stderr,
            )
            sys.exit(code)
        for j in elsewhere:  # they ended: the summary reads their results, not the old state
            j.state = "ended"

    def _launch_in_turn(self, todo) -> list:
        """The basic launcher runs jobs one after another in this process: hand it one job at a
        time and say where the sweep stands before each ("run 5 of 12, about 6 minutes left",
        from the training FLOPs done so far and the time they took)."""
        from andrea.components.progress import eta_text

        t0, total, returns = time.time(), sum(j.flops for j in todo), []
        durations, works = [], []
        for k, j in enumerate(todo):
            eta = eta_text(time.time() - t0, durations, works, len(todo) - k, total - sum(works))
            print(
                f"\nsweep: run {k + 1} of {len(todo)} ({j.spec.size}/{j.spec.label} seed "
                f"{j.spec.train.seed})" + (f", {eta}" if eta else ""),
                flush=True,
            )
            start = time.time()
            returns += list(self.launcher.launch([j.overrides], initial_job_idx=k))
            durations.append(time.time() - start)
            works.append(j.flops)
        return returns


def _refuse(problems: List[str]) -> None:
    """Exit 2 with one `error:` line per problem (a problem's own details on its line), when
    there are any."""
    if problems:
        for p in problems:
            print(f"error: {' '.join(p.split())}; nothing was launched", file=sys.stderr)
        sys.exit(2)


def _launcher_params(job) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(job.config.hydra.launcher, resolve=True)


def _engine_labels(jobs) -> dict:
    """Each engine's label in the plan ("ray at auto"), from the first job that uses it."""
    from andrea.launch import scheduler

    first = {}
    for j in jobs:
        if j.engine and j.engine not in first:
            first[j.engine] = j
    return {name: scheduler.get(name).label(_launcher_params(j)) for name, j in first.items()}


def _engine_problems(todo) -> list:
    """Each engine checks its launcher parameters once (an unreachable Ray address), before
    anything is submitted; the problems as error lines."""
    import json

    from andrea.config.resolve import ConfigError
    from andrea.launch import scheduler

    seen, problems = set(), []
    for j in todo:
        if not j.engine:
            continue
        params = _launcher_params(j)
        key = (j.engine, json.dumps(params, sort_keys=True, default=str))
        if key in seen:
            continue
        seen.add(key)
        try:
            scheduler.get(j.engine).check(params)
        except ConfigError as e:
            problems.append(str(e))
    return problems


def plan_power(jobs) -> str:
    """How precisely the grid will resolve each multiplier (analysis/estimates/power.py),
    with the noise of the jobs that already finished. Here, not in andrea.launch.task: the core
    package does not import the analysis; the sweeper sits above both."""
    from analysis.estimates.power import PlannedRun
    from analysis.inputs.collect import collect
    from analysis.report.power_lines import report

    planned = [
        PlannedRun(
            j.spec.label,
            j.spec.size,
            j.spec.train.seed,
            j.flops,
            len(j.spec.train.budgets or [1]),
            tuple(j.spec.train.budgets) if j.spec.train.budgets else None,
        )
        for j in jobs
    ]
    done = [j.run_dir.root for j in jobs if j.state == COMPLETED]
    return report(planned, collect(done).runs if done else [])
