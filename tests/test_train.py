"""One run end to end on CPU: run directory contents, exact resume, failures, signals, DDP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, TINY_RUN, free_port

from andrea.components.checkpoint import load_latest_checkpoint
from andrea.run import logkeys as keys
from andrea.run.rundir import RunDir
from andrea.testing.runs import final_weights, spec_for, train_tiny
from andrea.train import Interrupted, TrainingFailed, learning_rate, train

run = train_tiny  # the tiny run (andrea.testing.runs) with extra overrides, into a run dir


# --------------------------------------------------------------------------------------------
def test_learning_rate_schedule_shapes():
    spec = spec_for("train.tokens=51200", "train.warmup_frac=0.1")  # 100 steps
    lrs = [learning_rate(s, spec) for s in range(spec.steps)]
    assert spec.steps == 100
    assert lrs[0] == pytest.approx(spec.lr / 10) and lrs[9] == pytest.approx(spec.lr)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # cosine never goes back up
    assert lrs[-1] == pytest.approx(spec.lr * 0.1, rel=0.05)
    wsd = spec_for("train.tokens=51200", "train.schedule=wsd", "train.decay_frac=0.2")
    lrs = [learning_rate(s, wsd) for s in range(wsd.steps)]
    assert lrs[50] == lrs[79] == pytest.approx(wsd.lr)  # stable phase
    assert lrs[-1] == pytest.approx(wsd.lr * 0.1)


def test_single_run_leaves_a_complete_consistent_run_directory(tmp_path, data_cache):
    results = run(tmp_path / "r", "model=attnres_block", "model.block_size=2", "wandb.mode=offline")
    rd = RunDir(tmp_path / "r")
    on_disk = json.loads(rd.results.read_text())
    assert on_disk == json.loads(json.dumps(results))
    for key in (
        "status",
        "variant",
        "block_size",
        "size",
        "params",
        "params_nonembedding",
        "tokens",
        "flops",
        "val_loss",
        "wall_s",
        "tokens_per_s",
    ):
        assert key in on_disk, key
    assert on_disk["status"] == "completed" and on_disk["variant"] == "attnres_block"
    assert on_disk["block_size"] == 2 and on_disk["size"] == "tiny-1"
    assert on_disk["tokens"] == 12288 and on_disk["flops"] > on_disk["flops_6nd"] > 0

    lines = [json.loads(l) for l in rd.metrics.read_text().splitlines()]
    train_lines = [l for l in lines if keys.TRAIN_LOSS in l]
    val_lines = [l for l in lines if keys.VAL_LOSS in l]
    assert [l["step"] for l in train_lines] == [4, 8, 12, 16, 20, 24]
    assert val_lines[-1][keys.VAL_LOSS] == pytest.approx(on_disk["val_loss"])
    assert (
        val_lines[-1]["tokens"] == on_disk["tokens"] and val_lines[-1]["flops"] == on_disk["flops"]
    )
    assert train_lines[-1][keys.TRAIN_LOSS] < train_lines[0][keys.TRAIN_LOSS]

    dyn = json.loads(rd.dynamics.read_text())
    assert len(dyn["layer_rms"]) == 4 and len(dyn["depth_weights"]) == 5
    assert all(abs(sum(w) - 1) < 1e-4 for w in dyn["depth_weights"])

    offline = list(rd.wandb_dir.glob("offline-run-*"))
    assert len(offline) == 1
    wandb_file = next(offline[0].glob("run-*.wandb"))
    assert wandb_file.stat().st_size > 0
    assert json.loads(rd.code_version.read_text()).keys() >= {"git_sha", "dirty"}
    assert len(rd.list_checkpoints()) <= 2  # keep_checkpoints


def test_resume_is_exact(tmp_path, data_cache, monkeypatch):
    """A run interrupted and resumed ends bit-identical to an uninterrupted one (same machine,
    same thread count): stopped after step 10, then by SIGTERM in the middle of the periodic
    evaluation (step 12) and of the final one. A SIGTERM mid-evaluation was acted on only once
    the evaluation ended (minutes on a CPU, past Slurm's 30 s before SIGKILL): now the
    evaluation stops at the next batch, the step is checkpointed at once, and the resumed run
    scores that evaluation again."""
    import time

    from andrea.data.loader import ValidationSet

    args = ["model=attnres_full", "train.eval_batch_size=1"]  # 16 forwards per evaluation
    full = run(tmp_path / "full", *args)
    with pytest.raises(Interrupted):
        run(tmp_path / "split", *args, "train.stop_after_steps=10")
    rd = RunDir(tmp_path / "split")
    assert not rd.results.exists() and rd.list_checkpoints()

    real = ValidationSet.batches
    pulled = {"n": 0, "at": 0, "after": None, "sent": 0.0}

    def batches(self, *a, **k):  # SIGTERM as the `at`-th validation batch is handed out
        for batch in real(self, *a, **k):
            pulled["n"] += 1
            if pulled["after"] is not None:
                pulled["after"] += 1
            if pulled["n"] == pulled["at"]:
                pulled["after"], pulled["sent"] = 0, time.monotonic()
                os.kill(os.getpid(), signal.SIGTERM)
            yield batch

    monkeypatch.setattr(ValidationSet, "batches", batches)
    # the periodic evaluation at step 12 (its 3rd batch); then the final one, after the redone
    # evaluation's 16 batches and the layer dynamics' 1
    for at, step in ((3, 12), (16 + 1 + 3, 24)):
        pulled.update(n=0, at=at, after=None)
        with pytest.raises(Interrupted) as stopped:
            run(tmp_path / "split", *args)
        took = time.monotonic() - pulled["sent"]
        assert stopped.value.code == 128 + signal.SIGTERM
        assert pulled["after"] == 0, f"{pulled['after']} validation batches after the signal"
        assert took < 10, f"{took:.1f} s from the signal to the exit"  # ~0.1 s (loaded 2 cores)
        state, newest = load_latest_checkpoint(rd)  # complete: it loads, and it is this step's
        assert state["step"] == step and newest == rd.list_checkpoints()[0]
        assert {"model", "optimizer", "loader", "rng"} <= state.keys()
        assert not rd.results.exists()
    monkeypatch.undo()

    resumed = run(tmp_path / "split", *args)
    assert resumed["val_loss"] == full["val_loss"] and resumed["val_bpb"] == full["val_bpb"]

    def untimed(points):
        return [{k: v for k, v in p.items() if not k.endswith("_s")} for p in points]

    assert untimed(resumed["points"]) == untimed(full["points"])
    a, b = final_weights(tmp_path / "full"), final_weights(tmp_path / "split")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # metrics.jsonl holds one line per logged step, without duplicates from the first attempt
    steps = [
        json.loads(l)["step"] for l in rd.metrics.read_text().splitlines() if keys.TRAIN_LOSS in l
    ]
    assert steps == sorted(set(steps))

    # the logging window (8, 12] straddles the stop at step 10: its mean is the same as without
    # the stop (it was the mean of the steps after the resume only); the validation losses are
    # logged once each, at their steps, as without the stops
    def losses(p, key=keys.TRAIN_LOSS):
        return {r["step"]: r[key] for r in map(json.loads, p.read_text().splitlines()) if key in r}

    assert losses(rd.metrics) == losses(RunDir(tmp_path / "full").metrics)
    val_steps = [
        json.loads(l)["step"] for l in rd.metrics.read_text().splitlines() if keys.VAL_LOSS in l
    ]
    assert val_steps == [12, 24]
    assert losses(rd.metrics, keys.VAL_LOSS) == losses(
        RunDir(tmp_path / "full").metrics, keys.VAL_LOSS
    )


def test_finishing_from_the_final_checkpoint_logs_the_final_eval_once(tmp_path, data_cache):
    """A crash between the final checkpoint and results.json: the restart writes the same
    results without evaluating (and logging) the final validation loss a second time."""
    path = tmp_path / "r"
    first = run(path)
    rd = RunDir(path)
    metrics_before = rd.metrics.read_text()
    rd.results.unlink()
    again = run(path)
    assert again["val_loss"] == first["val_loss"] and again["status"] == "completed"
    assert rd.metrics.read_text() == metrics_before
    val_steps = [json.loads(l)["step"] for l in metrics_before.splitlines() if keys.VAL_LOSS in l]
    assert val_steps == sorted(set(val_steps)) and val_steps[-1] == again["steps"]


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, data_cache, caplog):
    full = run(tmp_path / "full")
    path = tmp_path / "r"
    with pytest.raises(Interrupted):
        run(path, "train.stop_after_steps=12", "train.keep_checkpoints=5")  # ckpts at 12
    with pytest.raises(Interrupted):
        run(path, "train.stop_after_steps=4", "train.keep_checkpoints=5")  # ckpt at 16
    newest = RunDir(path).list_checkpoints()[0]
    assert newest.name == "step_00000016.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])  # torn write
    caplog.set_level("WARNING")
    resumed = run(path)
    assert "unreadable" in caplog.text and "step_00000016" in caplog.text
    assert resumed["val_loss"] == full["val_loss"]


def test_non_finite_loss_ends_as_a_failed_result(tmp_path, data_cache, monkeypatch):
    import andrea.components.evaluate as evaluate_mod  # lm_loss, the loss of every training step

    real = evaluate_mod.F.cross_entropy
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        out = real(*args, **kwargs)
        return out * float("nan") if calls["n"] > 6 else out

    monkeypatch.setattr(evaluate_mod.F, "cross_entropy", poisoned)
    with pytest.raises(TrainingFailed, match="non-finite"):
        run(tmp_path / "r")
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["status"] == "failed" and "non-finite" in results["error"]


def test_depth_backend_auto_without_cuda_trains_eager_and_says_so(tmp_path, data_cache):
    results = run(
        tmp_path / "r",
        "model=attnres_full",
        "model.depth_backend=auto",
        "train.tokens=2048",
        "train.evals=1",
        "train.checkpoints=1",
        "train.device=cpu",
    )
    assert results["depth_backend"]["asked"] == "auto"
    assert results["depth_backend"]["used"] == "eager"
    assert "no CUDA device" in results["depth_backend"]["note"]
    on_disk = json.loads((tmp_path / "r" / "results.json").read_text())
    assert on_disk["depth_backend"] == results["depth_backend"]


def test_bad_data_fails_with_a_failed_result(tmp_path, data_cache):
    # A validation split too small for one batch is caught before the first step.
    with pytest.raises(ValueError, match="validation split"):
        run(tmp_path / "r", "data.val_fraction=0.0001")
    assert json.loads((tmp_path / "r" / "results.json").read_text())["status"] == "failed"


@pytest.mark.slow
def test_sigusr2_checkpoints_and_the_next_start_resumes(tmp_path, data_cache):
    """The Slurm pre-timeout signal: finish the step, checkpoint, exit; a restart completes."""
    out = tmp_path / "runs"
    # 200 steps: the signal comes at the first progress line (step 4, the first logged one), so
    # the first start is stopped ~196 steps before its end; the restart trains the rest (with
    # 1,000 steps it spent 30 of the test's 33 CPU-s on them)
    cmd = [
        sys.executable,
        str(REPO / "sweep.py"),
        *TINY_RUN,
        "train.tokens=102400",
        "train.progress=true",
        f"out_dir={out}",
        "hydra/job_logging=disabled",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:  # the first progress line means training is under way (no deadline:
        if "step " in line:  # a busy machine may take minutes to start; the run ends anyway)
            break
    proc.send_signal(signal.SIGUSR2)
    proc.stderr.read()
    assert proc.wait(timeout=600) == 128 + signal.SIGUSR2  # a hang guard: one step + checkpoint
    rd = RunDir(next(out.glob("default/tiny-1/baseline/seed0*")))
    assert rd.list_checkpoints() and not rd.results.exists()
    step = int(rd.list_checkpoints()[0].stem.split("_")[1])
    assert 0 < step < 200  # before the run's last step
    done = subprocess.run(
        cmd[:-1] + ["train.progress=false"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(rd.results.read_text())["status"] == "completed"


def _ddp_worker(rank: int, world_size: int, port: int, path: str, cache: str, out: str) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        ANDREA_DATA=cache,
    )
    torch.set_num_threads(1)
    spec = spec_for("train.micro_batch_size=4", world_size=world_size)
    results = train(spec, RunDir(Path(path)), {})
    if rank == 0:
        Path(out).write_text(json.dumps(results))


@pytest.mark.slow
def test_ddp_with_two_processes_matches_one_process(tmp_path, data_cache):
    """2 gloo processes x micro-batch 4 == 1 process x micro-batch 8 (same global batch)."""
    import torch.multiprocessing as mp

    torch.set_num_threads(1)
    single = run(tmp_path / "one", "train.micro_batch_size=8")
    port = free_port()
    out = tmp_path / "ddp.json"
    mp.spawn(
        _ddp_worker,
        args=(2, port, str(tmp_path / "two"), str(data_cache), str(out)),
        nprocs=2,
        join=True,
    )
    ddp = json.loads(out.read_text())
    assert ddp["world_size"] == 2
    assert ddp["val_loss"] == pytest.approx(single["val_loss"], rel=1e-5)
    one = [json.loads(l) for l in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()]
    two = [json.loads(l) for l in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    loss = lambda lines: [l[keys.TRAIN_LOSS] for l in lines if keys.TRAIN_LOSS in l]  # noqa: E731
    assert loss(two) == pytest.approx(loss(one), rel=1e-5)


def test_a_run_being_trained_elsewhere_is_not_started_twice(tmp_path, data_cache):
    from andrea.run.rundir import RunLocked

    rd = RunDir(tmp_path / "r")
    with rd.exclusive():
        assert rd.is_locked()
        with pytest.raises(RunLocked, match="another process"):
            run(tmp_path / "r")
    assert not rd.is_locked()
    assert not rd.results.exists()  # the refused start wrote no failed result
