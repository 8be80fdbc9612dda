"""Convert the Transformer (Llama) isoFLOP runs of Beck et al. 2025 ("xLSTM Scaling Laws:
Competitive Performance with Linear Time-Complexity", arXiv 2510.02228), as
github.com/NX-AI/xlstm_scaling_laws holds them, into a runs.csv for bench/xlstm_splits.py. The
runs are not shipped with andrea (the repository has no licence): run this on your own clone and
pass the folder it writes as --source.

The source keeps each run as pickled W&B records holding pandas DataFrames, so this script needs
pandas and numpy (andrea's `hf` extra brings pandas). It unpickles with an allow-list: only the
record class and the pandas and numpy classes a DataFrame is rebuilt from (`ALLOWED`); a pickle
naming anything else is refused before it runs. It reads the source through `git show
COMMIT:PATH`, so a bare mirror without a work tree serves, and only at the commit the protocol
was declared on (`COMMIT`; another is refused):

    python bench/data/beck2025xlstm/convert.py REPO --commit 604bb30 --out DIR

Read: `data/isoflop_llama_ctx{2048,8192,16384}_wandb_data.pkl`, each a dict run tag -> list of
W&B records (name, created_at, config, logs: key -> DataFrame). A run is its name within its tag;
a run with several records (one resumed) is read as the authors' `from_wandb_runs` reads it: the
records ordered by created_at, each log's final value the last record's last row.

Written: DIR/runs.csv, one row a run, ordered by context, budget, params, tokens, with `kept` 1 on
the runs the split reads and 0, with `why`, on the others:
- unfinished: its last `val/.dclm_loss` is not at the step count its name declares (or absent);
- the authors' exclusions (`analysis/isoflop/data.py`, the figures' runs), where they can be
  restated without the authors' FLOP count: at context 8192 a final loss of 3.5 or more ("filter
  global outliers"); at context 2048 the 1,223,934,208-parameter run of the 3e19 budget ("filter
  run with loss spike in 3e19 FLOP budget"). Their other two rules at context 8192 name loss
  levels in FLOP ranges that only records of unfinished or resumed runs reach, read per record;
  read per run as here, no finished run meets them.
Checked on every run: the name's form (`NAME`) and its context the file's; the config's blocks,
width, head size and vocabulary the name's (and 50,304); the logged `model/.num_params` the
recount `params()` makes from the config; the logged global batch the name's; the loss finite and
positive; the tag one of `BUDGETS`; no two kept runs of a context at the same (params, tokens).
Anything else is refused, with the run's name, in one `error:` line (exit status 2, nothing
written), as is a clone without the commit or a file.
"""

from __future__ import annotations

import argparse
import io
import math
import pickle
import re
import sys
from pathlib import Path

# bench/data/convert_io.py, shared with other converters (run as scripts, not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convert_io import git, write  # noqa: E402

