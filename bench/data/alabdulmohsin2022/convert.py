"""Convert the language-modelling learning curves of Alabdulmohsin, Neyshabur & Zhai 2022, as
IBM/ColPret redistributes them, into runs.csv beside this file.

Standard library only; the tests never run it on the source. Run it once, by hand, on a clone of
github.com/IBM/ColPret (README.md here: the commit); it reads the file through
`git show COMMIT:PATH`, so a bare mirror without a work tree serves:

    python bench/data/alabdulmohsin2022/convert.py REPO --commit 16f23bb \
        --out bench/data/alabdulmohsin2022

`aggregated_eval/revisiting_lang.csv` is the paper's language benchmark file (its repository,
google-research/google-research, `revisiting_neural_scaling_laws/data/benchmark.lang.csv`):
columns `Domain`, `Task`, `Model`, `Seen Examples`, `Loss`, `Training`. Read here: the rows of
`Domain` LM (task `val_loss`), five decoder-only models named by their parameter count
(`1.68e+07` ... `1.07e+09`), each one learning curve: `Seen Examples` the tokens seen (the
training step times 2**18 tokens a step), `Loss` the validation loss as the authors rescaled it
(every curve reads 0.999 at its first point), `Training` 1 where the authors fitted their
per-curve estimators and 0 where they scored its extrapolation. The file holds every LM curve
four times over, identical: the copies are collapsed, and copies that disagree are refused.

Written: one row per (model, tokens), ordered by params then tokens, without each curve's first
point (the rescaling's anchor, 0.999 by construction: no measurement). Checked: the header; every
LM row's task; the model among `MODELS`; the tokens a positive whole multiple of `BATCH_TOKENS`;
the loss finite and positive; `Training` 0 or 1, and 1 on a prefix of each curve only; the
anchor at `ANCHOR_TOKENS` reading `ANCHOR_LOSS`; each model's count of points (`POINTS`, as the
source has them at 16f23bb). Anything else is refused with the line it came from.
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

SOURCE = "aggregated_eval/revisiting_lang.csv"
HEADER = ("Domain", "Task", "Model", "Seen Examples", "Loss", "Training")
COLUMNS = ("model", "params", "tokens", "step", "loss_val", "training")
BATCH_TOKENS = 2**18  # the tokens of one step: every Seen Examples is a whole number of them
ANCHOR_TOKENS = 10_000 * BATCH_TOKENS  # each curve's first point, 2.62 B tokens
ANCHOR_LOSS = 0.999  # what every curve reads there, by the authors' rescaling
# the models (the source's names), smallest first, and each one's distinct points at 16f23bb
POINTS = {"1.68e+07": 119, "1.34e+08": 24, "2.62e+08": 44, "4.53e+08": 21, "1.07e+09": 21}
MODELS = tuple(POINTS)


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def _point(line: int, r: dict) -> tuple[str, int, float, int]:
    """(model, tokens, loss, training) of one LM row, or ValueError naming the line."""
    where = f"line {line}"
    if r["Task"] != "val_loss":
        raise ValueError(f"{where}: an LM row of task {r['Task']!r}, not 'val_loss'")
    model = r["Model"]
    if model not in POINTS:
        raise ValueError(f"{where}: unknown model {model!r} (known: {', '.join(MODELS)})")
    try:
        seen = float(r["Seen Examples"])
        loss = float(r["Loss"])
    except (TypeError, ValueError):
        raise ValueError(f"{where}: Seen Examples or Loss is not a number") from None
    if not (seen > 0 and seen.is_integer() and int(seen) % BATCH_TOKENS == 0):
        raise ValueError(f"{where}: {r['Seen Examples']} tokens: not a whole number of steps")
    if not (math.isfinite(loss) and loss > 0):
        raise ValueError(f"{where}: no loss ({r['Loss']!r})")
    if r["Training"] not in ("0", "1"):
        raise ValueError(f"{where}: Training {r['Training']!r}, not 0 or 1")
    return model, int(seen), loss, int(r["Training"])


def rows(text: str) -> tuple[list[dict], int]:
    """The kept points, ordered by params then tokens, and how many source rows were copies."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != HEADER:
        raise ValueError(f"header {reader.fieldnames}, expected {list(HEADER)}")
    points: dict[tuple[str, int], tuple[float, int]] = {}
    copies = 0
    for line, r in enumerate(reader, start=2):
        if r["Domain"] != "LM":
            continue
        model, tokens, loss, training = _point(line, r)
        key = (model, tokens)
        if key in points:
            if points[key] != (loss, training):
                raise ValueError(
                    f"line {line}: {model} at {tokens} tokens twice, differing: "
                    f"{points[key]} and {(loss, training)}"
                )
            copies += 1
            continue
        points[key] = (loss, training)
    out = []
    for model in MODELS:
        curve = sorted((t, lt) for (m, t), lt in points.items() if m == model)
        if len(curve) != POINTS[model]:
            raise ValueError(
                f"{model}: {len(curve)} points, the source at 16f23bb has {POINTS[model]}"
            )
        (t0, (l0, _)), rest = curve[0], curve[1:]
        if t0 != ANCHOR_TOKENS or abs(l0 - ANCHOR_LOSS) > 1e-9:
            raise ValueError(
                f"{model}: first point {l0!r} at {t0} tokens, not the rescaling's anchor"
            )
        flags = [training for _, (_, training) in curve]
        if flags != sorted(flags, reverse=True):
            raise ValueError(f"{model}: Training is 1 on no prefix of the curve")
        params = int(float(model))
        out += [
            {
                "model": model,
                "params": params,
                "tokens": tokens,
                "step": tokens // BATCH_TOKENS,
                "loss_val": repr(loss),
                "training": training,
            }
            for tokens, (loss, training) in rest
        ]
    return out, copies


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone (or bare mirror) of IBM/ColPret")
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    out, copies = rows(git(a.repo, "show", f"{a.commit}:{SOURCE}").decode())
    a.out.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=a.out, suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(out)
    os.replace(tmp, a.out / "runs.csv")
    print(
        f"wrote {a.out / 'runs.csv'}: {len(out)} points of {len(MODELS)} models "
        f"({copies} repeated source rows collapsed, {len(MODELS)} anchors at "
        f"{ANCHOR_TOKENS / 1e9:.2f} B tokens dropped)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
