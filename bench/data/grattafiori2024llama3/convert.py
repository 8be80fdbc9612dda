"""Convert the isoFLOP points of Llama 3's Figure 2 (Grattafiori et al. 2024, "The Llama 3 Herd
of Models", arXiv 2407.21783), as github.com/Open-Athena/scaling-law-analysis holds them, into a
runs.csv for bench/llama3_splits.py. The points are not shipped with andrea (neither repository
that holds them has a licence): run this on your own clone and pass the folder it writes as
--source.

Standard library only. It reads the source through `git show COMMIT:PATH`, so a bare mirror
without a work tree serves, and only at the commit the protocol was declared on (`COMMIT`;
another is refused):

    python bench/data/grattafiori2024llama3/convert.py REPO --commit 3e0656e --out DIR

Read: `RAW`, the figure's points as the repository's `fetch_llama3` wrote them from
github.com/eric-czech/llama3_isoflop_extraction at 1bc1755 (`isoflops_points.csv`): columns
`HEADER`, each point twice, once a `condition` (`raw_loss`: the figure's validation loss as read;
`exp_loss`: exp of it, a transform of the same point, not read here). `tokens` and `budget` were
read from the figure (its x axis and its line's legend); `params` was derived upstream as
budget / (6 · tokens), not read from anything.

Written: DIR/runs.csv, one row a `raw_loss` point (`COLUMNS`: the budget as declared, `BUDGETS`;
params, tokens and `loss_val`, the figure's validation loss), ordered by budget, params, tokens.
Checked: the header is `HEADER`; every row's condition is one of `CONDITIONS`, and its source,
provenance, dataset and model `llama_3`, its experiment `llama_3__<condition>`; on each
`raw_loss` row, its budget one of the ten declared, its tokens, params and loss finite and
positive, its params budget / (6 · tokens) within `REL_TOL` of itself; no (params, tokens)
twice; as many points at each budget as `BUDGETS` declares (133 in all). Anything else is
refused, naming the row (its line in the file), in one `error:` line (exit status 2, nothing
written), as is a clone without the commit or the file.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

# bench/data/convert_io.py, shared with other converters (run as scripts, not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convert_io import git, write  # noqa: E402

COMMIT = "3e0656ee3dce1a2c89aa67691920f5eb9d30f0fc"  # the commit the protocol was declared on
RAW = "data/isoflops/extract/llama_3/isoflops.csv"
HEADER = (
    "source", "provenance", "dataset", "model", "condition", "experiment", "tokens", "params",
    "budget", "loss",
)  # fmt: skip
SOURCE = "llama_3"  # the source, provenance, dataset and model of every row
CONDITIONS = ("raw_loss", "exp_loss")
KEPT = "raw_loss"  # the figure's loss as read; exp_loss is exp of it
# the figure's isoFLOP budgets (its legend), each with the points its line holds
BUDGETS = {
    "6e18": 16, "1e19": 17, "3e19": 16, "6e19": 16, "1e20": 18, "3e20": 14, "6e20": 12,
    "1e21": 12, "3e21": 6, "1e22": 6,
}  # fmt: skip
REL_TOL = 1e-6  # params against budget / (6 · tokens)
COLUMNS = ("budget", "params", "tokens", "loss_val")


def _positive(text: str, what: str, where: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise ValueError(f"{where}: {what} {text!r} is not a number") from None
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{where}: {what} {text!r} is not finite and positive")
    return x


def point(record: dict, where: str) -> dict:
    """One raw_loss row's point, checked (the module docstring's list)."""
    try:
        budget = next((b for b in BUDGETS if float(b) == float(record["budget"])), None)
    except ValueError:
        budget = None
    if budget is None:
        raise ValueError(f"{where}: budget {record['budget']!r} is not one of {', '.join(BUDGETS)}")
    tokens = _positive(record["tokens"], "tokens", where)
    params = _positive(record["params"], "params", where)
    loss = _positive(record["loss"], "loss", where)
    derived = float(budget) / (6 * tokens)
    if abs(params - derived) > REL_TOL * derived:
        raise ValueError(f"{where}: params {params!r} are not budget / (6 · tokens), {derived!r}")
    return dict(budget=budget, params=repr(params), tokens=repr(tokens), loss_val=repr(loss))


def convert(text: str) -> list[dict]:
    """The raw_loss points of the source file (its text), checked, in order."""
    reader = csv.reader(io.StringIO(text))
    header = tuple(next(reader, ()))
    if header != HEADER:
        raise ValueError(f"{RAW}: the header is {','.join(header)!r}, not {','.join(HEADER)!r}")
    rows, seen = [], {}
    for line, values in enumerate(reader, start=2):
        where = f"{RAW} line {line}"
        if len(values) != len(HEADER):
            raise ValueError(f"{where}: {len(values)} fields, not {len(HEADER)}")
        record = dict(zip(HEADER, values))
        condition = record["condition"]
        if condition not in CONDITIONS:
            raise ValueError(f"{where}: condition {condition!r} is not one of {CONDITIONS}")
        labels = tuple(record[k] for k in ("source", "provenance", "dataset", "model"))
        if labels != (SOURCE,) * 4 or record["experiment"] != f"{SOURCE}__{condition}":
            raise ValueError(f"{where}: not a {SOURCE} row of condition {condition}")
        if condition != KEPT:
            continue
        row = point(record, where)
        key = (float(row["params"]), float(row["tokens"]))
        if key in seen:
            raise ValueError(f"{where} and line {seen[key]}: the same params and tokens")
        seen[key] = line
        rows.append(row)
    for budget, count in BUDGETS.items():
        n = sum(r["budget"] == budget for r in rows)
        if n != count:
            raise ValueError(f"{RAW}: {n} {KEPT} points at budget {budget}, not {count}")
    return order(rows)


def order(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (float(r["budget"]), float(r["params"]), float(r["tokens"])))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="a clone of github.com/Open-Athena/scaling-law-analysis")
    p.add_argument("--commit", default=COMMIT[:7], help="%(default)s, the declared one")
    p.add_argument("--out", type=Path, required=True, help="the folder runs.csv is written to")
    a = p.parse_args(argv)
    try:
        commit = git(a.repo, "rev-parse", "--verify", f"{a.commit}^{{commit}}").decode().strip()
        if commit != COMMIT:
            p.error(f"--commit {a.commit} is {commit}; the protocol was declared on {COMMIT}")
        rows = convert(git(a.repo, "show", f"{commit}:{RAW}").decode())
    except (LookupError, ValueError) as e:  # a UnicodeDecodeError is a ValueError
        p.error(str(e))  # one line, exit status 2, nothing written
    a.out.mkdir(parents=True, exist_ok=True)
    write(rows, a.out / "runs.csv", COLUMNS)
    print(f"{len(rows)} points ({KEPT}) -> {a.out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
