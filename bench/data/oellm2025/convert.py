"""Convert OpenEuroLLM's dense English scaling-law runs (github.com/OpenEuroLLM/
dense_english_scaling_laws, `data/loss_all_exps_post_annealing.csv`) into a runs.csv for
bench/oellm_splits.py: one row per (N, D) cell, the run of lowest loss among the cell's. The runs
are not shipped with andrea (the repository has no licence): run this on your own clone and pass
the folder it writes as --source.

Standard library only; the tests never run it on the source. It reads the clone's working-tree
file and refuses it unless its SHA-256 is `SHA256`, the file at commit `COMMIT` on which
bench/oellm_splits.py's protocol was declared (a clearer check than a commit here: it is the
bytes the counts were taken from, whatever the clone has checked out):

    python bench/data/oellm2025/convert.py CLONE --out DIR

The file holds one training run a row (909 at `COMMIT`): `job_name`
(`dense_SIZE_xmK_lrLR_gbszB_beta2B2_DB`), `N` (the params; one of `SIZES`), `D` (the tokens; one of
`TOKENS`), `C` (6·N·D), `lr`, `gbsz` (the global batch size, in sequences), `beta2`, `seed`,
`loss` (the validation loss after the learning rate's annealing), `loss_se` (0, or the standard
error where the row is a mean) and columns not read here (`N_approx`, `iteration`,
`train_samples`, `train_tokens`, `num_of_valid_seq`).

Written: DIR/runs.csv, one row per (N, D) cell, 51 at `COMMIT`, ordered by params, then tokens:
the cell's run of lowest `loss` over all its rows, whatever their lr, batch size, beta2 and seed
(ties: the first by job name), with `runs` the count of rows the minimum was taken over.
Checked, before anything is written: the SHA-256; the columns `READ`; each row's N among `SIZES`,
D among `TOKENS`, C = 6·N·D, its job name's size, lr, batch size, beta2 and tokens its columns';
loss finite and positive, loss_se finite and not negative; no job name twice; every cell of
`cells()` present, and no other.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import math
import re
import sys
from pathlib import Path

# bench/data/convert_io.py, shared with other converters (run as scripts, not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from convert_io import write  # noqa: E402

FILE = "data/loss_all_exps_post_annealing.csv"  # in the clone's working tree
COMMIT = "781af4364e3ba03886f7d8fd9a6cf9d8e873eff4"  # the file's commit, for the record
SHA256 = "b1c7a64f5c557e0fb85c59b48af9626b06496f488a642315222eeaf200835e38"  # its bytes, checked
READ = ("job_name", "N", "D", "C", "lr", "gbsz", "beta2", "seed", "loss", "loss_se")
# N -> the size's name (the job names' label; scripts/utils.py's `Ns`, `Ns_approx`)
SIZES = {
    47_557_632: "50M",
    124_455_168: "130M",
    301_880_320: "300M",
    588_544_000: "600M",
    983_138_304: "1B",
    1_713_504_256: "1.7B",
}
TOKENS = tuple(int(b * 1e9) for b in (6, 12, 20, 30, 50, 80, 120, 200, 300))
LARGEST_FROM = 30_000_000_000  # the 1.7B's runs: 30 B tokens and more only
COLUMNS = (
    "model", "params", "tokens", "loss", "runs", "lr", "gbsz", "beta2", "seed", "loss_se",
    "job_name",
)  # fmt: skip
JOB = re.compile(r"^dense_(\w+?)_xm\d+_lr([0-9.e-]+)_gbsz(\d+)_beta2([0-9.]+)_(\d+)B$")


class ConvertError(ValueError):
    """The file is not the one declared, or a row breaks a check; the message says which."""


def cells() -> list[tuple[int, int]]:
    """Every (N, D) cell the file holds: each size at every token count, the 1.7B from 30 B."""
    largest = max(SIZES)
    return [(n, d) for n in SIZES for d in TOKENS if n != largest or d >= LARGEST_FROM]


def check_sha256(data: bytes, path: Path) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256:
        raise ConvertError(
            f"{path}: SHA-256 {got}, not {SHA256}, the file at {COMMIT[:7]} on which "
            "bench/oellm_splits.py's protocol was declared; check that commit out in the clone "
            f"(git -C CLONE checkout {COMMIT[:7]})"
        )


def _number(row: dict, column: str, line: int) -> float:
    try:
        return float(row[column])
    except ValueError:
        raise ConvertError(f"line {line}: {column} {row[column]!r} is not a number") from None


def run_row(row: dict, line: int) -> dict:
    """One run, checked; its N and D as integers, its loss and loss_se as floats."""
    name = row["job_name"]
    n, d = _number(row, "N", line), _number(row, "D", line)
    if n not in SIZES:
        raise ConvertError(f"line {line} ({name}): N {row['N']} is none of the declared sizes")
    if d not in TOKENS:
        raise ConvertError(f"line {line} ({name}): D {row['D']} is none of the declared tokens")
    n, d = int(n), int(d)
    if not math.isclose(_number(row, "C", line), 6 * n * d, rel_tol=1e-9):
        raise ConvertError(f"line {line} ({name}): C {row['C']} is not 6·N·D")
    m = JOB.match(name)
    if not m:
        raise ConvertError(f"line {line}: job name {name!r} is not dense_SIZE_xmK_lr_gbsz_beta2_DB")
    size, lr, gbsz, beta2, billions = m.groups()
    said = (size, float(lr), int(gbsz), float(beta2), int(billions) * 10**9)
    has = (SIZES[n].replace(".", "_"), float(row["lr"]), int(row["gbsz"]), float(row["beta2"]), d)
    if said != has:
        raise ConvertError(
            f"line {line}: job name {name!r} does not match its N, lr, gbsz, beta2, D"
        )
    loss, se = _number(row, "loss", line), _number(row, "loss_se", line)
    if not (math.isfinite(loss) and loss > 0 and math.isfinite(se) and se >= 0):
        raise ConvertError(f"line {line} ({name}): loss must be finite and positive, loss_se >= 0")
    return {**row, "N": n, "D": d, "loss": loss, "loss_se": se}


def convert(text: str) -> list[dict]:
    """The rows of runs.csv from the file's text: one per cell, its lowest loss."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in READ if c not in (reader.fieldnames or ())]
    if missing:
        raise ConvertError(f"no column {', '.join(missing)} (columns: {reader.fieldnames})")
    by_cell, names = {}, set()
    for line, row in enumerate(reader, start=2):
        run = run_row(row, line)
        if run["job_name"] in names:
            raise ConvertError(f"line {line}: job name {run['job_name']!r} twice")
        names.add(run["job_name"])
        by_cell.setdefault((run["N"], run["D"]), []).append(run)
    want = cells()
    absent = [f"{SIZES[n]} at {d / 1e9:g} B" for n, d in want if (n, d) not in by_cell]
    if absent or len(by_cell) != len(want):
        raise ConvertError(f"cells absent: {', '.join(absent) or 'none'}; {len(by_cell)} found")
    out = []
    for (n, d), runs in sorted(by_cell.items()):
        best = min(runs, key=lambda r: (r["loss"], r["job_name"]))
        out.append(
            dict(
                model=SIZES[n], params=n, tokens=d, loss=repr(best["loss"]), runs=len(runs),
                lr=best["lr"], gbsz=best["gbsz"], beta2=best["beta2"], seed=best["seed"],
                loss_se=repr(best["loss_se"]), job_name=best["job_name"],
            )
        )  # fmt: skip
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("clone", type=Path, help="a clone of OpenEuroLLM/dense_english_scaling_laws")
    p.add_argument("--out", type=Path, required=True, help="the folder runs.csv is written to")
    a = p.parse_args(argv)
    path = a.clone / FILE
    try:
        if not path.is_file():
            raise ConvertError(f"{path}: no such file (is {a.clone} a clone of the repository?)")
        data = path.read_bytes()
        check_sha256(data, path)
        rows = convert(data.decode("utf-8"))
    except ConvertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    write(rows, a.out / "runs.csv", COLUMNS)
    print(f"{len(rows)} cells (the lowest loss of each) -> {a.out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
