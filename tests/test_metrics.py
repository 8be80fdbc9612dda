"""MetricsLogger: metrics.jsonl, dynamics.json and real W&B offline files; W&B never blocks.

wandb 0.31 has no Python reader for .wandb files any more, so these tests check the files W&B
writes (run file, media), not their decoding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import run_file_bytes

from andrea.run import logkeys as keys
from andrea.run.metrics import MetricsLogger, WandbConfig, check_wandb_config, run_id_for
from andrea.run.rundir import RunDir

REPO = Path(__file__).resolve().parent.parent
CONFIG = {
    "variant": "attnres_block",
    "block_size": 2,
    "size": "tiny-test",
    "model": {"residual": "attnres_block", "block_size": 2, "n_layer": 2},
    "marker": "cfg-marker-7f3a",
}


@pytest.fixture(autouse=True)
def wandb_env(monkeypatch, tmp_path):
    # No DNS lookup of W&B's default host, no user settings or keys leaking into the test.
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    for var in (
        "WANDB_MODE",
        "WANDB_API_KEY",
        "WANDB_DIR",
        "WANDB_RUN_ID",
        "WANDB_PROJECT",
        "WANDB_ENTITY",
        "WANDB_RESUME",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb_cache"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no.netrc"))


def make_stats(n_layer: int = 4, attnres: bool = True) -> dict:
    weights = [torch.softmax(torch.arange(i + 1.0), 0) for i in range(n_layer + 1)]
    stats = {
        "layer_rms": torch.linspace(1.0, 2.0, n_layer),
        "depth_weights": weights if attnres else [],
    }
    if attnres:  # what common.record_routing appends beside each routing's mean weights
        stats["depth_max_weight"] = [w.max() for w in weights]
        stats["depth_entropy"] = [-(w * w.log()).sum() for w in weights]
    return stats


def log_steps(logger: MetricsLogger, steps) -> None:
    for s in steps:
        logger.log(
            s,
            {
                keys.TRAIN_LOSS: torch.tensor(10.0 / (s + 1)),
                keys.TOKENS: 128 * s,
                keys.FLOPS: 1e9 * s,
                keys.LR: 1e-3,
            },
        )


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def offline_runs(rd: RunDir) -> list[Path]:
    return sorted(rd.wandb_dir.glob("offline-run-*"))


def new_logger(rd: RunDir, mode: str = "offline", **kw) -> MetricsLogger:
    kw.setdefault("run_id", run_id_for(rd))
    kw.setdefault("rank", 0)
    return MetricsLogger(
        rd,
        WandbConfig(mode=mode),
        name="tiny",
        group="sweep-g",
        tags=["attnres_block", "tiny-test"],
        config=CONFIG,
        **kw,
    )


def test_offline_run_writes_jsonl_and_real_wandb_files(tmp_path):
    rd = RunDir(tmp_path / "run")
    logger = new_logger(rd)
    log_steps(logger, range(1, 4))
    logger.log(3, {keys.VAL_LOSS: 2.5})
    logger.log_dynamics(3, make_stats())
    logger.finish({"status": "completed", "val_loss": 2.5})

    lines = read_jsonl(rd.metrics)
    assert [l[keys.STEP] for l in lines] == [1, 2, 3, 3]
    first = lines[0]
    assert first[keys.JSONL_TOKENS] == first[keys.TOKENS] == 128
    assert first[keys.JSONL_FLOPS] == first[keys.FLOPS] == 1e9
    assert first[keys.TRAIN_LOSS] == pytest.approx(5.0)
    assert lines[-1] == {keys.STEP: 3, keys.VAL_LOSS: 2.5}

    (run,) = offline_runs(rd)
    assert run.name.endswith("-" + run_id_for(rd))
    data = run_file_bytes(run, run_id_for(rd), CONFIG["marker"].encode())
    # Config, group, job type and logged keys are in the run file (W&B 0.31 writes
    # files/config.yaml only when syncing, so the run file is where they live offline).
    for needle in (
        CONFIG["marker"],
        "sweep-g",
        keys.JOB_TRAIN,
        keys.TRAIN_LOSS,
        keys.VAL_LOSS,
        keys.TOKENS,
        "attnres_block",
        "tiny-test",
    ):
        assert needle.encode() in data, needle
    media = run / "files" / "media"
    for key in keys.DYNAMICS_IMAGES:
        (png,) = media.glob(f"images/{key}_3_*.png")
        assert png.read_bytes()[:4] == b"\x89PNG"
    (table,) = media.glob(f"table/{keys.LAYER_RMS}_3_*.table.json")
    table_obj = json.loads(table.read_text())
    assert table_obj["columns"] == list(keys.LAYER_RMS_COLUMNS)
    assert [row[0] for row in table_obj["data"]] == [0, 1, 2, 3]


def test_dynamics_json_ragged_and_meta(tmp_path):
    rd = RunDir(tmp_path / "run")
    logger = new_logger(rd, mode="disabled")
    logger.log_dynamics(7, make_stats(n_layer=3), meta={"size": "override"})
    dyn = json.loads(rd.dynamics.read_text())
    assert dyn["step"] == 7
    assert dyn["variant"] == "attnres_block" and dyn["block_size"] == 2
    assert dyn["size"] == "override"
    assert dyn["layer_rms"] == pytest.approx([1.0, 1.5, 2.0])
    assert [len(w) for w in dyn["depth_weights"]] == [1, 2, 3, 4]
    assert all(sum(w) == pytest.approx(1.0) for w in dyn["depth_weights"])
    # each routing's sharpness beside its weights: one routing (one source) has max 1, entropy 0
    assert dyn["depth_max_weight"][0] == 1.0 and dyn["depth_entropy"][0] == 0.0
    assert len(dyn["depth_max_weight"]) == len(dyn["depth_entropy"]) == 4

    logger.log_dynamics(9, make_stats(n_layer=3, attnres=False))  # baseline: no depth weights
    dyn = json.loads(rd.dynamics.read_text())
    assert dyn["step"] == 9 and dyn["depth_weights"] == [] and dyn["depth_max_weight"] == []
    assert not list(rd.root.glob(".dynamics.json.*"))  # no temp files left behind
    logger.finish({"status": "completed"})


def test_resume_keeps_run_id_and_truncates_jsonl(tmp_path):
    rd = RunDir(tmp_path / "run")
    first = new_logger(rd)
    log_steps(first, range(1, 6))
    with open(rd.metrics, "a") as f:
        f.write('{"step": 6, "train/lo')  # torn last line of a killed process
    first.finish({"status": "failed", "error": "preempted"})

    second = new_logger(rd, resume=True)
    second.truncate_after(3)  # resumed from the step-3 checkpoint
    assert [l[keys.STEP] for l in read_jsonl(rd.metrics)] == [1, 2, 3]
    log_steps(second, range(4, 6))
    second.finish({"status": "completed"})

    assert [l[keys.STEP] for l in read_jsonl(rd.metrics)] == [1, 2, 3, 4, 5]
    runs = offline_runs(rd)
    assert len(runs) == 2  # one offline dir per attempt; `wandb sync` merges them by id
    # Same W&B id in both (the dir name gets a "-1" suffix when both start in the same second).
    assert all((r / f"run-{run_id_for(rd)}.wandb").is_file() for r in runs)
    assert all(
        keys.TRAIN_LOSS.encode() in run_file_bytes(r, run_id_for(rd), keys.TRAIN_LOSS.encode())
        for r in runs
    )


def test_fresh_start_discards_stale_jsonl(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.root.mkdir()
    rd.metrics.write_text('{"step": 99}\n')
    logger = new_logger(rd, mode="disabled")
    log_steps(logger, [1])
    assert [l[keys.STEP] for l in read_jsonl(rd.metrics)] == [1]


def test_disabled_mode_writes_files_but_no_wandb(tmp_path):
    rd = RunDir(tmp_path / "run")
    logger = new_logger(rd, mode="disabled")
    assert logger.wandb_run is None
    log_steps(logger, range(1, 3))
    logger.log_dynamics(2, make_stats())
    logger.finish({"status": "completed"})
    logger.finish({"status": "completed"})  # idempotent
    assert len(read_jsonl(rd.metrics)) == 2
    assert rd.dynamics.exists()
    assert not rd.wandb_dir.exists()


def test_nonzero_rank_writes_nothing(tmp_path):
    rd = RunDir(tmp_path / "run")
    logger = new_logger(rd, rank=1)
    log_steps(logger, range(1, 3))
    logger.truncate_after(0)
    logger.log_dynamics(2, make_stats())
    logger.finish({"status": "completed"})
    assert logger.wandb_run is None
    assert not rd.root.exists()


def test_run_id_is_stable_and_wandb_safe(tmp_path):
    a = tmp_path / "sweep" / "attnres_block-s4 andrea@12m"
    a.mkdir(parents=True)
    rid = run_id_for(a)
    assert rid == run_id_for(RunDir(a)) == run_id_for(tmp_path / "sweep" / ".." / "sweep" / a.name)
    assert rid != run_id_for(tmp_path / "other" / a.name)
    assert set(rid) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    assert len(rid) <= 64


def test_resumed_wandb_run_skips_steps_it_already_holds(tmp_path):
    """W&B rejects non-monotonic steps; the steps replayed after a resume go to the jsonl only."""

    class FakeRun:
        logged: list = []

        def log(self, data, step):
            self.logged.append(step)

    rd = RunDir(tmp_path / "run")
    logger = new_logger(rd, mode="disabled")
    logger._run, logger._wandb_first_step = FakeRun(), 4  # W&B held steps 0..3
    log_steps(logger, range(2, 6))
    assert FakeRun.logged == [4, 5]
    assert [l[keys.STEP] for l in read_jsonl(rd.metrics)] == [2, 3, 4, 5]


def test_bad_mode_is_rejected_with_the_field_name():
    with pytest.raises(ValueError, match=r"wandb\.mode.*'offlne'"):
        check_wandb_config(WandbConfig(mode="offlne"))


def test_hydra_structured_config_compatible():
    from omegaconf import OmegaConf

    cfg = OmegaConf.structured(WandbConfig)
    cfg.merge_with_dotlist(["mode=online", "tags=[a,b]", "entity=me"])
    assert OmegaConf.to_object(cfg) == WandbConfig(mode="online", tags=["a", "b"], entity="me")


ONLINE_SCRIPT = textwrap.dedent("""
    import json, logging, sys, time
    import torch
    from andrea.run import logkeys as keys
    from andrea.run.metrics import MetricsLogger, WandbConfig
    from andrea.run.rundir import RunDir
    logging.basicConfig(level=logging.WARNING)
    rd = RunDir(sys.argv[1])
    t = time.monotonic()
    logger = MetricsLogger(rd, WandbConfig(mode="online", init_timeout_s=3), run_id="x-1",
                           name="n", group="g", tags=[], config={"a": 1})
    for s in range(3):
        logger.log(s, {keys.TRAIN_LOSS: 1.0, keys.TOKENS: s})
    logger.log_dynamics(2, {"layer_rms": torch.ones(2), "depth_weights": []})
    logger.finish({"status": "completed"})
    print(json.dumps({"wandb_run": logger.wandb_run is not None, "s": time.monotonic() - t}))
""")


@pytest.mark.parametrize("api_key", ["dummy", "0123456789" * 4])
def test_unreachable_online_mode_falls_back_to_files(tmp_path, api_key):
    """No W&B server (refused connection), with a malformed and a well-formed fake key."""
    rd = RunDir(tmp_path / "run")
    env = {**os.environ, "WANDB_API_KEY": api_key, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", ONLINE_SCRIPT, str(rd.root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # init_timeout_s=3 is honoured: the failure this guards against is wandb's own 90 s init
    # timeout (and its retries); 45 s leaves a busy machine's slow wandb-core start-up room.
    assert out == {"wandb_run": False, "s": out["s"]} and out["s"] < 45
    assert proc.stderr.count("W&B disabled for this run") == 1
    assert len(read_jsonl(rd.metrics)) == 3
    assert rd.dynamics.exists()
