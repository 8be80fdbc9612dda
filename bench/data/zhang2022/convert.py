"""Convert the OPT models' validation perplexity along training, as collected in IBM/ColPret, into
runs.csv beside this file.

Standard library only; the tests never run it. Run it once, by hand, on a clone of
github.com/IBM/ColPret (README.md here: the commit); it reads the file through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/zhang2022/convert.py REPO --commit 16f23bb --out bench/data/zhang2022

`aggregated_eval/opt_trajectories.csv` holds the validation perplexity of the intermediate
checkpoints of six OPT models (Zhang et al. 2022, arXiv 2205.01068) that Xia et al. 2023
("Training Trajectories of Language Models Across Scales", arXiv 2212.09803) evaluated:
`model_name` (OPT), `model_size` (125m, 1.3b, 6.7b, 13b, 30b, 175b), `steps`, `num_token`
(log10 of the tokens seen), `flops` (log10 of 6·params·tokens), `ppl`, one checkpoint a row.

Written: one row per checkpoint at `MIN_TOKENS` tokens or more, the loss the perplexity's natural
log. The tokens are the steps times the model's batch size (OPT's Table 1, `BATCH`), checked
against `num_token`; the params are the model's nominal size, checked against `flops`.
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

SOURCE = "aggregated_eval/opt_trajectories.csv"
COLUMNS = ("model", "params", "tokens", "step", "ppl", "loss_val")
MIN_TOKENS = 30 * 10**9  # 10 % of the 300 B tokens OPT's schedule runs over: earlier dropped
# the models, smallest first: nominal params and batch size in tokens (OPT's Table 1)
MODELS = {
    "125m": (125 * 10**6, 500_000),
    "1.3b": (1_300 * 10**6, 1_000_000),
    "6.7b": (6_700 * 10**6, 2_000_000),
    "13b": (13_000 * 10**6, 4_000_000),
    "30b": (30_000 * 10**6, 4_000_000),
    "175b": (175_000 * 10**6, 2_000_000),
}
TOL = 1e-6  # |log10| agreement asked of num_token and flops


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def rows(text: str) -> tuple[list[dict], int]:
    """The kept checkpoints, ordered by params then tokens, and how many were dropped."""
    out, dropped = [], 0
    for r in csv.DictReader(io.StringIO(text)):
        if r["model_name"] != "OPT" or r["model_size"] not in MODELS:
            raise ValueError(f"unexpected model: {r['model_name']} {r['model_size']}")
        params, batch = MODELS[r["model_size"]]
        step = int(r["steps"])
        tokens = step * batch
        if abs(math.log10(tokens) - float(r["num_token"])) > TOL:
            raise ValueError(f"{r['model_size']} step {step}: tokens {tokens} vs {r['num_token']}")
        if abs(math.log10(6 * params * tokens) - float(r["flops"])) > TOL:
            raise ValueError(f"{r['model_size']} step {step}: flops vs {r['flops']}")
        if tokens < MIN_TOKENS:
            dropped += 1
            continue
        ppl = float(r["ppl"])
        out.append(
            {
                "model": r["model_size"],
                "params": params,
                "tokens": tokens,
                "step": step,
                "ppl": repr(ppl),
                "loss_val": repr(math.log(ppl)),
            }
        )
    order = list(MODELS)
    out.sort(key=lambda r: (order.index(r["model"]), r["tokens"]))
    return out, dropped


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of IBM/ColPret")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out, dropped = rows(git(a.repo, "show", f"{a.commit}:{SOURCE}").decode())
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    print(
        f"wrote {a.out / 'runs.csv'}: {len(out)} checkpoints of {len(MODELS)} models "
        f"({dropped} before {MIN_TOKENS / 1e9:.0f} B tokens dropped)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
