"""What a run logs: `metrics.jsonl` and `dynamics.json` in the run directory, mirrored to W&B.

The run directory is the record; W&B is a view of it. So W&B must never block or crash training:
`wandb.init` runs under a short timeout, and any W&B failure (no network, no API key, a bug in
wandb) is logged once as a warning, after which the run continues with the files only.

Offline by default: W&B writes `<run>/wandb/offline-run-*/`, which `wandb sync` uploads later.

    logger = MetricsLogger(run_dir, wandb_cfg, run_id=run_id_for(run_dir.root), name=..., group=...,
                           tags=[...], config={...}, rank=rank, resume=resumed)
    if resumed: logger.truncate_after(ckpt_step)
    logger.log(step, {keys.TRAIN_LOSS: ..., keys.TOKENS: ..., keys.FLOPS: ...})
    logger.log_dynamics(step, stats)
    logger.finish(results)
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

from andrea.run import logkeys as keys
from andrea.run.results import COMPLETED, Record
from andrea.run.rundir import RunDir, atomic_write_bytes, atomic_write_json

log = logging.getLogger(__name__)

WANDB_MODES = ("offline", "online", "disabled")


@dataclass
class WandbConfig:
    """The `wandb` config group. Plain types only, so it works as a Hydra structured config."""

    mode: str = "offline"  # offline | online | disabled
    project: str = "andrea"
    entity: Optional[str] = None  # None → the API key's default entity
    tags: List[str] = field(
        default_factory=list
    )  # extra tags, added to the run's variant/size tags
    dashboard: bool = False  # online: create the sweep's W&B workspace at launch
    init_timeout_s: float = 30.0  # give up on W&B (and continue with files only) after this
    # Online: stop waiting for uploads at the end of the run after this (the rest stays in
    # <run>/wandb for `wandb sync`), so a flaky network cannot hold a finished job.
    finish_timeout_s: float = 300.0


def check_wandb_config(cfg: WandbConfig) -> None:
    if cfg.mode not in WANDB_MODES:
        raise ValueError(f"wandb.mode must be one of {', '.join(WANDB_MODES)}, got {cfg.mode!r}")
    for name in ("init_timeout_s", "finish_timeout_s"):
        if not getattr(cfg, name) > 0:
            raise ValueError(f"wandb.{name} must be > 0 seconds, got {getattr(cfg, name)!r}")


def run_id_for(run_dir: Path | RunDir) -> str:
    """A W&B run id that is the same every time the same run directory is (re)started.

    Readable tail of the directory name + a hash of its absolute path: W&B ids may only hold
    letters, digits, '-' and '_', and must be unique within a project.
    """
    root = Path(run_dir.root if isinstance(run_dir, RunDir) else run_dir).resolve()
    digest = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", root.name).strip("-")[-40:]
    return f"{readable}-{digest}" if readable else digest


def _wandb_settings(**kwargs: Any):
    """wandb.Settings with the fields this wandb version knows (finish_timeout is recent)."""
    import wandb

    known = getattr(wandb.Settings, "model_fields", None)
    return wandb.Settings(**{k: v for k, v in kwargs.items() if known is None or k in known})


def _plain(value: Any) -> Any:
    """A JSON-serialisable Python value (tensors and numpy scalars become numbers)."""
    if hasattr(value, "tolist"):  # torch.Tensor, numpy array or scalar
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return value


class MetricsLogger:
    """`metrics.jsonl` + `dynamics.json` + W&B for one run. On ranks other than 0 it does
    nothing."""

    def __init__(
        self,
        run_dir: RunDir,
        wandb_cfg: WandbConfig,
        run_id: str,
        name: str,
        group: str,
        tags: Sequence[str],
        config: Mapping[str, Any],
        rank: int = 0,
        resume: bool = False,
    ) -> None:
        check_wandb_config(wandb_cfg)
        self.run_dir = run_dir
        self.wandb_cfg = wandb_cfg
        self.run_id = run_id
        self.config = dict(config)
        self.active = rank == 0
        self._run = None  # the wandb Run, or None when W&B is off or has failed
        self._wandb_first_step = 0  # W&B's next step when the run was (re)opened
        self._warned = False
        self._finished = False
        if not self.active:
            return
        run_dir.root.mkdir(parents=True, exist_ok=True)
        if not resume:
            # A fresh start owns the file: lines from an earlier attempt would describe a
            # different trajectory.
            run_dir.metrics.write_text("")
        if wandb_cfg.mode != "disabled":
            all_tags = list(dict.fromkeys([*tags, *wandb_cfg.tags]))
            self._init_wandb(name=name, group=group, tags=all_tags)

    # --- W&B plumbing -----------------------------------------------------------------------
    def _init_wandb(self, name: str, group: str, tags: list) -> None:
        try:
            import wandb

            self.run_dir.wandb_dir.mkdir(parents=True, exist_ok=True)
            self._run = wandb.init(
                mode=self.wandb_cfg.mode,
                project=self.wandb_cfg.project,
                entity=self.wandb_cfg.entity,
                # W&B appends "wandb/" to dir, so its files land in run_dir.wandb_dir.
                dir=str(self.run_dir.wandb_dir.parent),
                id=self.run_id,
                resume="allow",
                name=name,
                group=group,
                job_type=keys.JOB_TRAIN,
                tags=tags,
                config=self.config,
                reinit="create_new",
                settings=_wandb_settings(
                    init_timeout=float(self.wandb_cfg.init_timeout_s),
                    finish_timeout=float(self.wandb_cfg.finish_timeout_s),
                    silent=True,
                    # train.log already holds the console; capturing it again only adds risk.
                    console="off",
                    save_code=False,
                ),
            )
            self._wandb_first_step = self._run.starting_step
            for axis in sorted(set(keys.AXES.values())):
                self._run.define_metric(axis)
            for key, axis in {**keys.AXES, **keys.AXES_GLOB}.items():
                self._run.define_metric(key, step_metric=axis)
        except Exception as e:  # noqa: BLE001 - any W&B failure must leave training running
            self._wandb_failed("wandb.init", e)

    def _wandb_failed(self, what: str, e: BaseException) -> None:
        if not self._warned:
            log.warning(
                "W&B disabled for this run after %s failed (%s: %s); metrics continue in %s",
                what,
                type(e).__name__,
                e,
                self.run_dir.metrics,
            )
            self._warned = True
        run, self._run = self._run, None
        if run is not None:
            try:
                run.finish(exit_code=1)
            except Exception:  # noqa: BLE001
                pass

    def _wandb_log(self, step: int, data: dict) -> None:
        if self._run is None:
            return
        try:
            # After a resume W&B already holds the steps up to where the previous attempt got;
            # the replayed ones would be rejected as non-monotonic, so skip them quietly.
            if step < self._wandb_first_step:
                return
            self._run.log(data, step=step)
        except Exception as e:  # noqa: BLE001
            self._wandb_failed("wandb.log", e)

    @property
    def wandb_run(self):
        """The live wandb Run, or None (disabled, rank ≠ 0, failed, finished)."""
        return self._run

    # --- metrics.jsonl ----------------------------------------------------------------------
    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append one line to metrics.jsonl (flushed) and log the same keys to W&B."""
        if not self.active:
            return
        values = {k: _plain(v) for k, v in metrics.items()}
        line: dict[str, Any] = {keys.STEP: int(step)}
        if keys.TOKENS in values:
            line[keys.JSONL_TOKENS] = values[keys.TOKENS]
        if keys.FLOPS in values:
            line[keys.JSONL_FLOPS] = values[keys.FLOPS]
        line.update(values)
        try:
            with open(self.run_dir.metrics, "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError as e:  # a full disk: name the file (the resume drops a torn line)
            raise OSError(e.errno, e.strerror, str(self.run_dir.metrics)) from None
        self._wandb_log(int(step), values)

    def truncate_after(self, step: int) -> None:
        """Drop the lines with step > `step` (and a torn last line): call on resume from `step`.

        The resumed run replays the steps after its checkpoint; without this the file would hold
        them twice.
        """
        if not self.active or not self.run_dir.metrics.exists():
            return
        kept = []
        for raw in self.run_dir.metrics.read_text().splitlines():
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and obj.get(keys.STEP, math.inf) <= step:
                kept.append(raw + "\n")
        atomic_write_bytes(self.run_dir.metrics, "".join(kept).encode())

    # --- dynamics ---------------------------------------------------------------------------
    def log_dynamics(
        self, step: int, stats: Mapping[str, Any], meta: Optional[Mapping[str, Any]] = None
    ) -> None:
        """Write dynamics.json (atomically, replacing the last one) and log the figures to W&B.

        stats: the model's `return_stats` dict, {"layer_rms": Tensor[L], "depth_weights": list of
        L+1 1-D tensors, ragged (entry l = mean weights of layer l over its sources), [] for
        baseline; with depth routing also "depth_max_weight" and "depth_entropy", one scalar per
        entry of depth_weights}. dynamics.json also carries `variant`, `block_size` and `size`
        from the run's config when present there, overridden by `meta`.
        """
        if not self.active:
            return
        layer_rms = [float(x) for x in _plain(stats["layer_rms"])]
        depth_weights = [[float(x) for x in _plain(w)] for w in stats.get("depth_weights", [])]
        # each depth routing's sharpness (token means; common.record_routing), [] without one
        sharpness = {
            k: [float(x) for x in _plain(stats.get(k, []))]
            for k in ("depth_max_weight", "depth_entropy")
        }
        record = {
            k: self.config[k]
            for k in (keys.CONFIG_VARIANT, keys.CONFIG_BLOCK_SIZE, keys.CONFIG_SIZE)
            if k in self.config
        }
        record.update(meta or {})
        record.update(
            {"step": int(step), "layer_rms": layer_rms, "depth_weights": depth_weights, **sharpness}
        )
        atomic_write_json(self.run_dir.dynamics, record)
        if self._run is None:
            return
        try:
            import wandb

            data = {
                keys.LAYER_RMS: wandb.Table(
                    columns=list(keys.LAYER_RMS_COLUMNS),
                    data=[[i, r] for i, r in enumerate(layer_rms)],
                ),
                keys.LAYER_RMS_PLOT: wandb.Image(_png(layer_rms_figure(layer_rms, step))),
            }
            if depth_weights:
                data[keys.DEPTH_WEIGHTS] = wandb.Image(
                    _png(depth_weights_figure(depth_weights, step))
                )
            if sharpness["depth_max_weight"]:
                data[keys.DEPTH_SHARPNESS] = wandb.Image(
                    _png(
                        depth_sharpness_figure(
                            sharpness["depth_max_weight"], sharpness["depth_entropy"], step
                        )
                    )
                )
        except Exception as e:  # noqa: BLE001
            self._wandb_failed("rendering the dynamics figures", e)
            return
        self._wandb_log(int(step), data)

    # --- end --------------------------------------------------------------------------------
    def finish(self, results: Optional[Mapping[str, Any]] = None) -> None:
        """Put `results` into the W&B summary and close the run (failed status → failed run)."""
        if not self.active or self._finished:
            return
        self._finished = True
        run, self._run = self._run, None
        if run is None:
            return
        results = dict(results or {})
        try:
            run.summary.update({k: _plain(v) for k, v in results.items()})
            run.finish(exit_code=0 if Record(results).status in (None, COMPLETED) else 1)
        except Exception as e:  # noqa: BLE001
            self._run = run
            self._wandb_failed("wandb.finish", e)


# --- figures ----------------------------------------------------------------------------------
def depth_weights_figure(depth_weights: Sequence[Sequence[float]], step: int):
    """Heatmap of depth-attention weights: row = layer (last = output), column = source."""
    import numpy as np
    from matplotlib.figure import Figure

    n_rows = len(depth_weights)
    n_cols = max(len(w) for w in depth_weights)
    grid = np.full((n_rows, n_cols), np.nan)  # ragged: layer l sees only its earlier sources
    for i, w in enumerate(depth_weights):
        grid[i, : len(w)] = w
    fig = Figure(figsize=(1.5 + 0.25 * n_cols, 1.2 + 0.25 * n_rows), layout="constrained")
    ax = fig.add_subplot()
    im = ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", origin="upper")
    fig.colorbar(im, ax=ax, label="weight")
    ax.set_xlabel("source (0 = embedding)")
    ax.set_ylabel("layer (last = output)")
    ax.set_title(f"depth attention, step {step}")
    return fig


def depth_sharpness_figure(max_weight: Sequence[float], entropy: Sequence[float], step: int):
    """Per depth routing (row of the heatmap): the mean largest weight and the mean entropy."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(range(len(max_weight)), max_weight, marker="o", label="max weight")
    ax.set_xlabel("depth routing (heatmap row)")
    ax.set_ylabel("mean max weight")
    ax.set_ylim(0, 1)
    ax2 = ax.twinx()
    ax2.plot(range(len(entropy)), entropy, marker="s", color="C1", label="entropy")
    ax2.set_ylabel("mean entropy (nats)", color="C1")
    ax.set_title(f"depth routing sharpness, step {step}")
    return fig


def layer_rms_figure(layer_rms: Sequence[float], step: int):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(range(len(layer_rms)), layer_rms, marker="o")
    ax.set_xlabel("sublayer")
    ax.set_ylabel("RMS of output")
    ax.set_yscale("log")
    ax.set_title(f"per-layer output RMS, step {step}")
    return fig


def _png(fig):
    """A PIL image of `fig` (no pyplot: no global figure state inside a training process)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    buf = io.BytesIO()
    FigureCanvasAgg(fig).print_png(buf)
    buf.seek(0)
    return Image.open(buf)
