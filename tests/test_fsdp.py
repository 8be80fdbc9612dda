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
from conftest import TINY_RUN, compose_run, free_port

from andrea.config.resolve import resolve_run

TOL = 1e-5
# (residual, ModelConfig options): the variants whose parameters FSDP must place
VARIANTS = [
    ("baseline", {}),
    ("attnres_full", {}),
    ("attnres_block", {"block_size": 2}),
    ("mhc", {"mhc_streams": 4}),
]


# ---- config (what it refuses: tests/test_bad_input.py) ------------------------------------------
def _resolve(*extra: str, world_size: int = 1):
    return resolve_run(compose_run([*TINY_RUN, *extra]), world_size=world_size)


def test_fsdp_is_accepted_where_the_world_size_divides_the_model():
    spec = _resolve("train.parallel=fsdp", "train.micro_batch_size=4", world_size=2)
    assert spec.train.parallel == "fsdp"
    from andrea.config.schema import TrainConfig

    assert TrainConfig().parallel == "ddp"  # DDP stays the default


# ---- 2 gloo ranks: the sharding itself, then the training loop ------------------------------
# One spawned pair of processes does both (starting one costs seconds on a loaded machine).
RUN = [
    "model=attnres_block",
    "model.block_size=2",
    "train.tokens=6144",
    "train.evals=1",
    "train.budgets=[0.5,1]",  # a cooldown branch: the trunk snapshot and its reload, sharded
]


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


def _shard_variants(rank: int) -> dict:
    """Each variant: a single-process reference on the whole batch and the sharded model on this
    rank's half, 4 AdamW steps with clipping; then the sharded state after step 2 loaded into a
    fresh sharded model, which trains steps 3-4 to the same weights bit for bit."""
    import torch.distributed as dist

    from andrea.components import fsdp
    from andrea.model.transformer import ANDREA, ModelConfig

    report = {}
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
            loss_diff = max(loss_diff, abs(float(loss / 2 - want)), abs(float(norm - want_norm)))
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
    return report


def _stop_after(spec, steps: int):
    from dataclasses import replace

    return replace(spec, train=replace(spec.train, stop_after_steps=steps))


def _worker(rank: int, port: int, path: str, cache: str, out: str) -> None:
    """The variants, then a run trained with FSDP that stops after 6 of its 12 steps (a
    checkpoint) and is started again: it resumes."""
    import torch.distributed as dist

    from andrea.run.rundir import RunDir
    from andrea.train import Interrupted, train

    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port), ANDREA_DATA=cache,
    )  # fmt: skip
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)  # train() joins it
    report = _shard_variants(rank)
    spec = _resolve(*RUN, "train.micro_batch_size=4", "train.parallel=fsdp", world_size=2)
    try:
        train(_stop_after(spec, 6), RunDir(Path(path)), {})
        raise AssertionError("train.stop_after_steps did not stop the run")
    except Interrupted:
        pass
    os.environ["MASTER_PORT"] = str(port + 1)  # train() left the group: a fresh one
    train(spec, RunDir(Path(path)), {})
    if rank == 0:
        Path(out).write_text(json.dumps(report))


@pytest.mark.slow
def test_fsdp_on_two_ranks_trains_as_one_process_resumes_exactly_and_refuses_another_world_size(
    tmp_path, data_cache, one_thread
):
    import torch.multiprocessing as mp

    from andrea.components.checkpoint import load_latest_checkpoint
    from andrea.run import logkeys as keys
    from andrea.run.rundir import RunDir
    from andrea.train import TrainingFailed, train

    one, two, out = tmp_path / "one", tmp_path / "two", tmp_path / "variants.json"
    port = free_port(span=2)  # the second group takes port + 1
    mp.spawn(_worker, args=(port, str(two), str(data_cache), str(out)), nprocs=2, join=True)

    # the sharding, variant by variant
    report = json.loads(out.read_text())
    assert set(report) == {r for r, _ in VARIANTS}
    for residual, r in report.items():
        assert r["loss"] < TOL and r["weights"] < TOL, (residual, r)
        assert r["resume_exact"], residual

    # the training loop: stopped, resumed, and equal to one process with the whole batch
    train(_resolve(*RUN), RunDir(one), {})
    results = json.loads((two / "results.json").read_text())
    assert results["status"] == "completed" and results["world_size"] == 2

    def losses(path: Path) -> list[float]:
        lines = [json.loads(l) for l in (path / "metrics.jsonl").read_text().splitlines()]
        return [l[keys.TRAIN_LOSS] for l in lines if keys.TRAIN_LOSS in l]

    assert len(losses(two)) == 3
    assert losses(two) == pytest.approx(losses(one), abs=TOL)
    single = json.loads((one / "results.json").read_text())
    assert results["val_loss"] == pytest.approx(single["val_loss"], abs=TOL)
    assert [p["budget"] for p in results["points"]] == [0.5, 1.0]  # a branch's and the trunk's
    point_loss = lambda r: [p["val_loss"] for p in r["points"]]  # noqa: E731
    assert point_loss(results) == pytest.approx(point_loss(single), abs=TOL)
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
    with pytest.raises(TrainingFailed, match="fsdp with world_size=2; this run is fsdp with "):
        train(_resolve(*RUN, "train.parallel=fsdp"), RunDir(other), {})
