"""What the tests of a held-out split parted by model share (tests/test_gemstones.py,
test_olmo_ladder.py, test_opt.py, test_gpt3.py, test_gadre.py, test_marin.py, ...): its file's
rows, a noise-free sweep laid out as that file, the checks every target row of
`bench.point_query` owes on such a sweep, and the replay and --coverage of `bench.scalebench` on
it, and what a convert.py run on a clone owes when the clone is not there. No score on real
held-out runs is asserted here."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest


def chinchilla_truth(n: float, d: float) -> float:
    """The noise-free law the synthetic sweeps are drawn from (a Chinchilla-shaped L(N, D))."""
    return 1.7 + 480 / n**0.34 + 2100 / d**0.28


def file_rows(folder: Path, name: str = "runs.csv") -> list[dict]:
    """A data folder's file, one dict per row."""
    with open(folder / name, newline="") as f:
        return list(csv.DictReader(f))


def write_truth(
    path: Path,
    columns: tuple[str, ...],
    rows: list[dict],
    loss: str,
    targets: tuple[str, ...],
    law=chinchilla_truth,
    derived=lambda y: {},
) -> dict:
    """`rows` written to `path` with `columns`, the `loss` column the law's value at each row's
    (params, tokens) and `derived(loss)` any column computed from it (a perplexity); returns
    {(params, tokens): loss} of the rows whose model is in `targets`."""
    truth = {}
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns, lineterminator="\n")
        w.writeheader()
        for r in rows:
            n, d = float(r["params"]), float(r["tokens"])
            y = law(n, d)
            w.writerow({**r, loss: repr(y), **derived(y)})
            if r["model"] in targets:
                truth[(n, d)] = y
    return truth


def check_target_row(r: dict, truth: float, n_max: float, c_max: float | None = None) -> None:
    """One target row of `bench.point_query` on a noise-free sweep: the observed loss is the
    truth, the prediction within 1 %, no published reference, its factors past the pool (in params
    over the pool's largest `n_max`, in compute over its largest `c_max` where given), and the
    CI withheld (every target of these splits lies past the pool's params) though given
    ungated."""
    n, d = float(r["params"]), float(r["tokens"])
    assert math.isclose(float(r["observed"]), truth, rel_tol=1e-12), r
    assert abs(float(r["error_pct"])) < 1.0 and r["reference"] == "nan", r
    assert math.isclose(float(r["factor_params"]), n / n_max, rel_tol=1e-9), r
    assert r["ci_covers"] == "" and r["ci_ungated_covers"] in ("True", "False"), r
    if c_max is not None:
        assert math.isclose(float(r["factor"]), 6 * n * d / c_max, rel_tol=1e-6), r


def query_rows(out: Path, law: str = "chinchilla") -> list[dict]:
    """`bench.point_query`'s CSV, the rows of one law."""
    return [r for r in csv.DictReader(open(out)) if r["law"] == law]


def check_point_query(
    out: Path,
    printed: str,
    truth: dict,
    n_max: float,
    c_max: float,
    ratio: tuple[float, float],
    covered_up_to: float = math.inf,
) -> list[dict]:
    """Every target row of a point query on a noise-free sweep (`check_target_row`), with the
    note naming the pool's params where the compute is inside it, the PI withheld exactly where
    the tokens per parameter lie outside `ratio` (`pool_ratio`) or the factor past
    `covered_up_to`, and given ungated at every row; the printout counts them. Returns the rows
    for a split's own checks."""
    rows = query_rows(out)
    assert len(rows) == len(truth) and {r["query"] for r in rows} == {"runs"}
    for r in rows:
        n, d, factor = float(r["params"]), float(r["tokens"]), float(r["factor"])
        check_target_row(r, truth[(n, d)], n_max, c_max)
        # the CI only inside the pool's compute, params and tokens (docs/laws.md): every target
        # lies past its params, which the note says where the compute is inside
        assert ("past the largest fitted" in r["note"]) == (factor <= 1), r
        # andrea withholds the PI off the pool's tokens per parameter and past the factor its
        # calibration covers; ungated it is given at every query (a noise-free sweep: width 0)
        off = not ratio[0] <= d / n <= ratio[1] or factor > covered_up_to
        assert (r["pi_covers"] == "") == off, r
        assert math.isfinite(float(r["pi_ungated_lo"])) and r["pi_ungated_covers"], r
    count = len(truth)
    assert f"chinchilla: {count} queries" in printed, printed
    assert f"90 % PI ungated given {count}" in printed, printed
    return rows


