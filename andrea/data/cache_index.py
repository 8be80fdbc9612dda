"""Which prepared corpus of the cache a data config names, found without reading the corpus.

A prepared corpus's directory is named by its fingerprint, which hashes the documents' content:
finding it means reading the whole corpus. The sweep's plan (plan=true) only estimates, so it
could not tell a corpus already in the cache from one never tokenized. Every preparation
therefore leaves a small index entry keyed by what a `stat` can see: the recipe (everything of
the fingerprint but the content) and each source file's path, size and modification time, as
the shard index of andrea/data/prepare.py keys shards. A file edited in place changes its
mtime, so the entry no longer matches and the plan estimates again. A hub dataset has no files
to stat before its download: it is never found here.

    <root>/corpus-index/<key>.json       {"name": "<source>-<fingerprint[:16]>"}
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from andrea.data import corpora
from andrea.data.config import DataConfig, expand_paths, hf_location
from andrea.run.rundir import atomic_write_json, read_json

INDEX = "corpus-index"


def source_files(cfg: DataConfig) -> Optional[list[Path]]:
    """The files the corpus is read from; None when they are not local (a hub dataset)."""
    if cfg.source == "stdlib":
        return sorted(corpora.stdlib_files(corpora.stdlib_root()))
    if cfg.source == "text":
        return expand_paths(cfg.paths, "paths")
    if cfg.source == "hf":
        loc = os.path.expanduser(str(hf_location(cfg)))
        if os.path.isfile(loc):
            return [Path(loc)]
        if os.path.isdir(loc):
            return sorted(p for p in Path(loc).rglob("*") if p.is_file())
    return None


def _resolved(path: Path, folders: dict[str, str]) -> str:
    """`str(path.resolve())`, each folder resolved once: the stdlib corpus is ~1,800 files in a
    few folders, and resolving each file's whole path again (an lstat per component) was most of
    a key's cost, which every sweep's plan and every run's data preparation pay."""
    if path.is_symlink():
        return str(path.resolve())
    folder = str(path.parent)
    if folder not in folders:
        folders[folder] = str(path.parent.resolve())
    return os.path.join(folders[folder], path.name)


def request_key(cfg: DataConfig, recipe: dict) -> Optional[str]:
    """A digest of the recipe and of every source file's path, size and mtime; None when the
    files cannot be listed (a hub dataset, a missing file: the preparation says what is wrong)."""
    folders: dict[str, str] = {}
    try:
        files = source_files(cfg)
        if files is None:
            return None
        stamps = [
            (_resolved(p, folders), st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()]
        ]
    except (OSError, ValueError):
        return None
    what = {
        "recipe": recipe,
        "hf": [cfg.hf_split, cfg.hf_text_field] if cfg.source == "hf" else None,
        "files": stamps,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


def lookup(root: Path, cfg: DataConfig, recipe: dict) -> Optional[str]:
    """The name of the prepared corpus's directory under `root`, if an index entry names it."""
    key = request_key(cfg, recipe)
    return _entry(root, key) if key else None


def _entry(root: Path, key: str) -> Optional[str]:
    entry = read_json(root / INDEX / f"{key}.json")
    return entry.get("name") if isinstance(entry, dict) else None


def record(root: Path, cfg: DataConfig, recipe: dict, name: str) -> None:
    """Remember that `cfg` prepares into `root / name` (nothing when it is remembered already)."""
    key = request_key(cfg, recipe)
    if key is None or _entry(root, key) == name:
        return
    try:
        atomic_write_json(root / INDEX / f"{key}.json", {"name": name})
    except OSError:  # a read-only cache: the plan only estimates
        pass
