"""Token shards: the fineweb / llm.c `.bin` layout, readable without the tokenizer.

    header: 256 little-endian int32 — [0] magic 20240520, [1] version 1, [2] token count, rest 0
    body:   token count little-endian uint16 tokens

The same files Karpathy's llm.c `fineweb.py` writes, so shards made there (GPT-2 vocab 50257)
or here load either way. uint16 caps the vocabulary at 65,535 ids. nanoGPT's `prepare.py` writes
the body alone (train.bin / val.bin, no header);

    python -m andrea.data.nanogpt train.bin val.bin --out DIR

copies such files into this layout under DIR, keeping their names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from andrea.run.rundir import atomic_open, atomic_write_bytes

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
MAX_VOCAB = 65535  # largest vocabulary accepted for uint16 shards


def write_shard(path: Path, tokens: np.ndarray) -> None:
    """Write `tokens` (any integer array with values < 65536) as one shard, atomically."""
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() > np.iinfo(np.uint16).max):
        raise ValueError(
            f"shard {path}: token ids must lie in 0..65535 for uint16 shards, "
            f"got range {tokens.min()}..{tokens.max()}"
        )
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, tokens.size
    atomic_write_bytes(Path(path), header.tobytes() + tokens.astype("<u2").tobytes())


def read_header(path: Path) -> int:
    """Validate a shard's header and size; return its token count."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(f"token shard {path} does not exist") from None
    if size < HEADER_BYTES:
        raise ValueError(
            f"token shard {path} is truncated: {size} bytes, shorter than the "
            f"{HEADER_BYTES}-byte header"
        )
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    if header[0] != MAGIC:
        raise ValueError(
            f"token shard {path} has bad magic {int(header[0])} (expected {MAGIC}): "
            "not a fineweb/llm.c-layout uint16 .bin shard. A headerless uint16 token file "
            "(nanoGPT's train.bin / val.bin): `python -m andrea.data.nanogpt FILE... --out DIR` "
            "copies it into this layout"
        )
    if header[1] != VERSION:
        raise ValueError(
            f"token shard {path} has version {int(header[1])}; only version {VERSION} "
            "(uint16 tokens) is supported"
        )
    n = int(header[2])
    expected = HEADER_BYTES + 2 * n
    if size != expected:
        raise ValueError(
            f"token shard {path} is {'truncated' if size < expected else 'oversized'}: "
            f"header says {n} tokens ({expected} bytes), file has {size} bytes"
        )
    return n


def wrap_headerless(src: Path, dst: Path, chunk: int = 1 << 24) -> tuple[int, int]:
    """Copy a headerless uint16 token file (nanoGPT's train.bin) to the shard `dst`, streaming
    `chunk` tokens at a time, atomically; return (token count, largest id, -1 when empty)."""
    src, dst = Path(src), Path(dst)
    size = src.stat().st_size
    if size % 2:
        raise ValueError(f"{src}: {size} bytes, an odd count: not a file of uint16 tokens")
    if size >= HEADER_BYTES and int(np.fromfile(src, dtype="<i4", count=1)[0]) == MAGIC:
        raise ValueError(f"{src} already starts with the shard header (magic {MAGIC})")
    n, top = size // 2, -1
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, n
    with atomic_open(dst) as out:
        out.write(header.tobytes())
        if n:
            tokens = np.memmap(src, dtype="<u2", mode="r", shape=(n,))
            for start in range(0, n, chunk):
                part = np.asarray(tokens[start : start + chunk])
                top = max(top, int(part.max()))
                out.write(part.tobytes())
    return n, top


def read_shard(path: Path) -> np.memmap:
    """The shard's tokens as a read-only uint16 memmap (nothing is loaded into RAM)."""
    n = read_header(path)
    if n == 0:
        return np.zeros(0, dtype=np.uint16)  # np.memmap refuses zero-length maps
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(n,))


def max_token(path: Path, chunk: int = 1 << 26) -> int:
    """Largest token id in a shard (-1 when empty), scanned in chunks to bound memory."""
    tokens = read_shard(path)
    best = -1
    for start in range(0, tokens.size, chunk):
        best = max(best, int(tokens[start : start + chunk].max()))
    return best
