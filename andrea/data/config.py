"""`DataConfig` (the `data/` Hydra group's schema) and its validation, done once and early."""

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from andrea.data.shards import MAX_VOCAB
from andrea.data.tokenizer import MIN_VOCAB

SOURCES = ("stdlib", "text", "hf", "shards")


@dataclass
class DataConfig:
    # stdlib: the running interpreter's standard library (.py files, tests included)
    # text:   plain-text files; shards: existing fineweb/llm.c-layout uint16 .bin token shards
    # hf:     a Hugging Face dataset (hub name or local path: saved dataset dir or json/csv/...)
    source: str = "stdlib"
    # text: files or globs. shards: train shard files or globs (matches whose file name
    # contains "val" are the validation shards unless val_paths is given). hf: paths[0] may be
    # a local dataset path instead of hf_name.
    paths: List[str] = field(default_factory=list)
    hf_name: Optional[str] = None
    hf_split: str = "train"
    hf_text_field: str = "text"
    val_paths: List[str] = field(default_factory=list)  # shards: explicit validation shards
    # stdlib/text/hf: share of documents held out, chosen by a hash of each document
    # (stdlib: a file, keyed by its relative path; hf: a row; text: a ~16k-character chunk of a
    # file cut at a newline, keyed by content) so the split never depends on order or run.
    # If no document hashes into validation, the one with the smallest hash is held out.
    val_fraction: float = 0.01
    vocab_size: Optional[int] = None  # tokenizer vocabulary; None → the model's
    cache_dir: Optional[str] = None  # None → $ANDREA_DATA, else ~/.cache/andrea
    max_chars: Optional[int] = None  # cap on corpus characters (quick demos)
    shard_tokens: int = 100_000_000  # tokens per written shard (fineweb uses 1e8)
    # shards only: the tokenizer.json that made the shards (Hugging Face `tokenizers` format).
    # With it, evaluations report bits per byte and text domains (eval.domains) can be encoded;
    # stdlib/text/hf train their own tokenizer and need none.
    tokenizer: Optional[str] = None


def resolve_cache_dir(cfg_cache_dir: Optional[str] = None) -> Path:
    if cfg_cache_dir:
        return Path(cfg_cache_dir).expanduser()
    env = os.environ.get("ANDREA_DATA")
    if env:
        return Path(env).expanduser()
    return Path("~/.cache/andrea").expanduser()


def expand_paths(patterns: List[str], field_name: str, suffix: str = ".txt") -> List[Path]:
    """Files named by `patterns` (paths or globs, `**` allowed), each pattern's matches sorted.

    Raises ValueError naming the field for a missing file, an empty glob or a directory (its
    example glob ends in `suffix`: .bin for token shards).
    """
    out: List[Path] = []
    for i, pattern in enumerate(patterns):
        pat = os.path.expandvars(os.path.expanduser(str(pattern)))
        if glob.has_magic(pat):
            matches = sorted(p for p in glob.glob(pat, recursive=True) if os.path.isfile(p))
            if not matches:
                raise ValueError(
                    f"data.{field_name}: glob {pattern!r} matches no files"
                    + _comma_hint(patterns, i, field_name)
                )
            out.extend(Path(m) for m in matches)
        elif os.path.isdir(pat):
            raise ValueError(
                f"data.{field_name}: {pattern!r} is a directory; give files or a glob "
                f"such as {os.path.join(pattern, '*' + suffix)!r}"
            )
        elif not os.path.isfile(pat):
            raise ValueError(
                f"data.{field_name}: file {pattern!r} does not exist"
                + _comma_hint(patterns, i, field_name)
            )
        else:
            out.append(Path(pat))
    seen: set = set()
    return [p for p in out if not (p in seen or seen.add(p))]


def _comma_hint(patterns: List[str], i: int, field_name: str) -> str:
    """When patterns[i] and the ones after it, joined by commas, name a file: Hydra split one
    unquoted path at its commas ([/a,b.txt] is the list of /a and b.txt). Say how to quote it."""
    for j in range(i + 2, len(patterns) + 1):
        joined = ",".join(str(p) for p in patterns[i:j])
        pat = os.path.expandvars(os.path.expanduser(joined))
        if os.path.isfile(pat) or (glob.has_magic(pat) and glob.glob(pat, recursive=True)):
            return (
                f"; {joined!r} exists: Hydra splits an unquoted list element at its commas, "
                f"so quote the path: \"data.{field_name}=['{joined}']\""
            )
    return ""


def effective_vocab_size(cfg: DataConfig, model_vocab_size: int) -> int:
    return cfg.vocab_size if cfg.vocab_size is not None else model_vocab_size


def hf_location(cfg: DataConfig) -> Optional[str]:
    return cfg.hf_name if cfg.hf_name else (cfg.paths[0] if cfg.paths else None)


