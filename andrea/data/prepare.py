"""Turn a `DataConfig` into token shards once, in a cache shared by every run and job.

Cache layout (root = cache_dir argument, else data.cache_dir, else $ANDREA_DATA, else
~/.cache/andrea):

    <root>/<source>-<fingerprint[:16]>/      one prepared corpus, immutable once complete
        tokenizer.json                       byte-level BPE
        train_000000.bin ...                 fineweb/llm.c-layout uint16 shards
        val_000000.bin ...
        meta.json                            fingerprint inputs, token counts, timings
        COMPLETE                             written last; a dir without it is never used
    <root>/<source>-<fingerprint[:16]>.lock  flock'ed while one process prepares it
    <root>/.tmp-<name>-<pid>-<random>/       work dir, renamed to <name>/ when complete
    <root>/shard-index/<hash>.json           source=shards: max token id per shard file,
                                             keyed by path, size and mtime
    <root>/corpus-index/<hash>.json          the directory a config prepares into, keyed by
                                             its files' paths, sizes and mtimes (the plan finds
                                             a prepared corpus without reading it:
                                             andrea/data/cache_index.py)

source=shards writes no corpus directory: its files are used in place.

The fingerprint hashes everything that decides the tokens (source, Python version for stdlib,
content hash of the documents actually used, vocab size, max_chars, val_fraction, shard size,
tokenizer recipe and `tokenizers` version), so a changed corpus gets a new directory instead of
being mixed with an old one. Concurrent preparers (e.g. four Slurm jobs starting together) take
the lock in turn; the first builds, the others find COMPLETE and reuse it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

import numpy as np
import tokenizers

from andrea.data import cache_index, corpora
from andrea.data.config import (
    DataConfig,
    effective_vocab_size,
    resolve_cache_dir,
    split_shard_paths,
    validate_data_config,
)
from andrea.data.shards import max_token, read_header, write_shard
from andrea.data.tokenizer import (
    TOKENIZER_SETTINGS,
    encode_documents,
    eot_id,
    save_tokenizer,
    train_tokenizer,
)
from andrea.run.rundir import atomic_write_bytes, atomic_write_json, read_json

FORMAT_VERSION = 1  # bump when the prepared layout or recipe changes
COMPLETE = "COMPLETE"


@dataclass(frozen=True)
class PreparedData:
    train_shards: List[Path]
    val_shards: List[Path]
    vocab_size: int  # ids in the shards are < vocab_size
    tokenizer_path: Optional[Path]  # None for source=shards
    n_train_tokens: int
    n_val_tokens: int
    fingerprint: str
    eot_id: Optional[int] = None  # document separator (vocab_size - 1); None for shards
    directory: Optional[Path] = None  # the cache dir holding it; None for shards


def n_windows(shards: List[Path], seq_len: int) -> int:
    """Number of (seq_len + 1)-token training windows the loader cuts from `shards`."""
    return sum(max(read_header(s) - 1, 0) // seq_len for s in shards)


def check_split_sizes(
    prepared: PreparedData, batch_size: int, seq_len: int, world_size: int = 1
) -> None:
    """Raise ValueError unless train and validation each hold at least one global batch."""
    need = batch_size * world_size
    for split, shards, n_tok in (
        ("train", prepared.train_shards, prepared.n_train_tokens),
        ("validation", prepared.val_shards, prepared.n_val_tokens),
    ):
        have = n_windows(shards, seq_len)
        if have < need:
            raise ValueError(
                f"the {split} split has {n_tok} tokens = {have} windows of seq_len+1={seq_len + 1} "
                f"tokens, fewer than one batch of batch_size*world_size={need}; use a larger "
                "corpus (data.max_chars / data.val_fraction) or a smaller batch_size / seq_len"
            )


def prepare_data(
    data_cfg: DataConfig, vocab_size: int, cache_dir: Optional[str] = None
) -> PreparedData:
    """Prepared shards for `data_cfg`, building them on first use. `vocab_size` is the model's."""
    validate_data_config(data_cfg, vocab_size)
    vocab = effective_vocab_size(data_cfg, vocab_size)
    root = resolve_cache_dir(cache_dir or data_cfg.cache_dir)
    if data_cfg.source == "shards":
        return _existing_shards(data_cfg, vocab, root)

    t0 = time.perf_counter()
    corpus = corpora.split_documents(
        corpora.documents(data_cfg),
        data_cfg.val_fraction,
        data_cfg.max_chars,
        what=f"data.source={data_cfg.source!r}"
        + (f" data.paths={list(data_cfg.paths)}" if data_cfg.paths else "")
        + (f" data.hf_name={data_cfg.hf_name!r}" if data_cfg.hf_name else ""),
    )
    recipe = _recipe(data_cfg, vocab)
    inputs = {**recipe, "content_sha256": corpus.content_hash}
    fingerprint = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    name = f"{data_cfg.source}-{fingerprint[:16]}"
    final = root / name
    read_s = time.perf_counter() - t0

    if not (final / COMPLETE).exists():
        root.mkdir(parents=True, exist_ok=True)
        with locked(root / f"{name}.lock"):
            if not (final / COMPLETE).exists():  # another process may have finished meanwhile
                _build(final, corpus, vocab, data_cfg, inputs, fingerprint, read_s)
    prepared = _load_prepared(final, fingerprint)
    cache_index.record(root, data_cfg, recipe, name)
    return prepared


