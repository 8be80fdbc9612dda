"""Held-out evaluation domains (`eval.domains`): more than one held-out set, scored at every point.

A single validation split measures a variant on the data it was trained on; a change that helps
code may not help prose. Paloma (Magnusson et al. 2023, "Paloma: A Benchmark for Evaluating
Language Model Fit") scores every checkpoint on many domains separately, and reports each; here
each domain is a name and a held-out source:

    eval:
      domains:
        stdlib: {source: heldout}                    # the training corpus's own held-out split
        licenses: {source: text, paths: [/usr/share/common-licenses/*]}
        tinystories: {source: hf, hf_name: roneneldan/TinyStories, hf_split: validation}
        fineweb_val: {source: shards, paths: [/data/fineweb_val_*.bin]}

Every domain is scored with the validation set's fixed-window rule (andrea.data.ValidationSet:
windows spread evenly over the domain, the same for every run, batch and world size), capped at
`eval.domain_tokens` tokens (default: as many as the validation set scores).

None of it is seen in training:
- `heldout` is the corpus's validation split, cut by a hash of each document (andrea/data/
  corpora.py), which the training loader never reads; it is the validation set itself, scored once.
- text/hf/shards sources are refused when they overlap the training data: a text file or shard
  that is a training file (same path, or same bytes as a training file of the same size), a .py
  file of the standard library when the training corpus is the standard library, or the training
  dataset's own split (use `heldout` for that).
- a text or hf domain is tokenized with the training corpus's tokenizer (for pre-tokenized
  training shards: `data.tokenizer`), into its own shards in the data cache.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from andrea.data import corpora
from andrea.data.config import DataConfig, expand_paths, resolve_cache_dir, split_shard_paths
from andrea.run.rundir import atomic_write_bytes, atomic_write_json, read_json

DOMAIN_SOURCES = ("heldout", "text", "hf", "shards")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
DOMAIN_FORMAT = 1  # bump when a domain's prepared layout changes


@dataclass
class DomainConfig:
    source: str = "text"  # heldout | text | hf | shards
    paths: List[str] = field(default_factory=list)  # text files or globs; shards: .bin files
    hf_name: Optional[str] = None  # hf: hub name or local path
    hf_split: str = "validation"
    hf_text_field: str = "text"
    max_chars: Optional[int] = None  # text/hf: cap on the characters tokenized


@dataclass
class EvalConfig:
    """`eval.*`: what every evaluation scores besides the validation set's nats per token."""

    # Bits per byte beside nats per token (needs the tokenizer: andrea's own, or data.tokenizer
    # for pre-tokenized shards). null: when a tokenizer is known; true: required (an error
    # before any job when none is); false: never.
    bpb: Optional[bool] = None
    # Tokens scored per domain and evaluation. null: as many as the validation set
    # (train.val_tokens); capped at the domain's size.
    domain_tokens: Optional[int] = None
    domains: Dict[str, DomainConfig] = field(default_factory=dict)


def describe_domain(d: DomainConfig) -> str:
    """One line naming a domain's source: results.json keeps it, and the reuse check compares it."""
    if d.source == "heldout":
        return "heldout"
    if d.source == "hf":
        where = f"{d.hf_name or (d.paths[0] if d.paths else '?')}[{d.hf_split}].{d.hf_text_field}"
    else:
        where = ",".join(map(str, d.paths))
    cap = f" max_chars={d.max_chars}" if d.max_chars else ""
    return f"{d.source}:{where}{cap}"


def _fail(name: str, msg: str) -> ValueError:
    return ValueError(f"eval.domains.{name}: {msg}")