def pool_ratio(rows: list[dict], pool: tuple[str, ...]) -> tuple[float, float]:
    """The smallest and largest tokens per parameter of the pool's rows: outside them andrea
    withholds the PI of a (params, tokens) query (`band_intervals.untrained_ratio`)."""
    ratio = [float(r["tokens"]) / float(r["params"]) for r in rows if r["model"] in pool]
    return min(ratio), max(ratio)


def check_replay_and_coverage(
    scalebench,
    capsys,
    out_dir: Path,
    named: str,
    splits: tuple[str, ...],
    source: list[str],
    *,
    header: str,
    n_target: int,
    planner_set: str,
    band: str,
    full_below: float,
) -> None:
    """`bench.scalebench --splits named` (one repetition of random and the whole pool) on a
    synthetic sweep: the split's header (its planner mark), the RMS relative error over its
    `n_target` targets, andrea's fit only under `planner_set`, the whole pool's error below
    `full_below` on a noise-free sweep; then `--coverage` on `splits[0]`: one row, `band`'s mark
    and the `n_target` targets. `source`: the --source or --data arguments."""
    args = ["--splits", named, "--methods", "random,full", "--reps", "1", *source]
    assert scalebench(args + ["--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert header in out and f"RMS relative error over the {n_target} target runs" in out
    with open(out_dir / "scalebench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["split"] for r in rows} == set(splits)
    assert {r["fit"] for r in rows} == {"andrea"} and {r["set"] for r in rows} == {planner_set}
    full = [r for r in rows if r["method"] == "full" and r["split"] == splits[0]]
    assert full and all(float(r["rms_mean"]) < full_below for r in full), full
    assert scalebench(["--coverage", "--splits", splits[0], *source]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"{splits[0]} ")]
    assert len(lines) == 1 and lines[0].split()[1:3] == [band, str(n_target)]


def check_no_clone_is_one_error_line(convert, tmp_path: Path, capsys) -> str:
    """A bench/data/*/convert.py run on a folder that is no clone: exit status 2, one `error:`
    line naming git's command and the folder, no traceback, nothing written. Returns the line."""
    out, clone = tmp_path / "out", tmp_path / "no_clone"
    with pytest.raises(SystemExit) as e:
        convert.main([str(clone), "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err
    (line,) = [x for x in err.splitlines() if "error:" in x]
    assert "error: git " in line and f" in {clone}: " in line, line
    assert not out.exists()
    return line


def check_write_is_whole_or_nothing(convert, tmp_path: Path, monkeypatch) -> None:
    """A bench/data/*/convert.py's write (bench/data/convert_io.write): a failure half way (the
    disk full after one row) leaves the runs.csv that was there as it was; a write that ends
    replaces it whole."""
    path = tmp_path / "runs.csv"
    path.write_text("the earlier runs.csv\n")
    rows = [dict.fromkeys(convert.COLUMNS, "1")] * 2

    def one_row_then_disk_full(writer, rows):
        writer.writerow(rows[0])
        raise OSError("No space left on device")

    with monkeypatch.context() as m:
        m.setattr(csv.DictWriter, "writerows", one_row_then_disk_full)
        with pytest.raises(OSError, match="No space left"):
            convert.write(rows, path, convert.COLUMNS)
    assert path.read_text() == "the earlier runs.csv\n"
    convert.write(rows, path, convert.COLUMNS)
    with open(path, newline="") as f:
        assert list(csv.DictReader(f)) == rows