def _recipe(cfg: DataConfig, vocab: int) -> dict:
    """Everything the fingerprint hashes except the documents' content."""
    return {
        "format_version": FORMAT_VERSION,
        "source": cfg.source,
        "python": corpora.python_version() if cfg.source == "stdlib" else None,
        "vocab_size": vocab,
        "max_chars": cfg.max_chars,
        "val_fraction": cfg.val_fraction,
        "shard_tokens": cfg.shard_tokens,
        "tokenizer": TOKENIZER_SETTINGS,
        "tokenizers_version": tokenizers.__version__,
    }


def find_prepared(
    data_cfg: DataConfig, vocab_size: int, cache_dir: Optional[str] = None
) -> Optional[PreparedData]:
    """The corpus as prepared in the cache, found without reading or tokenizing it; None when it
    is not there (or not known to be: andrea/data/cache_index.py). Shards are read in place."""
    if data_cfg.source == "shards":
        return None
    vocab = effective_vocab_size(data_cfg, vocab_size)
    root = resolve_cache_dir(cache_dir or data_cfg.cache_dir)
    name = cache_index.lookup(root, data_cfg, _recipe(data_cfg, vocab))
    final = root / name if name else None
    if final is None or not (final / COMPLETE).exists():
        return None
    meta = read_json(final / "meta.json")
    if not isinstance(meta, dict) or "fingerprint" not in meta:
        return None
    return _load_prepared(final, meta["fingerprint"])


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"[data] waiting for another process preparing {lock_path.stem} ...",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _build(
    final: Path,
    corpus: corpora.SplitCorpus,
    vocab: int,
    cfg: DataConfig,
    inputs: dict,
    fingerprint: str,
    read_s: float,
) -> None:
    root = final.parent
    for stale in root.glob(f".tmp-{final.name}-*"):  # left by a killed preparer (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    if final.exists():  # incomplete leftover: never reused
        shutil.rmtree(final)
    work = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{final.name}-{os.getpid()}-"))
    try:
        log = lambda msg: print(f"[data] {msg}", file=sys.stderr, flush=True)  # noqa: E731
        log(
            f"preparing {cfg.source} corpus ({corpus.n_chars:,} chars, {len(corpus.train)} train / "
            f"{len(corpus.val)} val documents, vocab {vocab}) into {final}"
        )
        t = time.perf_counter()
        tok = train_tokenizer(corpus.train, vocab)
        train_s = time.perf_counter() - t
        log(f"trained BPE tokenizer ({vocab} ids) in {train_s:.1f}s")
        save_tokenizer(tok, work / "tokenizer.json")
        t = time.perf_counter()
        counts = {}
        shards = {}
        for split, docs in (("train", corpus.train), ("val", corpus.val)):
            shards[split], counts[split] = encode_split(
                tok, docs, work, split, cfg.shard_tokens, total_chars=corpus.n_chars
            )
        encode_s = time.perf_counter() - t
        log(f"encoded {counts['train']:,} train + {counts['val']:,} val tokens in {encode_s:.1f}s")
        meta = {
            "fingerprint": fingerprint,
            "inputs": inputs,
            "vocab_size": vocab,
            "eot_id": eot_id(tok),
            "n_chars": corpus.n_chars,
            "n_train_docs": len(corpus.train),
            "n_val_docs": len(corpus.val),
            "train_shards": shards["train"],
            "val_shards": shards["val"],
            "n_train_tokens": counts["train"],
            "n_val_tokens": counts["val"],
            "timings_s": {
                "read": round(read_s, 2),
                "bpe_train": round(train_s, 2),
                "encode": round(encode_s, 2),
            },
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write_json(work / "meta.json", meta)
        atomic_write_bytes(work / COMPLETE, b"")  # last: the directory is now whole
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _progress(total: int, desc: str):
    """tqdm on a terminal; elsewhere (Slurm logs) or without tqdm, a percentage every few s."""
    if sys.stderr.isatty():
        try:
            from tqdm import tqdm

            return tqdm(total=total, desc=desc, unit="char", unit_scale=True, file=sys.stderr)
        except ImportError:
            pass
    return _StderrProgress(total, desc)


class _StderrProgress:
    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.n, self.last = total, desc, 0, 0.0

    def update(self, n: int) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last > 5.0 or self.n >= self.total:
            self.last = now
            pct = 100 * self.n / max(self.total, 1)
            print(f"{self.desc}: {pct:.0f}%", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def encode_split(
    tok, docs: List[str], work: Path, split: str, shard_tokens: int, total_chars: int
) -> tuple:
    """Encode documents (each preceded by end-of-text, as in fineweb) into shards of `split`."""
    eot = eot_id(tok)
    names: List[str] = []
    buf: List[np.ndarray] = []
    buffered = 0
    total = 0
    bar = _progress(sum(map(len, docs)), f"[data] encoding {split}")

    def flush(force: bool) -> None:
        nonlocal buf, buffered
        while buffered >= shard_tokens or (force and buffered):
            flat = np.concatenate(buf)
            take = min(shard_tokens, flat.size)
            name = f"{split}_{len(names):06d}.bin"
            write_shard(work / name, flat[:take])
            names.append(name)
            buf, buffered = [flat[take:]], flat.size - take

    batch: List[str] = []
    batch_chars = 0
    for i, doc in enumerate(docs):
        batch.append(doc)
        batch_chars += len(doc)
        if batch_chars >= 1_000_000 or i == len(docs) - 1:
            for ids in encode_documents(tok, batch):
                arr = np.empty(len(ids) + 1, dtype=np.uint16)
                arr[0] = eot
                arr[1:] = ids
                buf.append(arr)
                buffered += arr.size
                total += arr.size
            bar.update(batch_chars)
            batch, batch_chars = [], 0
            flush(force=False)
    flush(force=True)
    bar.close()
    return names, total


def _load_prepared(final: Path, fingerprint: str) -> PreparedData:
    meta = read_json(final / "meta.json")
    if not meta or meta.get("fingerprint") != fingerprint:
        raise RuntimeError(
            f"prepared data at {final} is marked complete but its meta.json is "
            "missing or for another fingerprint; delete the directory to rebuild"
        )
    return PreparedData(
        train_shards=[final / n for n in meta["train_shards"]],
        val_shards=[final / n for n in meta["val_shards"]],
        vocab_size=meta["vocab_size"],
        tokenizer_path=final / "tokenizer.json",
        n_train_tokens=meta["n_train_tokens"],
        n_val_tokens=meta["n_val_tokens"],
        fingerprint=fingerprint,
        eot_id=meta["eot_id"],
        directory=final,
    )


def _existing_shards(cfg: DataConfig, vocab: int, root: Path) -> PreparedData:
    train, val = split_shard_paths(cfg)
    h = hashlib.sha256()
    counts = {}
    for split, files in (("train", train), ("val", val)):
        counts[split] = 0
        for f in files:
            n = read_header(f)  # validates magic, version, size
            if n == 0:
                raise ValueError(f"token shard {f} is empty (0 tokens)")
            top = cached_max_token(f, root)
            if top >= vocab:
                raise ValueError(
                    f"token shard {f} holds token id {top} >= vocab_size={vocab} "
                    "(data.vocab_size, or the model's when null); the shards were made with a "
                    "larger vocabulary than the model's: give the model one that holds them, "
                    f"size.vocab_size={top + 1} or more (GPT-2's ids: 50257)"
                    + (", and data.vocab_size=null" if cfg.vocab_size is not None else "")
                )
            counts[split] += n
            st = f.stat()
            h.update(f"{split}:{f.resolve()}:{n}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    h.update(f"vocab={vocab}".encode())
    return PreparedData(
        train_shards=train,
        val_shards=val,
        vocab_size=vocab,
        tokenizer_path=None,
        n_train_tokens=counts["train"],
        n_val_tokens=counts["val"],
        fingerprint=h.hexdigest(),
    )


def cached_max_token(shard: Path, root: Path) -> int:
    """max_token(shard), remembered under <root>/shard-index/ by path, size and mtime.

    Scanning fineweb10B (20 GB) takes tens of seconds; every run and rank would repeat it.
    """
    st = shard.stat()
    key = hashlib.sha256(str(shard.resolve()).encode()).hexdigest()[:24]
    index = root / "shard-index" / f"{key}.json"
    stamp = {"path": str(shard.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    cached = read_json(index)
    if cached and all(cached.get(k) == v for k, v in stamp.items()):
        return int(cached["max_token"])
    top = max_token(shard)
    try:
        atomic_write_json(index, {**stamp, "max_token": top})
    except OSError:  # a read-only cache only costs the rescan
        pass
    return top
