"""Checkpoint integrity: a flipped bit or a torn file is never trusted (bench/faults.py found that
torch.load alone accepts a bit flip in a tensor's bytes and returns different weights)."""

from __future__ import annotations

import io
import logging

import pytest
import torch

from andrea.components.checkpoint import (
    CorruptCheckpoint,
    decode_checkpoint,
    encode_checkpoint,
    load_latest_checkpoint,
    save_checkpoint,
)
from andrea.run.rundir import RunDir


def state(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {"step": step, "model": {"w": torch.randn(64, 64, generator=g)}}


def test_round_trip_is_exact():
    s = state(3)
    back = decode_checkpoint(encode_checkpoint(s))
    assert back["step"] == 3 and torch.equal(back["model"]["w"], s["model"]["w"])


def test_torch_alone_accepts_a_flipped_bit_the_digest_does_not():
    s = state(1)
    raw = io.BytesIO()
    torch.save(s, raw)
    data = bytearray(raw.getvalue())
    # a bit in the middle of the tensor's bytes: torch.load gives different weights, no error
    idx = bytes(data).find(s["model"]["w"].numpy().tobytes()[:16]) + 2000
    data[idx] ^= 0x10
    loaded = torch.load(io.BytesIO(bytes(data)), weights_only=True)
    assert not torch.equal(loaded["model"]["w"], s["model"]["w"])  # the silent failure
    framed = bytearray(encode_checkpoint(s))
    framed[len(framed) - len(raw.getvalue()) + idx] ^= 0x10
    with pytest.raises(CorruptCheckpoint):
        decode_checkpoint(bytes(framed))


@pytest.mark.parametrize("damage", ["bitflip", "truncate", "header"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(tmp_path, damage, caplog):
    rd = RunDir(tmp_path / "run")
    for step in (4, 8):
        save_checkpoint(rd, step, state(step), keep=5)
    newest = rd.list_checkpoints()[0]
    data = bytearray(newest.read_bytes())
    if damage == "bitflip":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        data = data[: len(data) // 3]
    else:
        data[5] ^= 0x01
    newest.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    loaded, path = load_latest_checkpoint(rd)
    assert loaded["step"] == 4 and path.name == "step_00000004.pt"
    assert "step_00000008.pt is unreadable" in caplog.text


def test_a_checkpoint_without_the_header_still_loads(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.checkpoints.mkdir(parents=True)
    torch.save(state(2), rd.checkpoint_path(2))  # the format before the digest
    loaded, _ = load_latest_checkpoint(rd)
    assert loaded["step"] == 2
