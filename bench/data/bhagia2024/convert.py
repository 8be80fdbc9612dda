"""Convert the OLMo ladder's runs (Bhagia et al. 2024), as logged in allenai/OLMo, into runs.csv
beside this file.

Standard library only; the tests never run it. Run it once, by hand, on a clone of
github.com/allenai/OLMo (README.md here: the commit, on its branch `ladder-1xC`); it reads the
files through `git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/bhagia2024/convert.py REPO --commit 4c37f5b --out bench/data/bhagia2024

`scripts/scaling/data/peteish-moreeval/SIZE-LENGTH.csv` holds one ladder run's evaluations along
training, one row an evaluation: `_step`, `throughput/total_tokens`, `batch_size_in_tokens`,
`optim/learning_rate_group0`, `learning_rate_peak`, `eval/c4_en-validation/CrossEntropyLoss` and
many more. For the 1xC length the run's file is `SIZE-1xC-rerun.csv` (the one the source's own
`scripts/scaling/final_moredata.json` reads; the same run and steps as `SIZE-1xC.csv`, evaluated
on more held-out sets).

Written: one row per run, its last evaluation (the final checkpoint). The tokens are checked to
be the step times the batch size and the length's multiple of 20 tokens per parameter (within
1 %: each run takes about ten steps past it), and the learning rate at the last step to be 10 %
of its peak (the cosine schedule's end: the run finished).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import subprocess
import tempfile
from pathlib import Path

FOLDER = "scripts/scaling/data/peteish-moreeval"
LOSS = "eval/c4_en-validation/CrossEntropyLoss"
COLUMNS = ("model", "length", "params", "tokens", "step", "batch_tokens", "loss_c4")
# the ladder's sizes, smallest first: the source's names and its parameter counts
# (scripts/ladder_peteish.py's MODEL_PARAMS, the n of scripts/scaling/final_moredata.json)
MODELS = {
    "190M": 190_354_176,
    "370M": 371_262_464,
    "760M": 758_220_288,
    "1B": 1_279_395_840,
    "3B": 3_169_537_280,
}
# the lengths, in multiples of 20 tokens per parameter (1xC), and the file each is read from
LENGTHS = {"0.5xC": 0.5, "1xC": 1.0, "2xC": 2.0, "5xC": 5.0, "10xC": 10.0}
FILE = {"1xC": "1xC-rerun"}
ALPHA_F = 0.1  # the learning rate's end as a share of its peak (cosine with warmup)
TOL = 0.01  # the tokens asked of each run: its length, to within 1 %


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def run_row(model: str, length: str, text: str) -> dict:
    """One run's row: its last evaluation, checked against the ladder's rule."""
    evals = list(csv.DictReader(io.StringIO(text)))
    if not evals:
        raise ValueError(f"{model}-{length}: no evaluations")
    last = evals[-1]
    params = MODELS[model]
    step = int(float(last["_step"]))
    batch = int(float(last["batch_size_in_tokens"]))
    tokens = int(float(last["throughput/total_tokens"]))
    if tokens != step * batch:
        raise ValueError(f"{model}-{length}: tokens {tokens} != step {step} x batch {batch}")
    planned = LENGTHS[length] * 20 * params
    if abs(tokens / planned - 1) > TOL:
        raise ValueError(f"{model}-{length}: tokens {tokens}, the length asks {planned:.0f}")
    lr, peak = float(last["optim/learning_rate_group0"]), float(last["learning_rate_peak"])
    if not math.isclose(lr, ALPHA_F * peak, rel_tol=1e-6):
        raise ValueError(f"{model}-{length}: last learning rate {lr}, not {ALPHA_F} x {peak}")
    loss = float(last[LOSS])
    if not math.isfinite(loss):
        raise ValueError(f"{model}-{length}: no C4 loss at the last step")
    return {
        "model": model,
        "length": length,
        "params": params,
        "tokens": tokens,
        "step": step,
        "batch_tokens": batch,
        "loss_c4": repr(loss),
    }


def rows(read) -> list[dict]:
    """Every run, ordered by params then tokens; `read(name)` gives a file's text."""
    return [
        run_row(m, x, read(f"{FOLDER}/{m}-{FILE.get(x, x)}.csv")) for m in MODELS for x in LENGTHS
    ]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of allenai/OLMo")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out = rows(lambda path: git(a.repo, "show", f"{a.commit}:{path}").decode())
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    print(f"wrote {a.out / 'runs.csv'}: {len(out)} runs of {len(MODELS)} sizes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
