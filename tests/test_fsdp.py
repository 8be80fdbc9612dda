"""train.parallel=fsdp (andrea/components/fsdp.py): 2 gloo processes train as one process does
(loss and weights to 1e-5) for the baseline, Full and Block AttnRes and mHC; a checkpoint
resumes exactly under the same world size and is refused under another; the config refuses what
FSDP cannot run before anything starts."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, compose_run

from andrea.config.resolve import ConfigError, resolve_run

TOL = 1e-5
# (residual, ModelConfig options): the variants whose parameters FSDP must place
VARIANTS = [
    ("baseline", {}),
    ("attnres_full", {}),
    ("attnres_block", {"block_size": 2}),
    ("mhc", {"mhc_streams": 4}),
]


# ---- config: one error before anything runs -------------------------------------------------
def _resolve(*extra: str, world_size: int = 1):
    return resolve_run(compose_run([*TINY_RUN, *extra]), world_size=world_size)


@pytest.mark.parametrize(
    "extra, world_size, says",
    [
        # tiny-1: d_model 32; three processes cannot split its rows evenly
        (["train.parallel=fsdp"], 3, "d_model=32 is not a multiple of 3"),
        (["train.parallel=fsdp", "train.optimizer=muon"], 1, "train.optimizer=adamw only"),
        (["train.parallel=zero3"], 1, "train.parallel='zero3'; valid: ddp, fsdp"),
    ],
)
def test_fsdp_settings_that_cannot_run_are_refused_by_the_config(extra, world_size, says):
    with pytest.raises(ConfigError, match="train.parallel") as e:
        _resolve(*extra, world_size=world_size)
    assert says in str(e.value)


def test_fsdp_is_accepted_where_the_world_size_divides_the_model():
    spec = _resolve("train.parallel=fsdp", "train.micro_batch_size=4", world_size=2)
    assert spec.train.parallel == "fsdp"
    assert _resolve().train.parallel == "ddp"  # DDP stays the default


# ---- 2 gloo ranks, the sharding itself ------------------------------------------------------
def _step(model, opt, x, y, fsdp):
    import torch.nn.functional as F

    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    norm = fsdp.plain(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5))
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach(), norm


def _adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)


def _shard_worker(rank: int, port: int, out: str) -> None:
    """Each variant: a single-process reference on the whole batch and the sharded model on this
    rank's half, 4 AdamW steps with clipping; then the sharded state after step 2 loaded into a
    fresh sharded model, which trains steps 3-4 to the same weights bit for bit."""
    import torch.distributed as dist

    from andrea.components import fsdp
    from andrea.model.transformer import ANDREA, ModelConfig

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    report = {}
    try:
        for residual, options in VARIANTS:
            cfg = ModelConfig(
                n_layer=2, n_head=2, d_model=32, vocab_size=61, context_length=16,
                residual=residual, **options,
            )  # fmt: skip
            g = torch.Generator().manual_seed(1)
            batches = [torch.randint(0, 61, (4, 17), generator=g) for _ in range(4)]
            torch.manual_seed(0)
            ref = ANDREA(cfg)
            ref_opt = _adamw(ref)
            torch.manual_seed(0)
            model = ANDREA(cfg)
            fsdp.shard_model(model)
            opt = _adamw(model)
            mine = slice(2 * rank, 2 * rank + 2)
            loss_diff, saved = 0.0, None
            for i, b in enumerate(batches):
                x, y = b[:, :-1], b[:, 1:]
                want, want_norm = _step(ref, ref_opt, x, y, fsdp)
                loss, norm = _step(model, opt, x[mine], y[mine], fsdp)
                dist.all_reduce(loss)  # the mean of two equal halves: the whole batch's loss
                loss_diff = max(
                    loss_diff, abs(float(loss / 2 - want)), abs(float(norm - want_norm))
                )
                if i == 1:
                    saved = fsdp.state(model, opt)
            weights, _ = fsdp.state(model, opt)
            want = ref.state_dict()
            assert set(weights) == set(want)  # the checkpoint's keys: the plain model's
            weight_diff = max(float((weights[k] - want[k]).abs().max()) for k in want)

            torch.manual_seed(7)  # other initial weights: all must come from the state
            again = ANDREA(cfg)
            fsdp.shard_model(again)
            again_opt = _adamw(again)
            fsdp.load(again, again_opt, *saved)
            for b in batches[2:]:
                _step(again, again_opt, b[:, :-1][mine], b[:, 1:][mine], fsdp)
            resumed, _ = fsdp.state(again, again_opt)
            exact = all(torch.equal(resumed[k], weights[k]) for k in weights)
            report[residual] = {"loss": loss_diff, "weights": weight_diff, "resume_exact": exact}
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(report))


def test_fsdp_on_two_ranks_trains_as_one_process_and_resumes_exactly(tmp_path, one_thread):
    """One spawned pair of gloo processes checks all four variants in turn."""
    import torch.multiprocessing as mp

    out = tmp_path / "fsdp.json"
    mp.spawn(_shard_worker, args=(29700 + os.getpid() % 1000, str(out)), nprocs=2, join=True)
    report = json.loads(out.read_text())
    assert set(report) == {r for r, _ in VARIANTS}
    for residual, r in report.items():
        assert r["loss"] < TOL and r["weights"] < TOL, (residual, r)
        assert r["resume_exact"], residual


# ---- 2 gloo ranks through the training loop -------------------------------------------------
def _train_worker(rank: int, port: int, path: str, cache: str) -> None:
    """Train with FSDP, stop after 12 of 24 steps (checkpoint), start again: it resumes."""
    from andrea.run.rundir import RunDir
    from andrea.train import Interrupted, train

    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port), ANDREA_DATA=cache,
    )  # fmt: skip
    torch.set_num_threads(1)
    extra = ["model=attnres_block", "model.block_size=2", "train.micro_batch_size=4"]
    spec = _resolve(*extra, "train.parallel=fsdp", world_size=2)
    try:
        train(replace_stop(spec, 12), RunDir(Path(path)), {})
        raise AssertionError("train.stop_after_steps did not stop the run")
    except Interrupted:
        pass
    os.environ["MASTER_PORT"] = str(port + 1)  # a fresh process group
    train(spec, RunDir(Path(path)), {})


def replace_stop(spec, steps: int):
    from dataclasses import replace

    return replace(spec, train=replace(spec.train, stop_after_steps=steps))


@pytest.mark.slow
def test_a_run_under_fsdp_resumes_and_matches_one_process_and_refuses_another_world_size(
    tmp_path, data_cache, one_thread
):
    import torch.multiprocessing as mp

    from andrea.components.checkpoint import load_latest_checkpoint
    from andrea.run import logkeys as keys
    from andrea.run.rundir import RunDir
    from andrea.train import TrainingFailed, train

    one = tmp_path / "one"
    train(_resolve("model=attnres_block", "model.block_size=2"), RunDir(one), {})
    two = tmp_path / "two"
    mp.spawn(
        _train_worker,
        args=(29700 + os.getpid() % 1000, str(two), str(data_cache)),
        nprocs=2,
        join=True,
    )
    results = json.loads((two / "results.json").read_text())
    assert results["status"] == "completed" and results["world_size"] == 2

    def losses(path: Path) -> list[float]:
        lines = [json.loads(l) for l in (path / "metrics.jsonl").read_text().splitlines()]
        return [l[keys.TRAIN_LOSS] for l in lines if keys.TRAIN_LOSS in l]

    assert len(losses(two)) == 6
    assert losses(two) == pytest.approx(losses(one), abs=TOL)
    assert results["val_loss"] == pytest.approx(
        json.loads((one / "results.json").read_text())["val_loss"], abs=TOL
    )
    want = load_latest_checkpoint(RunDir(one))[0]["model"]
    state = load_latest_checkpoint(RunDir(two))[0]
    assert state["parallel"] == {"kind": "fsdp", "world_size": 2}
    assert set(state["model"]) == set(want)  # the same checkpoint format as one process's
    for k, v in want.items():
        assert torch.allclose(state["model"][k], v, atol=TOL, rtol=0), k

    # The same checkpoint resumed by one process: one clear error naming both world sizes.
    other = tmp_path / "other"
    shutil.copytree(two, other)
    for name in ("results.json", "points.json"):
        (other / name).unlink(missing_ok=True)
    spec = _resolve("model=attnres_block", "model.block_size=2", "train.parallel=fsdp")
    with pytest.raises(
        TrainingFailed, match="fsdp with world_size=2; this run is fsdp with world_size=1"
    ):
        train(spec, RunDir(other), {})