COMMIT = "604bb3062d3a7681bb33e467108cb0a6f81267fc"  # the commit the protocol was declared on
RAW = "data/isoflop_llama_ctx{}_wandb_data.pkl"
CONTEXTS = (2048, 8192, 16384)
# run tag -> the isoFLOP budget it was launched at (the authors' `isoflop_counts`, FLOPs that
# count attention; 6·params·tokens lies 0.5-0.8x below them); one tag a budget and context
BUDGETS = {
    "sclaw_llama_iso7": (2048, "6e18"),
    "sclaw_llama_iso8": (2048, "1e19"),
    "sclaw_llama_iso9": (2048, "3e19"),
    "sclaw_llama_iso5": (8192, "6e18"),
    "sclaw_llama_iso6": (8192, "1e19"),
    "sclaw_llama_iso4": (8192, "3e19"),
    "sclaw_llama_iso13": (8192, "1e20"),
    "sclaw_llama_iso12": (16384, "6e18"),
    "sclaw_llama_iso11": (16384, "1e19"),
    "sclaw_llama_iso10": (16384, "3e19"),
}
NAME = re.compile(
    r"dclm_llama_[\d.]+[MB]_ctx(?P<ctx>\d+)_lr(?P<lr>[\d.]+)_steps(?P<steps>\d+)"
    r"_nb(?P<blocks>\d+)_ed(?P<width>\d+)_hd(?P<head>\d+)_gbs(?P<batch>\d+)"
)
VOCAB = 50304
LOSS_KEY = "val/.dclm_loss"
COLUMNS = (
    "context", "budget", "run_tag", "name", "params", "tokens", "steps", "lr", "loss_dclm",
    "kept", "why",
)  # fmt: skip
RECORD = {
    ("mlstm_scaling_laws.common.wandb_run_data", "WandBRunData"),
    ("xlstm_scaling_laws.common.wandb_run_data", "WandBRunData"),
}
# what a pickled DataFrame is rebuilt from (numpy 2, pandas 2 or later); nothing else is loaded
ALLOWED = {
    ("builtins", "slice"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"),
    ("pandas._libs.internals", "_unpickle_block"),
    ("pandas.core.frame", "DataFrame"),
    ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.base", "Index"),
    ("pandas.core.indexes.range", "RangeIndex"),
    ("pandas.core.internals.managers", "BlockManager"),
}


class Record:
    """One W&B record as the source pickled it (its fields set from the pickle's state)."""

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


class _AllowList(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in RECORD:
            return Record
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}")


def load(data: bytes) -> dict:
    """The source file's dict, run tag -> records, through the allow-list."""
    return _AllowList(io.BytesIO(data)).load()


def params(blocks: int, width: int, vocab: int = VOCAB) -> int:
    """The Llama's parameter count as its training code logs it: per block attention 4·d², a
    SwiGLU of width 8d/3 rounded up to a multiple of 64 (3·d·f) and two norms (2d); the input
    embedding and the untied output head 2·V·d; the final norm d."""
    ffn = -(-(8 * width // 3) // 64) * 64
    return blocks * (4 * width * width + 3 * width * ffn + 2 * width) + 2 * vocab * width + width


def _final(records: list, key: str) -> tuple[int, float] | None:
    """(step, value) of a log's last row over the run's records, the last record holding it."""
    frames = [r.logs[key] for r in records if r.logs and key in r.logs and len(r.logs[key])]
    if not frames:
        return None
    last = frames[-1]
    return int(last["_step"].iloc[-1]), float(last[key].iloc[-1])


def run_row(tag: str, name: str, records: list, context: int) -> dict:
    """One run's row, checked (the module docstring's list)."""
    m = NAME.fullmatch(name)
    if not m or int(m["ctx"]) != context:
        raise ValueError(f"{tag} {name}: not a dclm_llama run name at context {context}")
    if tag not in BUDGETS or BUDGETS[tag][0] != context:
        raise ValueError(f"{tag} {name}: the tag is not one of BUDGETS' at context {context}")
    blocks, width, head, batch, steps = (
        int(m[k]) for k in ("blocks", "width", "head", "batch", "steps")
    )
    config = records[0].config
    declared = {
        "model.model_config.num_blocks": blocks,
        "model.model_config.embedding_dim": width,
        "model.model_config.head_dim": head,
        "model.model_config.vocab_size": VOCAB,
    }
    for key, value in declared.items():
        if config.get(key) != value:
            raise ValueError(f"{tag} {name}: config {key} is {config.get(key)!r}, not {value}")
    row = dict(
        context=context, budget=BUDGETS[tag][1], run_tag=tag, name=name,
        params=params(blocks, width), tokens=steps * batch * context, steps=steps, lr=m["lr"],
        loss_dclm="", kept=0, why="",
    )  # fmt: skip
    loss = _final(records, LOSS_KEY)
    if loss is None or loss[0] != steps:
        row["why"] = "unfinished"
        return row
    logged = _final(records, "model/.num_params")
    if logged is None or logged[1] != row["params"]:
        raise ValueError(
            f"{tag} {name}: logged params {logged} are not the recount {row['params']}"
        )
    gbs = _final(records, "dataset/.global_batch_size")
    if gbs is None or gbs[1] != batch:
        raise ValueError(f"{tag} {name}: logged global batch {gbs} is not the name's {batch}")
    if not (math.isfinite(loss[1]) and loss[1] > 0):
        raise ValueError(f"{tag} {name}: the final loss {loss[1]!r} is not finite and positive")
    row["loss_dclm"] = repr(loss[1])
    row["why"] = excluded(row)
    row["kept"] = int(not row["why"])
    return row


def excluded(row: dict) -> str:
    """The authors' exclusion that drops a finished run, or '' (the module docstring)."""
    if row["context"] == 8192 and float(row["loss_dclm"]) >= 3.5:
        return "authors: loss >= 3.5 at context 8192"
    if row["context"] == 2048 and row["budget"] == "3e19" and row["params"] == 1223934208:
        return "authors: loss spike, 3e19 budget at context 2048"
    return ""


def convert(runs: dict, context: int) -> list[dict]:
    """Every run of one context's file (tag -> records), checked, a row each."""
    rows = []
    for tag, records in runs.items():
        by_name: dict[str, list] = {}
        for r in records:
            by_name.setdefault(r.name, []).append(r)
        for name, group in by_name.items():
            rows.append(run_row(tag, name, sorted(group, key=lambda r: r.created_at), context))
    return rows


def unique(rows: list[dict]) -> list[dict]:
    """The rows, refused if two kept runs of one context share (params, tokens)."""
    seen: dict[tuple, str] = {}
    for r in rows:
        if r["kept"]:
            key = (r["context"], r["params"], r["tokens"])
            if key in seen:
                raise ValueError(f"{r['name']} and {seen[key]}: the same params and tokens")
            seen[key] = r["name"]
    return rows


def order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["context"], float(r["budget"]), r["params"], r["tokens"]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone of github.com/NX-AI/xlstm_scaling_laws")
    p.add_argument("--commit", default=COMMIT[:7], help="%(default)s, the declared one")
    p.add_argument("--out", type=Path, required=True, help="the folder runs.csv is written to")
    a = p.parse_args(argv)
    try:
        commit = git(a.repo, "rev-parse", "--verify", f"{a.commit}^{{commit}}").decode().strip()
        if commit != COMMIT:
            p.error(f"--commit {a.commit} is {commit}; the protocol was declared on {COMMIT}")
        rows = []
        for context in CONTEXTS:
            rows += convert(load(git(a.repo, "show", f"{commit}:{RAW.format(context)}")), context)
        rows = order(unique(rows))
    except (LookupError, ValueError, pickle.UnpicklingError) as e:
        p.error(str(e))  # one line, exit status 2, nothing written
    a.out.mkdir(parents=True, exist_ok=True)
    write(rows, a.out / "runs.csv", COLUMNS)
    kept = sum(r["kept"] for r in rows)
    print(f"{len(rows)} runs, {kept} kept -> {a.out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
