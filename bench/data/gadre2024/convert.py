"""Convert Gadre et al. 2024's loss evaluations into runs.csv beside this file.

Standard library only; the tests never run it. Run it once, by hand, on a clone of
github.com/mlfoundations/scaling (README.md here: the commit); it reads the files through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/gadre2024/convert.py REPO --commit a003c49 --out bench/data/gadre2024

Each `exp_data/models/<name>.json` is one trained model: `dataset_name`, `hyperparameters`
(`model`, `params`, `params_no_embed`, `tokens`, `chinchilla_multiplier`, ...) and `results`, one
loss evaluation per validation set (`val_data`). Written: one row per model, the loss on the C4
eval set (`training/eval_data/c4_val/...`) and on the Paloma split of the model's own training
corpus, every float as repr(float(x)), rows ordered by dataset, params, then multiplier.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import tempfile
from pathlib import Path

COLUMNS = (
    "dataset",
    "model",
    "params",
    "params_no_embed",
    "tokens",
    "multiplier",
    "loss_c4",
    "loss_paloma_own",
)
# the repository's training sets, and the short name a split carries
DATASETS = {"c4_original": "c4", "rpj": "rpj", "rw_original": "rw"}
# the Paloma split of each training corpus: its in-distribution validation loss
OWN_PALOMA = {
    "c4_original": "paloma_c4_en",
    "rpj": "paloma_redpajama",
    "rw_original": "paloma_falcon-refinedweb",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def eval_set(result: dict) -> str:
    """The evaluation a result is of: the folder its validation shards lie in."""
    return result["val_data"][0].split("/")[-2]


def row(model: dict) -> dict:
    h = model["hyperparameters"]
    losses = {eval_set(r): r["loss"] for r in model["results"]}
    if len(losses) != len(model["results"]):
        raise ValueError(f"{model['name']}: two results of one evaluation set")
    name = Path(h["model"]).stem if h["model"].endswith(".json") else h["model"]
    return {
        "dataset": DATASETS[model["dataset_name"]],
        "model": name,
        "params": int(h["params"]),
        "params_no_embed": int(h["params_no_embed"]),
        "tokens": int(h["tokens"]),
        "multiplier": repr(float(h["chinchilla_multiplier"])),
        "loss_c4": repr(float(losses["c4_val"])),
        "loss_paloma_own": repr(float(losses[OWN_PALOMA[model["dataset_name"]]])),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of mlfoundations/scaling")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    paths = [
        x
        for x in git(a.repo, "ls-tree", "-r", "--name-only", a.commit).splitlines()
        if x.startswith("exp_data/models/") and x.endswith(".json")
    ]
    rows = [row(json.loads(git(a.repo, "show", f"{a.commit}:{x}"))) for x in paths]
    order = list(DATASETS.values())
    rows.sort(key=lambda r: (order.index(r["dataset"]), r["params"], float(r["multiplier"])))
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, a.out / "runs.csv")
    print(f"wrote {a.out / 'runs.csv'}: {len(rows)} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
