"""Text corpora as documents, and the fixed train/validation split by document.

A document is (split_key, text). Which split it lands in depends only on a hash of its key:
stdlib — the file's path relative to the stdlib root; text/hf — the text itself (so duplicate
documents can never straddle train and validation).
"""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

from andrea.data.config import DataConfig, expand_paths, hf_location

TEXT_CHUNK_CHARS = 16384  # text files are cut (at a newline) into documents of about this size


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _read_text(path: Path, strict: bool) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if strict:
            raise ValueError(
                f"{path} is not UTF-8 text ({e}); convert it or drop it from data.paths"
            ) from None
        # a handful of stdlib tests are deliberately latin-1 / koi8-r / invalid
        return data.decode("utf-8", errors="replace")


def stdlib_files(root: Path) -> Iterator[Path]:
    """The standard library's .py files under `root`, in no set order. Installed packages
    (site-packages, dist-packages) are pruned from the walk, not filtered after it: they are most
    of the files under a Python's lib folder (13k here), and the sweep's planning walks this too.
    Folders reached through a symlink are not entered (as pathlib's rglob does not)."""
    folders = [root]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in ("site-packages", "dist-packages"):
                        folders.append(Path(entry.path))
                elif entry.name.endswith(".py"):
                    yield Path(entry.path)


def stdlib_documents() -> Iterator[Tuple[str, str]]:
    root = stdlib_root()
    files = sorted((p.relative_to(root).as_posix(), p) for p in stdlib_files(root))
    for rel, path in files:
        yield rel, _read_text(path, strict=False)


def _chunks(text: str, size: int = TEXT_CHUNK_CHARS) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        yield text[start:end]
        start = end


def text_documents(cfg: DataConfig) -> Iterator[Tuple[str, str]]:
    for path in expand_paths(cfg.paths, "paths"):
        for chunk in _chunks(_read_text(path, strict=True)):
            yield chunk, chunk


def load_hf_dataset(cfg: DataConfig):
    """The configured split of a Hugging Face dataset: hub name, saved dataset dir, or data file."""
    try:
        import datasets
    except ImportError:
        raise ValueError(
            "data.source='hf' needs the `datasets` package: pip install 'andrea[hf]'"
        ) from None
    loc = hf_location(cfg)
    local = os.path.expanduser(loc)
    if os.path.isdir(local) and (
        os.path.exists(os.path.join(local, "dataset_info.json"))
        or os.path.exists(os.path.join(local, "dataset_dict.json"))
    ):
        ds = datasets.load_from_disk(local)
        if isinstance(ds, datasets.DatasetDict):
            if cfg.hf_split not in ds:
                raise ValueError(
                    f"data.hf_split={cfg.hf_split!r} not in the dataset at {loc}; "
                    f"splits: {sorted(ds)}"
                )
            ds = ds[cfg.hf_split]
    elif os.path.isfile(local):
        ext = os.path.splitext(local)[1].lstrip(".")
        builder = {"jsonl": "json", "txt": "text"}.get(ext, ext)
        ds = datasets.load_dataset(builder, data_files={cfg.hf_split: local}, split=cfg.hf_split)
    else:
        ds = datasets.load_dataset(loc, split=cfg.hf_split)
    if cfg.hf_text_field not in ds.column_names:
        raise ValueError(
            f"data.hf_text_field={cfg.hf_text_field!r} is not a column of {loc} "
            f"(split {cfg.hf_split!r}); columns: {ds.column_names}"
        )
    return ds


def hf_documents(cfg: DataConfig) -> Iterator[Tuple[str, str]]:
    ds = load_hf_dataset(cfg)
    for i, row in enumerate(ds.select_columns([cfg.hf_text_field])):
        text = row[cfg.hf_text_field]
        if text is None:
            continue
        if not isinstance(text, str):
            raise ValueError(
                f"data.hf_text_field={cfg.hf_text_field!r}: row {i} holds "
                f"{type(text).__name__}, not text"
            )
        if text:
            yield text, text


def documents(cfg: DataConfig) -> Iterator[Tuple[str, str]]:
    if cfg.source == "stdlib":
        return stdlib_documents()
    if cfg.source == "text":
        return text_documents(cfg)
    if cfg.source == "hf":
        return hf_documents(cfg)
    raise ValueError(f"data.source={cfg.source!r} has no text documents")


def key_fraction(key: str) -> float:
    """A fixed pseudo-random number in [0, 1) for a document key."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


@dataclass
class SplitCorpus:
    train: List[str] = field(default_factory=list)
    val: List[str] = field(default_factory=list)
    content_hash: str = ""

    @property
    def n_chars(self) -> int:
        return sum(map(len, self.train)) + sum(map(len, self.val))


def split_documents(
    docs: Iterator[Tuple[str, str]], val_fraction: float, max_chars: Optional[int], what: str
) -> SplitCorpus:
    """Assign each document by `key_fraction(key) < val_fraction`; cap each split's characters.

    With `max_chars`, train keeps whole documents until it holds (1 - val_fraction)·max_chars
    characters and validation until it holds val_fraction·max_chars, in corpus order. If no
    document hashes into validation, the one with the smallest hash moves there, so a small
    corpus still gets a (small) validation split.
    """
    budget = {
        "train": None if max_chars is None else max_chars * (1 - val_fraction),
        "val": None if max_chars is None else max_chars * val_fraction,
    }
    picked = {"train": [], "val": []}  # (fraction, key, text)
    chars = {"train": 0, "val": 0}
    for key, text in docs:
        if not text:
            continue
        frac = key_fraction(key)
        split = "val" if frac < val_fraction else "train"
        if budget[split] is not None and chars[split] >= budget[split]:
            if all(chars[s] >= budget[s] for s in budget):
                break
            continue
        picked[split].append((frac, key, text))
        chars[split] += len(text)
    if not picked["train"] and not picked["val"]:
        raise ValueError(f"{what}: the corpus is empty (no non-empty documents)")
    if not picked["val"]:
        smallest = min(range(len(picked["train"])), key=lambda i: picked["train"][i][0])
        picked["val"].append(picked["train"].pop(smallest))
    if not picked["train"]:
        raise ValueError(
            f"{what}: all {len(picked['val'])} document(s) fell into the validation split; "
            "add documents or lower data.val_fraction"
        )
    h = hashlib.sha256()
    for split in ("train", "val"):
        for _, key, text in picked[split]:
            for part in (split, key, text):
                b = part.encode("utf-8", "surrogatepass")
                h.update(len(b).to_bytes(8, "little") + b)
    return SplitCorpus(
        train=[t for _, _, t in picked["train"]],
        val=[t for _, _, t in picked["val"]],
        content_hash=h.hexdigest(),
    )


def python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))
