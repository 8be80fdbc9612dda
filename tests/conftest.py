"""Shared test setup: no network, no user caches, and a tiny corpus prepared once per session."""

from __future__ import annotations

import importlib.util
import os
import random
import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest

# the helpers a plug-in's tests import too (docs/residual_schemes.md), re-exported for the suite
from andrea.testing.plugins import require_plugin  # noqa: F401
from andrea.testing.runs import TINY_RUN, compose_run  # noqa: F401

# Ports a test's server may take: above Ray's worker ports (10002-19999 by default) and below the
# kernel's ephemeral range, where every outgoing connection of the machine (Ray's, wandb's, Slurm's)
# takes its local port. A port the OS hands out by binding port 0 lies inside that range, and
# another process can connect from it between its release and the test's bind: a process group's
# store once failed so, "EADDRINUSE", on a busy machine.
PORTS_FROM = 20000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(span: int = 1) -> int:
    """A port, with the `span` - 1 after it, that no process holds now and no outgoing connection
    can take (PORTS_FROM above): tests that start a process group or a cluster use it. Drawn at
    random, so parallel workers do not pick the same one."""
    top = _ephemeral_start() - span
    for _ in range(1000):
        port = random.randrange(PORTS_FROM, top)
        if all(_bindable(port + i) for i in range(span)):
            return port
    raise RuntimeError(f"no {span} free port(s) between {PORTS_FROM} and {top + span}")


REPO = Path(__file__).resolve().parent.parent

# Nothing in the suite may touch the network or the user's W&B / data caches.
os.environ.setdefault("WANDB_BASE_URL", "http://127.0.0.1:9")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# One intra-op thread in every test process and every process a test starts (they inherit this
# environment), set before torch is first imported. The workers share the machine's cores, so
# more threads only oversubscribe them; and with several threads the split of a reduction across
# threads is not fixed, so two runs of the same config can differ in the last bits
# (docs/testing.md). Tests that compare runs bit for bit need one.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# Every process a test starts (sweeps, Slurm jobs) puts its temporary files in one folder of
# this session, removed when the session ends: wandb makes /tmp/tmp*wandb-artifacts and
# -media folders at import and deletes them only at a clean exit, so the suite's killed and
# requeued processes left a dozen behind. This process caches the system's temp
# folder first, so pytest's own tmp_path folders stay where they were.
# Once per process: this file is imported twice in a worker (as pytest's `tests.conftest` and as
# `conftest` by the tests that import from it), and two folders made the worker's TMPDIR depend on
# which import ran last (a test's environment restore then put back the other one).
tempfile.gettempdir()
_owner, _, _folder = os.environ.get("ANDREA_TESTS_TMP", "").partition(":")
if _owner == str(os.getpid()) and _folder:
    SESSION_TMP = _folder
else:
    SESSION_TMP = tempfile.mkdtemp(prefix="andrea-tests-")
    os.environ["ANDREA_TESTS_TMP"] = f"{os.getpid()}:{SESSION_TMP}"
os.environ["TMPDIR"] = SESSION_TMP


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmpdir plugin reads the option
def convert_script(folder: Path):
    """`folder`/convert.py, the standard-library script that wrote a data folder's runs.csv (a
    file, not a package: bench/data/*/ are not importable)."""
    spec = importlib.util.spec_from_file_location(f"{folder.name}_convert", folder / "convert.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    """pytest's tmp_path folders in this session's folder too, removed with it: by default they
    go to pytest-of-<user>/pytest-N under the system's temp folder, and the last three sessions'
    stay there (a whole suite's: ~200 MB). xdist workers get theirs under the main process's
    (popen-gwN), which removes the lot at its end. A --basetemp given by hand is kept."""
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = os.path.join(SESSION_TMP, "pytest")


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


@pytest.fixture
def one_thread():
    """One intra-op thread for tests of tiny shapes, where threads only add contention."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    """One ANDREA_DATA cache for the whole session (the tiny corpus is prepared once)."""
    path = tmp_path_factory.mktemp("andrea_data")
    old = os.environ.get("ANDREA_DATA")
    os.environ["ANDREA_DATA"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ANDREA_DATA", None)
    else:
        os.environ["ANDREA_DATA"] = old


def run_file_bytes(run: Path, run_id: str, needle: bytes, timeout_s: float = 300.0) -> bytes:
    """The run file once it holds `needle`: `finish()` returns before wandb-core has flushed the
    file (it does so when its stream closes, at the latest at process exit). The wait ends as soon
    as the bytes are there; its limit only stops a hang, wide for a busy machine."""
    path = run / f"run-{run_id}.wandb"
    deadline = time.monotonic() + timeout_s
    while True:
        data = path.read_bytes()
        if needle in data or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


def sigint_as_in_a_terminal() -> None:
    """`preexec_fn` of a process a test interrupts with SIGINT: a sweep started from a terminal
    takes Ctrl-C, but one started by a shell without job control (`make test &`, CI scripts)
    inherits SIGINT ignored, and the test's SIGINT would be lost."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


# The longest tests outside the Slurm and Ray chains (a clean clone's --durations), collected
# first so that xdist hands them out first: short tests then fill the end of the run, instead of
# one long test started late ending it alone.
LONG_TESTS = (
    # 552 s of wall beside the rest (33 steps, each its own Python): collected in file order, it
    # started mid-run and was the second-last test to end
    "tests/test_heldout_script.py::test_heldout_smoke_runs_every_step",
    "tests/test_faults.py::test_ten_faults",
    "tests/test_bench.py::test_gpu_check_smoke",
    "tests/test_sweep.py::test_basic_and_submitit_local",
    "tests/test_model.py::test_compiled_model_matches_eager",
    "tests/test_sweep.py::test_an_adaptive_design_trains",
    "tests/test_kromhc.py::test_a_cpu_sweep_against_the_baseline",
    "tests/test_train.py::test_sigusr2_checkpoints",
    "tests/test_protocol_data.py::test_cpu_demo_states",
    "tests/test_fsdp.py::test_fsdp_on_two_ranks",
    "tests/test_sweep.py::test_a_failed_run_is_reported",
    "tests/test_sweep_progress.py::test_sequential_sweep",
)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_TESTS))  # stable: else in order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist; inert when it is not installed
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs four pytest-xdist workers. The Slurm tests (tests/test_slurm_*.py) are one
    unit of work for one worker, run in order: the local cluster is one machine-wide service that
    some of them restart (two nodes) or fill with jobs; the Ray tests (tests/test_ray_*.py) are
    another, for their one cluster. Being the longest serial chains, the units go out first
    (xdist sends the largest scopes first) while the other workers take the rest, one test at a
    time. (xdist's own `--dist loadgroup` marks would do this, but xdist 3.8 sets
    the group on `item._nodeid`, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # another --dist asked for by hand: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class SlurmTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.split("::")[0].rsplit("/", 1)[-1]
            for engine in ("slurm", "ray"):  # one cluster each, its tests in order on one worker
                if name.startswith(f"test_{engine}_"):
                    return engine
            return nodeid

    return SlurmTestsTogether(config, log)
