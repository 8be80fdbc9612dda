"""What five converters share (bench/data/*/convert.py of Beck et al.'s xLSTM runs, Llama 3's
isoFLOP points, (Mis)Fitting, the Marin ladder and OpenEuroLLM's grid): git's output, for those
that read their source through `git show`, and a runs.csv written whole or not at all. Standard
library only, like the converters; each puts this folder on its path, since they run as scripts
(`python bench/data/NAME/convert.py`), not as modules of a package."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> bytes:
    """git's output; its failure (no such repository, commit or file) a LookupError naming it."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if proc.returncode:
        why = (proc.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise LookupError(f"git {' '.join(args)} in {repo}: {why}")
    return proc.stdout


def write(rows: list[dict], path: Path, columns: tuple[str, ...]) -> None:
    """Written whole or not at all: a temporary file beside it, then renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
