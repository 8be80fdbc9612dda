"""Convert the Gemstones suite's cooldown runs (McLeish et al. 2025), as the source's fitting file
holds them, into runs.csv beside this file.

Standard library only; the tests never run it on the source. Run it once, by hand, on a clone of
github.com/mcleish7/gemstone-scaling-laws (README.md here: the commit); it reads the file through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/mcleish2025/convert.py REPO --commit 5f42047 --out bench/data/mcleish2025

`wandb_dfs/wandb_df_for_fitting_cool_end.jsonl` holds one JSON object a line, one cooldown run's
end: `run_name` (`PyGemma-WIDTHxDEPTH_pretrain`), `params_active_precise`, `width`, `depth`,
`tokens`, `step`, `final_loss` (the validation loss the run logged at that step) and timing
columns not read here. Each run branched from its model's main run at a multiple of 2,385 steps
(10 B tokens) and ended at one of the ten steps in `ENDS` (about 10 % past the branch).

Written: one row per line, ordered by params then tokens. Checked: the tokens are the step times
the batch (2,048 sequences of 2,048 tokens), the step is one of `ENDS`, a model's params, width
and depth are the same on all its rows, no model has one step twice, and the loss is finite.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path

FILE = "wandb_dfs/wandb_df_for_fitting_cool_end.jsonl"
COLUMNS = ("model", "width", "depth", "params", "tokens", "step", "loss_val")
BATCH_TOKENS = 2048 * 2048  # sequences per step x their length
# the cooldown runs' last steps: about 10 % past each branch at 2,385 k steps (k = 1..10)
ENDS = (2622, 5246, 7870, 10493, 13116, 15740, 18364, 20987, 23610, 26223)
PREFIX, SUFFIX = "PyGemma-", "_pretrain"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def model_name(run_name: str) -> str:
    """`PyGemma-1024x28_pretrain` -> `1024x28` (the suite's WIDTHxDEPTH name)."""
    if not (run_name.startswith(PREFIX) and run_name.endswith(SUFFIX)):
        raise ValueError(f"{run_name!r}: not a PyGemma-WIDTHxDEPTH_pretrain run")
    return run_name[len(PREFIX) : -len(SUFFIX)]


def run_row(record: dict) -> dict:
    """One cooldown run's row, checked against the suite's batch and cooldown steps."""
    model = model_name(record["run_name"])
    step, tokens = int(record["step"]), int(record["tokens"])
    if step not in ENDS:
        raise ValueError(f"{model}: step {step} is not a cooldown's end")
    if tokens != step * BATCH_TOKENS:
        raise ValueError(f"{model}: tokens {tokens} != step {step} x {BATCH_TOKENS}")
    width, depth = int(record["width"]), int(record["depth"])
    if model != f"{width}x{depth}":
        raise ValueError(f"{model}: width {width}, depth {depth}")
    loss = float(record["final_loss"])
    if not math.isfinite(loss):
        raise ValueError(f"{model}: no loss at step {step}")
    return {
        "model": model,
        "width": width,
        "depth": depth,
        "params": int(record["params_active_precise"]),
        "tokens": tokens,
        "step": step,
        "loss_val": repr(loss),
    }


def rows(text: str) -> list[dict]:
    """Every line of the source file as a row, ordered by params then tokens."""
    out = [run_row(json.loads(line)) for line in text.splitlines() if line.strip()]
    seen: dict[str, tuple] = {}
    steps: set[tuple[str, int]] = set()
    for r in out:
        shape = (r["width"], r["depth"], r["params"])
        if seen.setdefault(r["model"], shape) != shape:
            raise ValueError(f"{r['model']}: params or shape differ between its rows")
        if (r["model"], r["step"]) in steps:
            raise ValueError(f"{r['model']}: step {r['step']} twice")
        steps.add((r["model"], r["step"]))
    return sorted(out, key=lambda r: (r["params"], r["tokens"]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of gemstone-scaling-laws")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out = rows(git(a.repo, "show", f"{a.commit}:{FILE}").decode())
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    models = len({r["model"] for r in out})
    print(f"wrote {a.out / 'runs.csv'}: {len(out)} cooldown runs of {models} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
