"""launch.pack (andrea/launch/packing.py, andrea/launch/calls.py): what may be packed, the
memory model's limit, the measured packing factor in the plan, and a packed job whose member
fails or dies losing none of the others."""

from __future__ import annotations

import io
import json
import os
from types import SimpleNamespace

import pytest
from conftest import compose_run

from andrea.config.resolve import ConfigError, resolve_run
from andrea.launch import scheduler
from andrea.launch.packing import (
    GIB,
    fsdp_note,
    packing_factor,
    read_packing,
    resolve_pack,
    run_memory_bytes,
)


def _spec(*overrides):
    return resolve_run(compose_run(["size=tiny-1", *overrides]))


def test_a_pack_that_cannot_run_is_refused_before_anything_is_submitted():
    spec, local = _spec(), scheduler.get("local")
    assert resolve_pack("1", spec, None, "H100", 1) == 1  # unpacked: any launcher
    assert resolve_pack("4", spec, local, "H100", 1) == 4
    with pytest.raises(ConfigError, match="launch.pack=2: the in-process launcher"):
        resolve_pack("2", spec, None, "H100", 1)
    cannot = SimpleNamespace(name="solo", can_pack=False)
    with pytest.raises(ConfigError, match="engine solo runs one run per job"):
        resolve_pack("2", spec, cannot, "H100", 1)
    with pytest.raises(ConfigError, match="DDP"):
        resolve_pack("2", spec, scheduler.get("slurm"), "H100", 2)
    with pytest.raises(ConfigError, match="integer >= 1 or auto"):
        resolve_pack("two", spec, local, "H100", 1)


def test_the_memory_model_bounds_the_pack_and_sizes_auto():
    big = _spec("size=andrea-480m")
    need = run_memory_bytes(big) / 2**30
    assert 16 * big.params / 2**30 < need < 80  # states alone, below one H100
    fit = int(80 // need)
    assert resolve_pack("auto", big, scheduler.get("ray"), "H100", 1) == min(fit, 16)
    with pytest.raises(ConfigError, match=f"launch.pack={fit + 1}: .* at most {fit} fit"):
        resolve_pack(str(fit + 1), big, scheduler.get("ray"), "H100", 1)
    with pytest.raises(ConfigError, match="more than plan_gpu=T4"):
        resolve_pack(
            "auto",
            _spec("size=andrea-480m", "train.micro_batch_size=64"),
            scheduler.get("slurm"),
            "T4",
            1,
        )


def _rung(params: float, d_model: int = 4096) -> SimpleNamespace:
    """A spec as the memory model reads it: a 7B-like shape, one sequence of 2048 per GPU."""
    model = SimpleNamespace(d_model=d_model, n_head=32, n_layer=32, vocab_size=32768)
    return SimpleNamespace(
        model=model, params=params, micro_batch_size=1, seq_len=2048, label="baseline", size="7b"
    )


def test_the_plan_says_which_rungs_need_fsdp_and_on_how_many_gpus():
    small, big = _rung(1e9), _rung(7e9)
    assert fsdp_note(small, "H100") is None  # ~45 GiB fits 80 under DDP
    # 16 bytes x 7e9 = 104 GiB of states, 28.5 GiB of activations: 134 GiB under DDP; FSDP on
    # 2 GPUs leaves 83 GiB (activations are not sharded), on 4 GPUs 58 GiB
    note = fsdp_note(big, "H100")
    assert note == (
        "note: baseline at 7b needs ~134 GiB per GPU under DDP, more than H100's 80 GiB: "
        "train.parallel=fsdp on 4 GPUs needs ~58 GiB each"
    )
    assert run_memory_bytes(big, 2) / GIB > 80 >= run_memory_bytes(big, 4) / GIB
    assert fsdp_note(big, "H200") is None and fsdp_note(big, "no-such-gpu") is None
    assert "does not fit either" in fsdp_note(big, "T4")  # activations alone exceed 16 GiB
    # the sharding rule: only world sizes that divide d_model
    assert "does not fit either" in fsdp_note(_rung(7e9, d_model=4097), "H100")


def test_the_plan_counts_gpu_hours_with_the_measured_packing_factor(tmp_path):
    from andrea.launch.plan import PlannedJob
    from andrea.launch.plan_text import print_plan
    from andrea.run.rundir import RunDir

    (tmp_path / "throughput.json").write_text(json.dumps({"packing": {"1": 100.0, "4": 250.0}}))
    packing = read_packing(tmp_path)
    assert packing_factor(packing, 4) == 2.5 and packing_factor(packing, 2) is None
    spec = _spec()

    def hours(pack, packing):
        job = PlannedJob(
            [],
            None,
            None,
            RunDir(tmp_path / "r"),
            spec,
            "new",
            1e12,
            10.0,
            pack=pack,
            engine="slurm",
        )
        out = io.StringIO()
        print_plan([job], "H100", 0.35, out, packing=packing)
        return out.getvalue()

    assert "to run: 10 GPU-hours" in hours(1, packing)
    text = hours(4, packing)
    assert "to run: 4 GPU-hours" in text and "measured packing factor 4: 2.50x" in text
    assert "to run: 10 GPU-hours" in hours(4, None)  # not measured: as unpacked


def test_a_packed_job_returns_each_members_outcome_a_dead_one_included(tmp_path):
    from hydra.core.utils import JobStatus

    from andrea.launch.calls import Packed

    def member(x):
        if x == 2:
            os._exit(3)  # killed mid-run: no result
        return x * 10

    got = Packed(member, tmp_path)([(1,), (2,), (3,)])
    assert got[0] == 10 and got[2] == 30
    assert got[1].status == JobStatus.FAILED and "exited with code 3" in str(got[1]._return_value)


def test_a_bad_pack_is_an_error_before_anything_is_submitted(tmp_path, data_cache):
    from test_sweep import sweep

    out = sweep(tmp_path, "model=baseline", "size=tiny-1", "launch.pack=2")
    assert out.returncode == 2
    assert (
        out.stderr.startswith("error: ") and "launch.pack=2: the in-process launcher" in out.stderr
    )
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("results.json"))
