"""Which code a run came from, beyond andrea's own checkout (`rundir.code_version`: its git SHA):
each installed plug-in the run used, by its distribution's name and version and a digest of its
source. An editable install (`pip install -e`) keeps its version while its code changes, so the
version alone cannot tell a reuse check that the code moved; the digest can."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path


def source_files(module: str) -> list[tuple[str, Path]]:
    """The Python files of `module`'s top-level package (a plug-in's code may sit in any module
    of it), each with its path inside the package, or the module's own file when it is not in a
    package; [] when it cannot be found."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(
            (f"{top}/{p.relative_to(root).as_posix()}", p)
            for root in map(Path, spec.submodule_search_locations)
            for p in root.rglob("*.py")
            if "__pycache__" not in p.parts
        )
    origin = Path(spec.origin) if spec.origin else None
    return [(origin.name, origin)] if origin is not None and origin.is_file() else []


def source_digest(module: str) -> str | None:
    """SHA-256 over the package's Python files, each by its path inside the package and its
    bytes; None when no source is found (a compiled-only install)."""
    files = source_files(module)
    if not files:
        return None
    h = hashlib.sha256()
    for inside, path in files:
        data = path.read_bytes()
        h.update(f"{inside}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def plugin(name: str, version: str | None, module: str) -> dict:
    """A plug-in as results.json and code_version.json record it."""
    return {"name": name, "version": version, "digest": source_digest(module)}
