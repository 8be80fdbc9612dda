"""Convert the final-checkpoint runs of Li, Kudugunta & Zettlemoyer 2025 ("(Mis)Fitting: A Survey
of Scaling Laws", arXiv 2502.18969), as github.com/hadasah/scaling_laws holds them, into a
runs.csv for bench/misfit_splits.py. The runs are not shipped with andrea (the repository has no
licence): run this on your own clone and pass the folder it writes as --source.

Standard library only; the tests never run it on the source. It reads the source through `git
show COMMIT:PATH`, so a bare mirror without a work tree serves, and only at the commit the
protocol was declared on (`COMMIT`; another is refused):

    python bench/data/li2025misfit/convert.py REPO --commit 1f3708c --out DIR

Read: `RAW` (one final checkpoint a row: `loss`, `C4 Eval Loss`, `N`, `N_no_emb`, `D`, `C_6ND`,
`C_6ND_no_emb`, `portion_steps_elapsed`, `model`, `train_tokens`, `total_steps`,
`current_steps`, `total_epochs`, `current_epoch`, `peak_lr`, `sweep`; `C` and `C_no_emb`, which
add the attention's FLOPs, are not read) and each model's `CONFIG` (hidden_dim, n_layers,
vocab_size, seq_len, weight_tying).

Written: DIR/runs.csv, every row of `RAW`, ordered by params, tokens, peak_lr, sweep, with
`best` 1 on one row of each (model, tokens): the lowest loss over its rows (its peak learning
rates and the sweeps that ran it again; a tie goes to the first in that order), 0 elsewhere, and
`draws` the number of rows it was chosen from. Checked on every row: the final checkpoint
(current_steps = total_steps, current_epoch = total_epochs, portion_steps_elapsed 1.0), tokens
D = train_tokens = total_steps x 512 sequences x 2048 tokens, params N and N_no_emb the model
config's count as the authors' parse_results.py makes it (12·d²·L + (2L+1)·d, plus 2·V·d for the
untied input embedding and output head in N), C_6ND = 6·N·D and C_6ND_no_emb = 6·N_no_emb·D,
`loss` equal to `C4 Eval Loss`, loss and peak_lr finite and positive, the header as `COLUMNS_IN`.
Anything else is refused with its line.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
from pathlib import Path

# bench/data/convert_io.py, shared with other converters (run as scripts, not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convert_io import git, write  # noqa: E402

COMMIT = "1f3708c0a12df0effb0ee906b1da5f9f0ff4f4f1"  # the commit the protocol was declared on
RAW = "data/scaling_results_last_ckpt_only.csv"
CONFIG = "open_lm/model_configs/{}.json"
COLUMNS_IN = (
    "loss", "C4 Eval Loss", "N", "N_no_emb", "D", "C", "C_no_emb", "C_6ND", "C_6ND_no_emb",
    "portion_steps_elapsed", "model", "train_tokens", "total_steps", "current_steps",
    "total_epochs", "current_epoch", "peak_lr", "sweep",
)  # fmt: skip
COLUMNS = (
    "model", "params", "params_no_embed", "tokens", "steps", "peak_lr", "sweep", "loss_val",
    "best", "draws",
)  # fmt: skip
TOKENS_PER_STEP = 512 * 2048  # the global batch, sequences x their length (slurm_constants.py)
MODEL = re.compile(r"misfitting_\d+[mb]")


def counts(config: dict) -> tuple[int, int]:
    """(N, N_no_emb) of a model config, as the authors' parse_results.py counts them: attention
    4·d²·L, feed-forward 8·d²·L, norms (2L+1)·d; N adds 2·V·d (input embedding and output head,
    untied). Refused: a config with tied weights or another context than 2048."""
    if config.get("weight_tying") is not False or config.get("seq_len") != 2048:
        raise ValueError(f"{config}: weight_tying must be false and seq_len 2048")
    d, layers, vocab = config["hidden_dim"], config["n_layers"], config["vocab_size"]
    no_emb = 12 * d * d * layers + (2 * layers + 1) * d
    return no_emb + 2 * vocab * d, no_emb


def _int(record: dict, column: str, line: int) -> int:
    try:
        return int(record[column])
    except ValueError:
        raise ValueError(
            f"line {line}: {column} {record[column]!r} is not a whole number"
        ) from None


def _positive(record: dict, column: str, line: int) -> float:
    try:
        x = float(record[column])
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"line {line}: {column} {record[column]!r} is not finite and positive")
    return x


def run_row(record: dict, configs: dict, line: int) -> dict:
    """One final checkpoint's row, checked (the module docstring's list)."""
    model = record["model"]
    if not MODEL.fullmatch(model) or model not in configs:
        raise ValueError(f"line {line}: model {model!r}: no misfitting_<size> config of it")
    n, n_no_emb = (_int(record, c, line) for c in ("N", "N_no_emb"))
    if (n, n_no_emb) != counts(configs[model]):
        raise ValueError(f"line {line}: {model}'s N, N_no_emb {n}, {n_no_emb} are not its "
                         f"config's {counts(configs[model])}")  # fmt: skip
    steps, d = _int(record, "total_steps", line), _int(record, "D", line)
    final = (
        _int(record, "current_steps", line) == steps
        and record["current_epoch"] == record["total_epochs"]
        and float(record["portion_steps_elapsed"]) == 1.0
    )
    if not final:
        raise ValueError(f"line {line}: not the run's final checkpoint")
    if not d == _int(record, "train_tokens", line) == steps * TOKENS_PER_STEP:
        raise ValueError(f"line {line}: D, train_tokens and total_steps x {TOKENS_PER_STEP} differ")
    if (_int(record, "C_6ND", line), _int(record, "C_6ND_no_emb", line)) != (
        6 * n * d,
        6 * n_no_emb * d,
    ):
        raise ValueError(f"line {line}: C_6ND or C_6ND_no_emb is not 6·N·D")
    loss = _positive(record, "loss", line)
    if _positive(record, "C4 Eval Loss", line) != loss:
        raise ValueError(f"line {line}: loss and C4 Eval Loss differ")
    lr = _positive(record, "peak_lr", line)
    return dict(
        model=model, params=n, params_no_embed=n_no_emb, tokens=d, steps=steps,
        peak_lr=repr(lr), sweep=record["sweep"], loss_val=repr(loss),
    )  # fmt: skip


def convert(text: str, configs: dict) -> list[dict]:
    """Every row of the raw file (its text), checked, ordered, with `best` and `draws` (the
    module docstring); `configs`: model -> its config."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS_IN:
        raise ValueError(f"the header is {reader.fieldnames}, not {list(COLUMNS_IN)}")
    rows = [run_row(record, configs, i + 2) for i, record in enumerate(reader)]
    rows.sort(key=lambda r: (r["params"], r["tokens"], float(r["peak_lr"]), r["sweep"]))
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["tokens"]), []).append(r)
    for group in groups.values():
        best = min(group, key=lambda r: float(r["loss_val"]))  # the first of a tie
        for r in group:
            r["best"], r["draws"] = int(r is best), len(group)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone of github.com/hadasah/scaling_laws")
    p.add_argument("--commit", default=COMMIT[:7], help="%(default)s, the declared one")
    p.add_argument("--out", type=Path, required=True, help="the folder runs.csv is written to")
    a = p.parse_args(argv)
    try:
        commit = git(a.repo, "rev-parse", "--verify", f"{a.commit}^{{commit}}").decode().strip()
        if commit != COMMIT:
            p.error(f"--commit {a.commit} is {commit}; the protocol was declared on {COMMIT}")
        text = git(a.repo, "show", f"{commit}:{RAW}").decode()
        models = {r["model"] for r in csv.DictReader(io.StringIO(text))}
        configs = {}
        for m in filter(MODEL.fullmatch, models):
            configs[m] = json.loads(git(a.repo, "show", f"{commit}:{CONFIG.format(m)}"))
        rows = convert(text, configs)
    except (LookupError, ValueError) as e:
        p.error(str(e))  # one line, exit status 2, nothing written
    a.out.mkdir(parents=True, exist_ok=True)
    write(rows, a.out / "runs.csv", COLUMNS)
    chosen = sum(r["best"] for r in rows)
    print(f"{len(rows)} runs, {chosen} chosen (one per model and tokens) -> {a.out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
