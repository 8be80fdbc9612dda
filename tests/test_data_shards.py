import numpy as np
import pytest

from andrea.data.shards import HEADER_BYTES, MAGIC, max_token, read_header, read_shard, write_shard


def test_round_trip(tmp_path):
    tokens = np.array([0, 1, 255, 256, 8448, 65535], dtype=np.int64)
    path = tmp_path / "s.bin"
    write_shard(path, tokens)
    got = read_shard(path)
    assert isinstance(got, np.memmap) and got.dtype == np.uint16
    np.testing.assert_array_equal(got, tokens)
    assert read_header(path) == 6
    assert path.stat().st_size == HEADER_BYTES + 2 * 6
    assert max_token(path) == 65535
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temp file


def test_reads_a_hand_written_fineweb_shard(tmp_path):
    # exactly what llm.c's dev/data/data_common.py write_datafile does
    toks = np.random.default_rng(0).integers(0, 50257, size=1000).astype(np.uint16)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(toks)
    path = tmp_path / "fineweb_train_000001.bin"
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.tobytes())
    np.testing.assert_array_equal(read_shard(path), toks)
    ours = tmp_path / "ours.bin"
    write_shard(ours, toks)
    assert ours.read_bytes() == path.read_bytes()


def test_empty_shard(tmp_path):
    write_shard(tmp_path / "e.bin", np.zeros(0, dtype=np.uint16))
    assert read_shard(tmp_path / "e.bin").size == 0
    assert max_token(tmp_path / "e.bin") == -1


def test_bad_magic(tmp_path):
    path = tmp_path / "bad.bin"
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 12345, 1, 0
    path.write_bytes(header.tobytes())
    with pytest.raises(ValueError, match=r"bad\.bin.*bad magic 12345.*20240520"):
        read_shard(path)


def test_bad_version(tmp_path):
    path = tmp_path / "v2.bin"
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = MAGIC, 2, 0
    path.write_bytes(header.tobytes())
    with pytest.raises(ValueError, match="version 2"):
        read_shard(path)


def test_truncated(tmp_path):
    path = tmp_path / "t.bin"
    write_shard(path, np.arange(100))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=r"t\.bin is truncated.*100 tokens"):
        read_shard(path)
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="shorter than the 1024-byte header"):
        read_shard(path)


def test_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.bin"):
        read_shard(tmp_path / "nope.bin")


def test_rejects_ids_beyond_uint16(tmp_path):
    with pytest.raises(ValueError, match="0..65535"):
        write_shard(tmp_path / "x.bin", np.array([1, 65536]))
    assert not (tmp_path / "x.bin").exists()


def test_nanogpt_files_are_named_by_the_bad_magic_error_and_copied_into_shards(tmp_path, capsys):
    # nanoGPT's prepare.py: flat uint16 GPT-2 ids, no header (np.memmap(..., dtype=np.uint16))
    from andrea.data.nanogpt import main

    rng = np.random.default_rng(0)
    raw = {
        n: rng.integers(0, 50257, size=k).astype(np.uint16)
        for n, k in (("train", 3000), ("val", 700))
    }
    for name, toks in raw.items():
        toks.tofile(tmp_path / f"{name}.bin")
    with pytest.raises(ValueError, match=r"nanoGPT's train\.bin.*python -m andrea\.data\.nanogpt"):
        read_header(tmp_path / "train.bin")
    out = tmp_path / "shards"
    assert main([str(tmp_path / "train.bin"), str(tmp_path / "val.bin"), "--out", str(out)]) == 0
    for name, toks in raw.items():
        np.testing.assert_array_equal(read_shard(out / f"{name}.bin"), toks)
    said = capsys.readouterr().out
    top = int(max(t.max() for t in raw.values()))
    assert f"data.paths=[{out}/*.bin]" in said and f"size.vocab_size={top + 1}" in said
    assert not list(out.glob(".*tmp*"))
    # a shard already, or an odd byte count: one error line, exit 2, nothing written
    assert main([str(out / "train.bin"), "--out", str(tmp_path / "again")]) == 2
    (tmp_path / "odd.bin").write_bytes(b"abc")
    assert main([str(tmp_path / "odd.bin"), "--out", str(tmp_path / "again")]) == 2
    assert "odd" in capsys.readouterr().err and not list((tmp_path / "again").iterdir())
