"""Ctrl-C and SIGTERM at any moment of a launch (andrea/launch/interrupts.py): during submission,
right after the submit line, during a poll. The launcher runs here with a fake executor, so the
signal lands exactly where each test says (the Slurm end-to-end version is in
test_slurm_sweep.py)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import weakref
from types import SimpleNamespace

import pytest
from conftest import REPO
from omegaconf import OmegaConf

from andrea.launch.interrupts import SignalGuard, Stop, stop_on_signals
from andrea.run.rundir import RunDir


class Leaked(Exception):
    """The signal reached the test's own handler: the launcher did not take it."""


@pytest.fixture
def own_handlers():
    """SIGINT/SIGTERM raise Leaked while a test runs (never pytest's KeyboardInterrupt or a
    killed worker), and come back as they were afterwards."""

    def leaked(signum, frame):
        raise Leaked(signal.Signals(signum).name)

    before = {s: signal.signal(s, leaked) for s in (signal.SIGINT, signal.SIGTERM)}
    yield leaked
    for s, h in before.items():
        signal.signal(s, h)


def fake_launcher(tmp_path, executor: str = "slurm", on_submit=None, refresh=None):
    """A launcher of the engine `executor` whose submission hands out job ids without a
    cluster; `on_submit` runs inside the submission, after the scheduler has taken the jobs;
    `refresh` is the engine's state poll (sacct on Slurm)."""
    import dataclasses

    from andrea.launch import scheduler
    from hydra_plugins.andrea_plugins import launcher

    def submit(fn, args, params):
        jobs = [SimpleNamespace(job_id=f"4242_{k}", done=lambda: False) for k in range(len(args))]
        if on_submit:
            on_submit()
        return jobs

    fake_engine = dataclasses.replace(
        scheduler.get(executor),
        submit=submit,
        refresh=refresh or (lambda jobs: None),
        state=lambda job: "PENDING",
    )

    class Fake(launcher.AndreaLauncher):
        engine = fake_engine

        def __init__(self):
            self.config = OmegaConf.create(
                {"hydra": {"launcher": {"poll_s": 0.01}, "sweep": {"dir": str(tmp_path / "runs")}}}
            )
            self.hydra_context = object()

        def _job_params(self, overrides, plan=None):
            return {"partition": "debug"}, tmp_path / "runs" / overrides[0]

    return Fake()


def kill_self(signum):
    os.kill(os.getpid(), signum)


def ctrl_c_inside_a_finalizer() -> None:
    """Ctrl-C handled while Python runs a finalizer (here a `weakref.finalize` callback; also
    `__del__`, a gc callback): the handler's Stop is raised inside it, where Python only prints
    "Exception ignored" and goes on."""

    class Collected:
        pass

    obj = Collected()
    weakref.finalize(obj, signal.raise_signal, signal.SIGINT)  # runs the handler at once
    del obj  # the last reference: the finalizer runs here


def launch(fake):
    return fake.launch([["a=1"], ["a=2"]], initial_job_idx=0)


def test_a_signal_during_submission_waits_for_the_job_ids_to_be_recorded(
    tmp_path, capsys, own_handlers, monkeypatch
):
    """Ctrl-C while sbatch runs: a job the scheduler took and nobody wrote down would be
    submitted again by a re-run. The stop waits until both runs name their job."""
    from hydra_plugins.andrea_plugins import launcher

    monkeypatch.setattr(launcher, "wait_for_jobs", lambda *a, **k: pytest.fail("waited"))
    fake = fake_launcher(tmp_path, on_submit=lambda: kill_self(signal.SIGINT))
    with pytest.raises(SystemExit) as e:
        launch(fake)
    assert e.value.code == 130
    assert [RunDir(tmp_path / "runs" / f"a={k}").queued_job_id() for k in (1, 2)] == [
        "4242_0",
        "4242_1",
    ]
    err = capsys.readouterr().err
    assert "interrupted (Ctrl-C): the Slurm jobs keep running on the cluster" in err
    assert "squeue -j 4242" in err


def test_sigterm_right_after_the_submit_line_detaches(tmp_path, capsys, own_handlers, monkeypatch):
    """The first moment after "submitted ..." (before any poll) took no handler: SIGTERM killed
    the process without a word."""
    from hydra_plugins.andrea_plugins import launcher

    def print_then_signal(*a, **k):
        print(*a, **k)
        if "submitted 2 job(s)" in str(a[0]):
            kill_self(signal.SIGTERM)

    monkeypatch.setattr(launcher, "print", print_then_signal, raising=False)
    monkeypatch.setattr(launcher, "wait_for_jobs", lambda *a, **k: pytest.fail("waited"))
    with pytest.raises(SystemExit) as e:
        launch(fake_launcher(tmp_path))
    assert e.value.code == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "interrupted (SIGTERM): the Slurm jobs keep running on the cluster" in err