def validate_data_config(cfg: DataConfig, model_vocab_size: int) -> None:
    """Every check that needs no tokenizing, so a bad config fails before any job is submitted."""
    if cfg.source not in SOURCES:
        raise ValueError(f"data.source={cfg.source!r} is not one of {', '.join(SOURCES)}")
    vocab = effective_vocab_size(cfg, model_vocab_size)
    if not isinstance(vocab, int) or isinstance(vocab, bool):
        raise ValueError(f"data.vocab_size={vocab!r} must be an integer or null")
    lowest = 1 if cfg.source == "shards" else MIN_VOCAB
    if not lowest <= vocab <= MAX_VOCAB:
        raise ValueError(
            f"data.vocab_size={vocab} (null means the model's) must lie in {lowest}..{MAX_VOCAB}"
            + ("" if cfg.source == "shards" else ": 256 byte tokens + merges + 1 end-of-text")
            + "; shards store uint16 token ids"
        )
    if vocab > model_vocab_size:
        raise ValueError(
            f"data.vocab_size={vocab} exceeds the model's vocab_size={model_vocab_size}: "
            "token ids would fall outside the embedding; use at most the model's, or null"
        )
    if cfg.source != "shards" and not 0.0 < cfg.val_fraction < 1.0:
        raise ValueError(
            f"data.val_fraction={cfg.val_fraction} must lie strictly between 0 and 1 "
            "(a validation split is needed for val_loss); 0.01 is usual"
        )
    if cfg.max_chars is not None and cfg.max_chars <= 0:
        raise ValueError(f"data.max_chars={cfg.max_chars} must be a positive integer or null")
    if cfg.shard_tokens <= 0:
        raise ValueError(f"data.shard_tokens={cfg.shard_tokens} must be positive")

    if cfg.tokenizer is not None:
        if cfg.source != "shards":
            raise ValueError(
                f"data.tokenizer={cfg.tokenizer!r} applies to data.source=shards only (the "
                f"tokenizer that made them); data.source={cfg.source!r} trains its own"
            )
        if not os.path.isfile(os.path.expanduser(cfg.tokenizer)):
            raise ValueError(f"data.tokenizer: file {cfg.tokenizer!r} does not exist")

    if cfg.source == "stdlib":
        if cfg.paths or cfg.val_paths or cfg.hf_name:
            raise ValueError(
                "data.source='stdlib' reads the interpreter's standard library; "
                f"unset data.paths={cfg.paths!r}, data.val_paths={cfg.val_paths!r}, "
                f"data.hf_name={cfg.hf_name!r} or choose source text|hf|shards"
            )
    elif cfg.source == "text":
        if not cfg.paths:
            raise ValueError("data.paths is empty: source 'text' needs text files or globs")
        expand_paths(cfg.paths, "paths")
    elif cfg.source == "shards":
        if not cfg.paths:
            raise ValueError("data.paths is empty: source 'shards' needs .bin shard files or globs")
        train, val = split_shard_paths(cfg)
        if not train:
            raise ValueError(
                f"data.paths={cfg.paths!r} holds only validation shards (names containing "
                "'val'); give the training shards too"
            )
        if not val:
            raise ValueError(
                f"data.val_paths is empty and no shard matched by data.paths={cfg.paths!r} has "
                "'val' in its name; give validation shards in data.val_paths"
            )
    elif cfg.source == "hf":
        loc = hf_location(cfg)
        if not loc:
            raise ValueError(
                "source 'hf' needs data.hf_name (a dataset name or local path) or data.paths[0]"
            )
        if _looks_local(loc) and not os.path.exists(os.path.expanduser(loc)):
            raise ValueError(f"data.hf_name={loc!r} looks like a local path but does not exist")
        if not cfg.hf_split:
            raise ValueError("data.hf_split is empty; e.g. 'train'")
        if not cfg.hf_text_field:
            raise ValueError("data.hf_text_field is empty; e.g. 'text'")


def _looks_local(loc: str) -> bool:
    return (
        loc.startswith((".", "/", "~"))
        or os.path.exists(os.path.expanduser(loc))
        or (os.path.splitext(loc)[1] in (".json", ".jsonl", ".csv", ".parquet", ".txt", ".arrow"))
    )


def split_shard_paths(cfg: DataConfig) -> tuple:
    """(train, val) shard files: val_paths when given, else the `paths` matches named *val*."""
    files = expand_paths(cfg.paths, "paths", ".bin")
    if cfg.val_paths:
        val = expand_paths(cfg.val_paths, "val_paths", ".bin")
        train = [f for f in files if f not in set(val)]
    else:
        val = [f for f in files if "val" in f.name]
        train = [f for f in files if "val" not in f.name]
    return train, val
