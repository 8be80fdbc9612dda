"""Convert Pandey 2024's gzip-scaling training runs, as IBM/ColPret redistributes them, into
runs.csv beside this file.

Standard library only; the tests never run it on the source. Run it once, by hand, on a clone of
github.com/IBM/ColPret (README.md here: the commit); it reads the file through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/pandey2024/convert.py REPO --commit 16f23bb --out bench/data/pandey2024

`raw_data/gzip/results_new.jsonl` holds one JSON object a line, one training run each: a Llama
model (`model_stats`: vocabulary 32,001, context 256; `model_size` its parameter count) trained
for one epoch (`num_epochs`) on the first `token_ct` tokens of one of five synthetic PCFG datasets
(`dataset_name` `/gzipscale-G-10M`, `dataset_gzip` the median and sd of its gzip
compressibility), with `train_loss` one value per training step (batches of 32 sequences) and
`valid_loss` one value per batch of the one validation pass after training (4 batches of the
100 held-out sequences, 32+32+32+4; 2 for the shortest runs, whose validation set is 39
sequences, 32+7: README.md, how this was established).

Written: one row per run, ordered by dataset, params, tokens; `loss_val` the validation pass's
mean loss, each batch's weighted by its sequences (`WEIGHTS`). Checked: every line a JSON object
with exactly `KEYS`; the dataset among `DATASETS`, its gzip median its label to two decimals and
the same on every line; the shape among `SHAPES` (vocabulary, context as `STATS`); `model_size`
the Llama count of that shape (embeddings and untied output head included); one epoch; the
training steps among `STEPS`, the tokens at most 32 sequences of 256 a step and at least 90 % of
that, the same for every model of a dataset at a step count; as many validation values as
`WEIGHTS` says; every loss finite and positive; the 5 x 6 x 5 grid whole, each run once.
Anything else is refused with the line it came from.
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

SOURCE = "raw_data/gzip/results_new.jsonl"
KEYS = {
    "dataset_name",
    "dataset_gzip",
    "token_ct",
    "model_stats",
    "model_size",
    "num_epochs",
    "train_loss",
    "valid_loss",
}
COLUMNS = ("dataset", "gzip", "model", "params", "params_no_embed", "tokens", "loss_val")
DATASETS = ("0.12", "0.23", "0.33", "0.45", "0.61")  # `/gzipscale-G-10M`, least complex first
# (hidden, intermediate, layers, heads) -> the model's name, smallest first
SHAPES = {
    (64, 128, 2, 1): "64x2",
    (128, 256, 4, 2): "128x4",
    (256, 512, 6, 4): "256x6",
    (512, 1024, 10, 8): "512x10",
    (1024, 2048, 20, 16): "1024x20",
    (2048, 4096, 30, 32): "2048x30",
}
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
STATS = {"vocab_size": 32001, "max_position_embeddings": 256}
BATCH, CONTEXT = 32, 256  # sequences a training step, tokens a sequence
# training steps of a run -> the sequences of each batch of its validation pass
WEIGHTS = {13: (32, 7), 123: (32, 32, 32, 4), 245: (32, 32, 32, 4), 611: (32, 32, 32, 4)}
WEIGHTS[1160] = WEIGHTS[123]
STEPS = tuple(WEIGHTS)


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def counts(stats: dict) -> tuple[int, int]:
    """(all parameters, those outside the embeddings and the output head) of a Llama of this
    shape: untied input and output embeddings, per layer four attention and three MLP matrices
    and two norms, one final norm."""
    v, h, i, n = (
        stats[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
    )
    body = n * (4 * h * h + 3 * h * i + 2 * h) + h
    return 2 * v * h + body, body


def _losses(where: str, name: str, values) -> list[float]:
    if not (isinstance(values, list) and values):
        raise ValueError(f"{where}: {name} is not a list of losses")
    for x in values:
        if (
            isinstance(x, bool)
            or not isinstance(x, (int, float))
            or not (math.isfinite(x) and x > 0)
        ):
            raise ValueError(f"{where}: {name} holds {x!r}, not a finite positive loss")
    return [float(x) for x in values]


def _run(line: int, r) -> dict:
    """One run's row, or ValueError naming the line."""
    where = f"line {line}"
    if not isinstance(r, dict) or set(r) != KEYS:
        keys = sorted(r) if isinstance(r, dict) else type(r).__name__
        raise ValueError(f"{where}: keys {keys}, expected {sorted(KEYS)}")
    name = r["dataset_name"]
    label = name.removeprefix("/gzipscale-").removesuffix("-10M")
    if label not in DATASETS or name != f"/gzipscale-{label}-10M":
        raise ValueError(f"{where}: unknown dataset {name!r}")
    g = r["dataset_gzip"]
    if not (isinstance(g, list) and len(g) == 2 and all(isinstance(x, float) for x in g)):
        raise ValueError(f"{where}: dataset_gzip {g!r}, not (median, sd)")
    if f"{g[0]:.2f}" != label:
        raise ValueError(f"{where}: gzip median {g[0]!r} is not the dataset's {label}")
    stats = r["model_stats"]
    shape = tuple(stats.get(k) for k in SHAPE_KEYS) if isinstance(stats, dict) else None
    if shape not in SHAPES or set(stats) != {*SHAPE_KEYS, *STATS}:
        raise ValueError(f"{where}: unknown model {stats!r}")
    if any(stats[k] != v for k, v in STATS.items()):
        raise ValueError(f"{where}: vocabulary or context not {STATS}")
    params, body = counts(stats)
    if r["model_size"] != params:
        raise ValueError(f"{where}: model_size {r['model_size']!r}, its shape counts {params}")
    if r["num_epochs"] != 1:
        raise ValueError(f"{where}: {r['num_epochs']!r} epochs, not 1")
    train = _losses(where, "train_loss", r["train_loss"])
    valid = _losses(where, "valid_loss", r["valid_loss"])
    steps, tokens = len(train), r["token_ct"]
    if steps not in WEIGHTS:
        raise ValueError(f"{where}: {steps} training steps, not one of {STEPS}")
    if not (isinstance(tokens, int) and 0.9 < tokens / (steps * BATCH * CONTEXT) <= 1):
        raise ValueError(f"{where}: {tokens!r} tokens in {steps} steps of {BATCH}x{CONTEXT}")
    weights = WEIGHTS[steps]
    if len(valid) != len(weights):
        raise ValueError(
            f"{where}: {len(valid)} validation batches, a run of {steps} steps has {len(weights)}"
        )
    loss = sum(w * x for w, x in zip(weights, valid)) / sum(weights)
    return {
        "dataset": label,
        "gzip": repr(g[0]),
        "model": SHAPES[shape],
        "params": params,
        "params_no_embed": body,
        "tokens": tokens,
        "loss_val": repr(loss),
        "_steps": steps,
        "_sd": g[1],
    }


