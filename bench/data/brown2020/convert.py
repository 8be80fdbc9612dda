"""Convert GPT-3's training curves, as digitized in IBM/ColPret, into runs.csv beside this file.

Standard library only; the tests never run it. Run it once, by hand, on a clone of
github.com/IBM/ColPret (README.md here: the commit); it reads the files through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/brown2020/convert.py REPO --commit 16f23bb --out bench/data/brown2020

`raw_data/gpt3/extracted.csv` holds the eight GPT-3 models' loss curves of Brown et al. 2020's
Figure 4.1 (arXiv 2005.14165), read off the figure by ColPret's authors: `model`, `step` (tokens
elapsed, in billions), `train_loss`, `val_loss`, one digitized point a row (one of the two losses
given). `raw_data/gpt3/gpt3_metadata.xlsx` is the paper's Table 2.1 (name, n_params, layers,
d_model, heads, d_head, batch size, learning rate), read here with zipfile and ElementTree.

Written: per model, one row per token count of `GRID` (billions): the median of the digitized
validation losses whose tokens lie within `WINDOW` (relative) of it, and how many there were.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

COLUMNS = ("model", "params", "tokens", "loss_val", "points")
# the checkpoints kept, in billions of tokens: from 10 % of the 300 B every model was trained on
GRID = (30, 40, 50, 60, 80, 100, 125, 150, 200, 250, 300)
WINDOW = 0.05  # a digitized point counts for a grid token count T when |tokens - T| <= 5 % of T
# extracted.csv's model names, smallest first, and the metadata sheet's row of each
MODELS = ("small", "medium", "large", "xl", "2.7b", "6.7b", "13b", "175b")
UNITS = {"M": 10**6, "B": 10**9}
NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main"}


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def count(text: str) -> int:
    """'125M' -> 125000000, '13.0B' -> 13000000000."""
    return round(float(text[:-1]) * UNITS[text[-1]])


def table_2_1(xlsx: bytes) -> dict[str, int]:
    """The metadata sheet's model name (its first column, "GPT-3 Small") -> n_params."""
    z = zipfile.ZipFile(io.BytesIO(xlsx))
    shared = [
        "".join(t.text or "" for t in si.iter(f"{{{NS['m']}}}t"))
        for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall("m:si", NS)
    ]
    out = {}
    for row in ET.fromstring(z.read("xl/worksheets/sheet1.xml")).iter(f"{{{NS['m']}}}row"):
        cells = {}
        for c in row.findall("m:c", NS):
            v = c.find("m:v", NS).text
            cells[c.get("r").rstrip("0123456789")] = shared[int(v)] if c.get("t") == "s" else v
        out[cells["A"]] = count(cells["B"])
    return out


def params_of(model: str, table: dict[str, int]) -> int:
    """extracted.csv's model name -> its n_params, matched as ColPret's read_data matches it
    (the name contained in the sheet's, case ignored), exactly one match."""
    hits = [n for name, n in table.items() if model.lower() in name.lower()]
    if len(hits) != 1:
        raise ValueError(f"{model}: {len(hits)} rows of the metadata sheet match")
    return hits[0]


def rows(extracted: str, table: dict[str, int]) -> list[dict]:
    points: dict[str, list[tuple[float, float]]] = {m: [] for m in MODELS}
    for r in csv.DictReader(io.StringIO(extracted)):
        if r["val_loss"]:
            points[r["model"]].append((float(r["step"]), float(r["val_loss"])))
    out = []
    for m in MODELS:
        n = params_of(m, table)
        for t in GRID:
            near = [loss for s, loss in points[m] if abs(s - t) <= WINDOW * t]
            if not near:
                raise ValueError(f"{m}: no digitized validation loss within {WINDOW:.0%} of {t} B")
            out.append(
                {
                    "model": m,
                    "params": n,
                    "tokens": t * 10**9,
                    "loss_val": repr(float(statistics.median(near))),
                    "points": len(near),
                }
            )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of IBM/ColPret")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    extracted = git(a.repo, "show", f"{a.commit}:raw_data/gpt3/extracted.csv").decode()
    table = table_2_1(git(a.repo, "show", f"{a.commit}:raw_data/gpt3/gpt3_metadata.xlsx"))
    out = rows(extracted, table)
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    print(f"wrote {a.out / 'runs.csv'}: {len(out)} checkpoints of {len(MODELS)} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
