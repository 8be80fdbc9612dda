"""One run = one directory. This module is the only place that knows its layout.

<run>/
  .hydra/                 Hydra's resolved config and overrides (written by Hydra)
  code_version.json       git SHA + dirty flag of the code that trained the run, its plug-ins
  metrics.jsonl           one JSON object per logged step
  dynamics.json           per-layer output RMS and depth-attention weights at the last eval
  checkpoints/step_XXXXXXXX.pt   written atomically; resume picks the newest complete one
  points.json             budgets finished so far (train.budgets), written atomically
  model.json              the ModelConfig it trains, and tokenizer.json, the tokenizer of
  tokenizer.json          its data: what evaluation and export read (andrea/eval/)
  tasks/<hash>.json       downstream task metrics, one file per task settings (andrea/eval/)
  results.json            written last, atomically, only when the run ends
  train.log               console log of the run
  wandb/                  W&B's own files (offline runs live here)
  .lock                   flock'ed by the process training the run (never two at once)
  .queued                 the scheduler job submitted to train it (andrea.launch.scheduler)
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

# Directories inside a run or a sweep that never hold runs: the walk does not enter them.
SKIP_DIRS = frozenset(
    {".hydra", "checkpoints", "wandb", "tasks", "__pycache__", ".git", "analysis"}
)


@contextmanager
def atomic_open(path: Path) -> Iterator[Any]:
    """A binary file to write `path` through: a temp file in the same directory, fsynced and
    renamed over `path` when the block ends; removed if it raises (a large file streams here).

    A reader (or a resumed run) sees either the old file or the complete new one, never half.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are for the whole team
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:  # a full disk: name the file
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (`atomic_open`)."""
    with atomic_open(path) as f:
        f.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def read_json(path: Path) -> Any | None:
    """The parsed file, or None when it is missing or not valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


class RunLocked(RuntimeError):
    """Another live process is training this run directory."""


@dataclass(frozen=True)
class RunDir:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # --- paths -------------------------------------------------------------------------------
    @property
    def hydra_dir(self) -> Path:
        return self.root / ".hydra"

    @property
    def code_version(self) -> Path:
        return self.root / "code_version.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def dynamics(self) -> Path:
        return self.root / "dynamics.json"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def points(self) -> Path:
        return self.root / "points.json"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    @property
    def model_config(self) -> Path:
        return self.root / "model.json"

    @property
    def tokenizer(self) -> Path:
        return self.root / "tokenizer.json"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks"

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def wandb_dir(self) -> Path:
        return self.root / "wandb"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def queued(self) -> Path:
        return self.root / ".queued"

    def mark_queued(self, job_id: str, engine: str | None = None) -> None:
        """Record the scheduler job that will train this run, and its engine
        (andrea.launch.scheduler.live_jobs asks that engine whether it still holds it)."""
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            self.queued, {"job_id": str(job_id), **({"engine": engine} if engine else {})}
        )

    def queued_marker(self) -> dict | None:
        """{"job_id": ..., "engine": ...} of the job recorded by `mark_queued`, or None."""
        marker = read_json(self.queued)
        return marker if isinstance(marker, dict) and "job_id" in marker else None

    def queued_job_id(self) -> str | None:
        marker = self.queued_marker()
        return str(marker["job_id"]) if marker else None

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoints / f"step_{step:08d}.pt"

    def list_checkpoints(self) -> list[Path]:
        """Complete checkpoints, newest first (temp files from an interrupted write are ignored)."""
        if not self.checkpoints.is_dir():
            return []
        return sorted(self.checkpoints.glob("step_*.pt"), reverse=True)

    # --- state -------------------------------------------------------------------------------
    def read_results(self) -> Any | None:
        """results.json as parsed, for andrea.run.results (which says what it holds: a status,
        a completed run) to read; None when missing or not valid JSON."""
        return read_json(self.results)

    def is_run(self) -> bool:
        """Whether the directory is a run's (it holds results.json, checkpoints or Hydra's
        config): a walk stops there, since a run directory holds no other runs."""
        return self.results.is_file() or self.checkpoints.is_dir() or self.hydra_dir.is_dir()

    def write_results(self, results: dict) -> None:
        atomic_write_json(self.results, results)

    @contextmanager
    def exclusive(self, enabled: bool = True):
        """Hold the run's lock while training it; RunLocked if a live process holds it.

        A re-submitted sweep (detach, re-run) must not start a second trainer on a run whose
        job is still queued-then-running: both would write the same checkpoints and results.
        The kernel drops the lock when its process dies, so a killed or requeued job frees it.
        """
        if not enabled:
            yield
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = self.lock.read_text().strip() or "?"
                raise RunLocked(
                    f"{self.root} is being trained by another process "
                    f"({owner}); not starting a second one"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on {os.uname().nodename}".encode())
            yield
        finally:
            os.close(fd)

    def is_locked(self) -> bool:
        """True while a live process trains this run (see `exclusive`)."""
        if not self.lock.exists():
            return False
        fd = os.open(self.lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def write_code_version(self, plugins: list[dict] | None = None) -> None:
        """code_version.json: andrea's git SHA and dirty flag, and the plug-ins the run's code
        came from (andrea.run.provenance) when given."""
        extra = {"plugins": plugins} if plugins is not None else {}
        atomic_write_json(self.code_version, {**code_version(), **extra})


def find_run_dirs(root: Path) -> Iterator[RunDir]:
    """Every run directory at or below `root` (`RunDir.is_run`: finished, failed, running or
    queued alike), in sorted path order; what each holds is the caller's to read. The one walk
    over a sweep: the analysis, the evaluation and the LR selection all find runs through it."""
    for dirpath, dirnames, _ in os.walk(root):
        rd = RunDir(Path(dirpath))
        if rd.is_run():
            dirnames[:] = []
            yield rd
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)


def write_model_files(
    run_dir: RunDir, model_cfg: Any, tokenizer_path: Path | None, seq_len: int
) -> None:
    """model.json (the run's ModelConfig as plain values, and the sequence length it trained
    at) and a copy of its tokenizer, so that a checkpoint can be evaluated or exported without
    the run's Hydra config or data cache. Rewritten only when they differ (a resumed run finds
    them in place)."""
    from dataclasses import asdict

    config = {"model": asdict(model_cfg), "seq_len": int(seq_len)}
    if read_json(run_dir.model_config) != config:
        atomic_write_json(run_dir.model_config, config)
    if tokenizer_path is not None:
        data = Path(tokenizer_path).read_bytes()
        if not run_dir.tokenizer.exists() or run_dir.tokenizer.read_bytes() != data:
            atomic_write_bytes(run_dir.tokenizer, data)


def code_version() -> dict:
    """git SHA and dirty flag of the andrea checkout, or nulls when it is not a git checkout."""
    repo = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=repo, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha, "dirty": None if status is None else bool(status)}