def _domain_files(name: str, d: DomainConfig) -> List[Path]:
    """The domain's files, each once even when reached through links (GPL -> GPL-3 in
    /usr/share/common-licenses): a file scored twice would weigh twice."""
    try:
        files = expand_paths(d.paths, f"paths of eval.domains.{name}")
    except ValueError as e:  # names the field as eval.domains.<name>.paths
        raise _fail(name, str(e).replace(f"data.paths of eval.domains.{name}", "paths")) from None
    seen: set = set()
    return [f for f in files if not (f.resolve() in seen or seen.add(f.resolve()))]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _sha(path: Path) -> str:
    st = path.stat()
    return _sha_of(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _sha_of(path: str, size: int, mtime_ns: int) -> str:
    """Content hash of a file, once per process and version of it: a grid validates every job's
    domains, and the same files would otherwise be hashed once per job."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _training_files(data: DataConfig) -> List[Path]:
    if data.source == "text":
        return expand_paths(data.paths, "paths")
    if data.source == "shards":
        return split_shard_paths(data)[0]
    return []


def _overlap(name: str, files: List[Path], data: DataConfig) -> None:
    """Refuse a domain file that is (or copies) a training file."""
    if data.source == "stdlib":
        root = corpora.stdlib_root().resolve()
        for f in files:
            rel = f.resolve()
            if (
                f.suffix == ".py"
                and rel.is_relative_to(root)
                and not ({"site-packages", "dist-packages"} & set(rel.relative_to(root).parts))
            ):
                raise _fail(
                    name,
                    f"{f} is a .py file of the standard library, which data=stdlib "
                    "trains on; to score the corpus's own held-out files use "
                    "source: heldout",
                )
        return
    train = _training_files(data)
    by_size: Dict[int, List[Path]] = {}
    for t in train:
        by_size.setdefault(t.stat().st_size, []).append(t)
    for f in files:
        for t in train:
            if _same_file(f, t):
                raise _fail(
                    name,
                    f"{f} is a training file (data.paths); a domain must be held "
                    "out: use source: heldout for the corpus's own validation split",
                )
        same_size = by_size.get(f.stat().st_size, [])
        if same_size:
            digest = _sha(f)
            for t in same_size:
                if _sha(t) == digest:
                    raise _fail(
                        name,
                        f"{f} has the same bytes as the training file {t}; a "
                        "domain must be held out",
                    )


def validate_eval_config(cfg: EvalConfig, data: DataConfig) -> None:
    """Every check that needs no tokenizing, so a bad domain fails before any job is submitted."""
    if cfg.domain_tokens is not None and cfg.domain_tokens < 1:
        raise ValueError(f"eval.domain_tokens={cfg.domain_tokens} must be positive or null")
    if cfg.bpb is True and data.source == "shards" and not data.tokenizer:
        raise ValueError(
            "eval.bpb=true: bits per byte needs the tokenizer that made the shards (the bytes "
            "each token id decodes to); set data.tokenizer=<its tokenizer.json>, or eval.bpb=null"
        )
    for name, d in cfg.domains.items():
        if not _NAME.match(str(name)):
            raise ValueError(
                f"eval.domains.{name}: a domain name is 1-40 letters, digits, '_', "
                "'.' or '-' (it names results.json keys domain:<name>/loss)"
            )
        if d.source not in DOMAIN_SOURCES:
            raise _fail(name, f"source={d.source!r} is not one of {', '.join(DOMAIN_SOURCES)}")
        if d.max_chars is not None and d.max_chars <= 0:
            raise _fail(name, f"max_chars={d.max_chars} must be positive or null")
        if d.source == "heldout":
            if d.paths or d.hf_name:
                raise _fail(
                    name,
                    "source: heldout is the training corpus's own validation split; "
                    "it takes no paths or hf_name",
                )
            continue
        if d.source in ("text", "hf") and data.source == "shards" and not data.tokenizer:
            raise _fail(
                name,
                f"a {d.source} domain is tokenized with the training data's "
                "tokenizer; for data=shards set data.tokenizer=<the tokenizer.json "
                "that made the shards>",
            )
        if d.source in ("text", "shards"):
            if not d.paths:
                raise _fail(name, f"source: {d.source} needs paths (files or globs)")
            _overlap(name, _domain_files(name, d), data)
        else:  # hf
            loc = d.hf_name or (d.paths[0] if d.paths else None)
            if not loc:
                raise _fail(name, "source: hf needs hf_name (a dataset name or local path)")
            if loc.startswith((".", "/", "~")) and not os.path.exists(os.path.expanduser(loc)):
                raise _fail(name, f"hf_name={loc!r} looks like a local path but does not exist")
            train_loc = data.hf_name or (data.paths[0] if data.paths else None)
            if data.source == "hf" and train_loc == loc and data.hf_split == d.hf_split:
                raise _fail(
                    name,
                    f"{loc}[{d.hf_split}] is the training dataset's split; use "
                    "source: heldout for its held-out documents, or another split",
                )


# --------------------------------------------------------------------------------------------
# Preparation: each domain's token shards
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PreparedDomain:
    name: str
    source: str  # describe_domain
    shards: List[Path]  # empty for heldout: the validation set itself
    n_tokens: int


def prepare_domains(
    cfg: EvalConfig, data: DataConfig, prepared, tokenizer=None, cache_dir: Optional[str] = None
) -> Dict[str, PreparedDomain]:
    """Each domain's shards, tokenized once into the data cache (fingerprinted like a corpus).

    `prepared`: the training corpus (andrea.data.PreparedData); `tokenizer`: the training data's
    tokenizer (None: loaded from the corpus, or data.tokenizer for shards)."""
    from andrea.data.prepare import cached_max_token, encode_split, locked
    from andrea.data.shards import read_header

    out: Dict[str, PreparedDomain] = {}
    root = resolve_cache_dir(cache_dir or data.cache_dir)
    for name, d in cfg.domains.items():
        what = describe_domain(d)
        if d.source == "heldout":
            out[name] = PreparedDomain(name, what, [], prepared.n_val_tokens)
            continue
        if d.source == "shards":
            files = _domain_files(name, d)
            n = 0
            for f in files:
                n += read_header(f)
                top = cached_max_token(f, root)
                if top >= prepared.vocab_size:
                    raise _fail(
                        name,
                        f"shard {f} holds token id {top} >= the training data's "
                        f"vocab_size={prepared.vocab_size}: another tokenizer's",
                    )
            out[name] = PreparedDomain(name, what, files, n)
            continue
        tok = tokenizer if tokenizer is not None else load_training_tokenizer(data, prepared)
        docs = _documents(name, d)
        if not docs:
            raise _fail(name, f"{what} holds no text")
        h = hashlib.sha256()
        for doc in docs:
            b = doc.encode("utf-8", "surrogatepass")
            h.update(len(b).to_bytes(8, "little") + b)
        inputs = {
            "format": DOMAIN_FORMAT,
            "content_sha256": h.hexdigest(),
            "tokenizer_sha256": hashlib.sha256(tok.to_str().encode()).hexdigest(),
        }
        fp = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
        final = root / "domains" / f"{name}-{fp[:16]}"
        if not (final / "COMPLETE").exists():
            final.parent.mkdir(parents=True, exist_ok=True)
            with locked(final.parent / f"{final.name}.lock"):
                if not (final / "COMPLETE").exists():
                    final.mkdir(exist_ok=True)
                    t = time.perf_counter()
                    names, n = encode_split(
                        tok, docs, final, "val", 100_000_000, total_chars=sum(map(len, docs))
                    )
                    atomic_write_json(
                        final / "meta.json",
                        {
                            "name": name,
                            "source": what,
                            "inputs": inputs,
                            "shards": names,
                            "n_tokens": n,
                            "encode_s": round(time.perf_counter() - t, 2),
                        },
                    )
                    atomic_write_bytes(final / "COMPLETE", b"")
        meta = read_json(final / "meta.json") or {}
        out[name] = PreparedDomain(
            name, what, [final / s for s in meta["shards"]], int(meta["n_tokens"])
        )
    return out


def _documents(name: str, d: DomainConfig) -> List[str]:
    """The domain's documents, as the training corpus cuts the same source (text: ~16k-character
    chunks of each file; hf: rows), up to max_chars characters."""
    if d.source == "text":
        docs = (c for f in _domain_files(name, d) for c in corpora._chunks(_read(name, f)))
    else:
        cfg = DataConfig(
            source="hf",
            paths=list(d.paths),
            hf_name=d.hf_name,
            hf_split=d.hf_split,
            hf_text_field=d.hf_text_field,
        )
        docs = (text for text, _ in corpora.hf_documents(cfg))
    out, chars = [], 0
    try:
        for doc in docs:
            if d.max_chars is not None and chars >= d.max_chars:
                break
            out.append(doc)
            chars += len(doc)
    except ValueError as e:
        msg = str(e)
        raise (e if msg.startswith("eval.domains.") else _fail(name, msg)) from None
    return out


def _read(name: str, path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(name, f"{path} is not UTF-8 text ({e})") from None


def load_training_tokenizer(data: DataConfig, prepared):
    """The tokenizer of the training data: the corpus's own, or data.tokenizer for shards; None
    when neither exists (pre-tokenized shards without data.tokenizer)."""
    from andrea.data.tokenizer import load_tokenizer

    path = prepared.tokenizer_path or (
        Path(os.path.expanduser(data.tokenizer)) if data.tokenizer else None
    )
    if path is None:
        return None
    try:
        return load_tokenizer(path)
    except Exception as e:  # tokenizers raises its own Exception type for a bad file
        raise ValueError(
            f"data.tokenizer={str(path)!r} is not a tokenizer.json that the "
            f"`tokenizers` library reads ({e})"
        ) from None


def check_domains(cfg: EvalConfig, data: DataConfig, prepared, seq_lens) -> None:
    """Prepare every domain (tokenizing text and hf ones once, into the cache) and check that
    each holds at least one window of seq_len + 1 tokens for every seq_len in `seq_lens`: the
    sweeper and a single run call it before anything trains. Raises ValueError."""
    if not cfg.domains:
        return
    for name, d in prepare_domains(cfg, data, prepared).items():
        for seq_len in set(seq_lens):
            from andrea.data.prepare import n_windows

            if d.shards and n_windows(d.shards, seq_len) < 1:
                raise _fail(
                    name,
                    f"{d.source} holds {d.n_tokens} tokens, fewer than one window "
                    f"of seq_len+1={seq_len + 1}; give it more text",
                )