def test_a_signal_during_a_poll_detaches_and_local_jobs_stop_with_the_sweep(
    tmp_path, capsys, own_handlers, monkeypatch
):

    def sacct(jobs):  # the signal arrives while the poll's sacct runs
        kill_self(signal.SIGINT)
        pytest.fail("the poll went on after the signal")

    with pytest.raises(SystemExit) as e:
        launch(fake_launcher(tmp_path, refresh=sacct))
    assert e.value.code == 130 and "interrupted (Ctrl-C)" in capsys.readouterr().err
    # local jobs end with this process: the interrupt goes on to sweep.py ("re-run to resume")
    with pytest.raises(Stop):
        launch(fake_launcher(tmp_path / "local", executor="local", refresh=sacct))


def test_a_second_signal_exits_at_once_even_while_the_first_waits():
    code = textwrap.dedent("""
        import os, signal, time
        from andrea.launch.interrupts import stop_on_signals
        with stop_on_signals() as guard, guard.holding():
            os.kill(os.getpid(), signal.SIGINT)   # deferred to the end of the block
            print("deferred", flush=True)
            os.kill(os.getpid(), signal.SIGINT)   # the second: out now
            time.sleep(30)
        print("not reached")
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert out.returncode == 130, out.stdout + out.stderr
    assert out.stdout == "deferred\n" and "SIGINT again: exiting now" in out.stderr


def test_an_error_in_a_held_block_after_a_signal_is_the_stop():
    """A terminal's Ctrl-C also reaches sbatch, which then fails: that is the stop, not an
    sbatch error with a traceback."""
    guard = SignalGuard()
    guard.received = guard.pending = signal.SIGINT  # as _handle leaves it inside holding()
    guard._holding = 0
    with pytest.raises(Stop) as e:
        with guard.holding():
            guard.pending = signal.SIGINT
            raise RuntimeError("sbatch: interrupted")
    assert isinstance(e.value.__cause__, RuntimeError)
    with pytest.raises(ValueError):  # with no signal, an error is the error
        with SignalGuard().holding():
            raise ValueError("bad")


def test_an_ignored_sigint_stays_ignored_and_handlers_come_back(own_handlers):
    """A shell without job control starts `cmd &` with SIGINT ignored, so that the terminal's
    Ctrl-C leaves it alone; the guard keeps it so (SIGTERM is still taken). Without a signal,
    the handlers found are back after the block."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with stop_on_signals():
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is not own_handlers
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is own_handlers


def test_a_stop_python_swallows_in_a_finalizer_still_ends_the_block(own_handlers):
    """The Stop raised inside a finalizer never reaches the block, which goes on; the block's
    end raises it, with Ctrl-C's exit code. A Stop that did reach the block and was handled
    there is not raised a second time."""
    went_on = False
    with pytest.raises(Stop) as e:
        with stop_on_signals() as guard:
            ctrl_c_inside_a_finalizer()
            assert guard.received == signal.SIGINT
            went_on = True
    assert went_on and e.value.exit_code == 130
    with stop_on_signals():
        with pytest.raises(Stop):
            kill_self(signal.SIGINT)
            pytest.fail("the signal did not stop the block")
    # handled: the block ends without a second Stop


def test_a_ctrl_c_swallowed_during_a_poll_detaches_at_the_next_check(
    tmp_path, capsys, own_handlers
):
    """The flaky end of test_ray_sweep's Ctrl-C: the signal came while a poll's Ray client
    ran a finalizer, the watching went on and the sweep exited 0. The poll's check stops it,
    and the jobs are said to keep running, once."""
    polls = []

    def refresh(jobs):
        polls.append(1)
        if len(polls) > 1:
            pytest.fail("the watching went on after the Ctrl-C")
        ctrl_c_inside_a_finalizer()

    with pytest.raises(SystemExit) as e:
        launch(fake_launcher(tmp_path, refresh=refresh))
    assert e.value.code == 130
    err = capsys.readouterr().err
    assert err.count("interrupted (Ctrl-C): the Slurm jobs keep running on the cluster") == 1


def test_a_ctrl_c_swallowed_while_waiting_for_an_earlier_launch_stops_the_waiting(
    tmp_path, own_handlers
):
    """wait=true's wait (the sweeper's) checks after each poll as the launcher's does."""
    import fcntl

    from andrea.launch import scheduler

    held = RunDir(tmp_path / "a")
    held.root.mkdir(parents=True)
    held.lock.touch()
    fd = os.open(held.lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a process trains it: the wait goes on until it ends
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) > 1:
            pytest.fail("the waiting went on after the Ctrl-C")
        ctrl_c_inside_a_finalizer()

    try:
        with pytest.raises(Stop), stop_on_signals() as guard:
            scheduler.wait_for_earlier(
                [held], 7, sleep=sleep, stream=io.StringIO(), check=guard.check
            )
    finally:
        os.close(fd)
    assert sleeps == [7]