def rows(text: str) -> list[dict]:
    """The runs, ordered by dataset, params, tokens."""
    runs: dict[tuple[str, str, int], dict] = {}
    for line, raw in enumerate(text.splitlines(), start=1):
        try:
            r = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"line {line}: not JSON") from None
        run = _run(line, r)
        key = (run["dataset"], run["model"], run["_steps"])
        if key in runs:
            raise ValueError(f"line {line}: dataset {key[0]}, model {key[1]}, {key[2]} steps twice")
        for other in runs.values():
            if other["dataset"] == run["dataset"]:
                if (other["gzip"], other["_sd"]) != (run["gzip"], run["_sd"]):
                    raise ValueError(f"line {line}: dataset {key[0]}'s gzip differs between lines")
                if other["_steps"] == run["_steps"] and other["tokens"] != run["tokens"]:
                    raise ValueError(
                        f"line {line}: dataset {key[0]} at {key[2]} steps: "
                        f"{run['tokens']} tokens, {other['tokens']} elsewhere"
                    )
        runs[key] = run
    grid = [(d, m, s) for d in DATASETS for m in SHAPES.values() for s in STEPS]
    missing = [k for k in grid if k not in runs]
    if missing:
        d, m, s = missing[0]
        raise ValueError(
            f"{len(missing)} runs missing, the first: dataset {d}, model {m}, {s} steps"
        )
    order = {m: k for k, m in enumerate(SHAPES.values())}
    out = sorted(runs.values(), key=lambda r: (r["dataset"], order[r["model"]], r["tokens"]))
    return [{c: r[c] for c in COLUMNS} for r in out]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of IBM/ColPret")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out = rows(git(a.repo, "show", f"{a.commit}:{SOURCE}").decode())
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    print(
        f"wrote {a.out / 'runs.csv'}: {len(out)} runs, {len(DATASETS)} datasets x "
        f"{len(SHAPES)} models x {len(STEPS)} token counts"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
