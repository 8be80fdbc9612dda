"""Convert the Marin scaling ladder's isoFLOP runs, as Open-Athena/scaling-law-analysis vendors
them, into a runs.csv for bench/marin_splits.py. The runs are not shipped with andrea (the
repository that holds them has no licence): run this on your own clone and pass the folder it
writes as --source.

Standard library only; the tests never run it on the source. It reads the three raw CSVs through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/marin2026/convert.py REPO --commit 3e0656e --out DIR

Each raw file (`RAW.format(dataset)`, dataset one of `DATASETS`) holds one wandb run a row:
`Name` (`...isoflop-BUDGET-dWIDTH-LLAYERS-BBATCH-DATASET...`), `parameter_count`,
`throughput/total_tokens`, `eval/paloma/macro_loss`, `model.hidden_dim`, `model.num_layers`
and columns not read here (FLOPs, batch size, learning rate, steps).

Written: DIR/runs.csv, one row per run, ordered by dataset, params, tokens. Dropped: the
`validation-optimal` runs (one per budget in comma and nemotron; their names count the budget
in another convention, and they repeat a shape of the sweep). Checked: the name holds the
model's `dWIDTH-LLAYERS` and a budget, a model's params are the same on all its rows, no name is
twice, params, tokens and loss are finite and positive.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import sys
from pathlib import Path

# bench/data/convert_io.py, shared with other converters (run as scripts, not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convert_io import git, write  # noqa: E402

RAW = "data/isoflops/extract/marin_202603/raw/isoflop-{}.csv"
DATASETS = ("comma", "dclm", "nemotron")
COLUMNS = ("data", "model", "budget", "params", "tokens", "loss_paloma", "name")
SKIP = "validation-optimal"
NAME = re.compile(r"-(\d+(?:\.\d+)?e[+-]\d+)-d(\d+)-L(\d+)-")


def run_row(dataset: str, record: dict) -> dict:
    """One run's row, its name checked against its shape."""
    name = record["Name"]
    m = NAME.search(name)
    if not m:
        raise ValueError(f"{name!r}: no -BUDGET-dWIDTH-LLAYERS- in the name")
    budget, width, layers = m.groups()
    if (width, layers) != (record["model.hidden_dim"], record["model.num_layers"]):
        raise ValueError(f"{name!r}: the name's shape is not its d{record['model.hidden_dim']}")
    params = int(record["parameter_count"])
    tokens = int(record["throughput/total_tokens"])
    loss = float(record["eval/paloma/macro_loss"])
    if not (params > 0 and tokens > 0 and math.isfinite(loss) and loss > 0):
        raise ValueError(f"{name!r}: params, tokens and loss must be finite and positive")
    model = f"d{width}-L{layers}"
    return dict(
        data=dataset, model=model, budget=budget, params=params, tokens=tokens,
        loss_paloma=repr(loss), name=name,
    )  # fmt: skip


def convert(dataset: str, text: str) -> list[dict]:
    """The rows of one raw file (its text), the validation-optimal runs dropped, checked."""
    rows, names, params = [], set(), {}
    for record in csv.DictReader(io.StringIO(text)):
        if SKIP in record["Name"]:
            continue
        row = run_row(dataset, record)
        if row["name"] in names:
            raise ValueError(f"{row['name']!r}: twice")
        names.add(row["name"])
        if params.setdefault(row["model"], row["params"]) != row["params"]:
            raise ValueError(f"{dataset} {row['model']}: params differ between its runs")
        rows.append(row)
    return sorted(rows, key=lambda r: (r["params"], r["tokens"]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone of github.com/Open-Athena/scaling-law-analysis")
    p.add_argument("--commit", default="3e0656e")
    p.add_argument("--out", type=Path, required=True, help="the folder runs.csv is written to")
    a = p.parse_args(argv)
    rows = []
    try:
        for dataset in DATASETS:
            text = git(a.repo, "show", f"{a.commit}:{RAW.format(dataset)}").decode()
            rows += convert(dataset, text)
    except (LookupError, ValueError) as e:
        p.error(str(e))  # one line, exit status 2, nothing written
    a.out.mkdir(parents=True, exist_ok=True)
    write(rows, a.out / "runs.csv", COLUMNS)
    print(f"{len(rows)} runs -> {a.out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
