"""bench.scalebench_report: every harness row gives the median over repetitions beside mean ± sd,
in the printed table, the markdown, the CSV and the JSON (the issue's goals compare with the
median random choice). Built from a made-up result: no fit runs here."""

from __future__ import annotations

import csv
import io
import json

import numpy as np

from bench.scalebench_report import csv_text, json_obj, markdown, print_split
from bench.scalebench_splits import load_split

# Three repetitions, three budgets: R² clipped at -1 in one repetition pulls the mean far from
# the median (budget 1: mean -0.30, median +0.05).
RANDOM = np.array([[-1.0, 0.2, 0.5], [0.05, 0.4, 0.6], [0.06, 0.9, 0.8]])
MEDIANS = (0.05, 0.4, 0.6)


# The RMS relative error of the same repetitions: one without a fit (inf) at budget 1, whose
# mean is inf and whose median (2.0 %) is still read.
RMS = np.array([[np.inf, 0.05, 0.02], [0.02, 0.04, 0.01], [0.01, 0.03, 0.03]])


def _result():
    rows = {
        "random": {"andrea": RANDOM},
        "planner": {"andrea": None},
        "full": {"andrea": RANDOM[:, :1]},
    }
    rms = {"random": {"andrea": RMS}, "planner": {"andrea": None}, "full": {"andrea": RMS[1:, :1]}}
    return {"rows": rows, "rms": rms, "seconds": {"random": 1.0, "planner": 1.0, "full": 1.0}}


def test_every_format_gives_the_median_beside_mean_and_sd(capsys):
    split = load_split("moe")
    methods = ("random", "planner", "full")
    results = {"moe": _result()}
    md = markdown([split], results, methods, 3, (1.0, 1.0))
    assert "| budget 1 | median 1 | budget 2 | median 2 | budget 3 | median 3 |" in md
    row = next(x for x in md.splitlines() if "| random | andrea's fit |" in x)
    assert "| -0.30 ± 0.50 | +0.05 | +0.50 ± 0.29 | +0.40 | +0.63 ± 0.12 | +0.60 |" in row
    full = next(x for x in md.splitlines() if "| all runs | andrea's fit |" in x)
    assert "| -0.30 ± 0.50 | +0.05 |" in full
    failed = next(x for x in md.splitlines() if "| planner | andrea's fit |" in x)
    assert "failed (see stderr)" in failed
    # the paper's rows have no median: their median cells are blank
    pub = next(x for x in md.splitlines() if "paper: Random" in x)
    assert "| -0.47 ± 0.66 |  | +0.01 ± 0.72 |  |" in pub

    rows = list(csv.DictReader(io.StringIO(csv_text([split], results, methods))))
    got = [float(r["median"]) for r in rows if (r["method"], r["fit"]) == ("random", "andrea")]
    assert np.allclose(got, MEDIANS)
    assert {r["median"] for r in rows if r["fit"] == "published"} == {""}

    js = json.loads(json.dumps(json_obj([split], results, methods, 3, (1.0, 1.0))))
    (rnd,) = [r for r in js["splits"]["moe"]["rows"] if r["method"] == "random"]
    assert np.allclose(rnd["medians"], MEDIANS)
    assert np.allclose(rnd["medians"], np.median(rnd["values"], axis=0))

    print_split(split, results["moe"], methods, 3)
    out = capsys.readouterr().out
    assert "mean ± sd [median]" in out
    line = next(x for x in out.splitlines() if x.startswith("here: random"))
    assert "-0.30 ± 0.50 [+0.05]" in line and "+0.63 ± 0.12 [+0.60]" in line


def test_every_format_gives_the_rms_relative_error_beside_r2(capsys):
    """The RMS relative error's mean ± sd and median per budget: in the CSV's rms_ columns (blank
    on the paper's rows), the JSON (inf as null), the markdown's second table and the printout;
    a repetition without a fit makes the mean inf and leaves the median."""
    split = load_split("moe")
    methods = ("random", "planner", "full")
    results = {"moe": _result()}
    rows = list(csv.DictReader(io.StringIO(csv_text([split], results, methods))))
    rnd = [r for r in rows if (r["method"], r["fit"]) == ("random", "andrea")]
    assert [float(r["rms_median"]) for r in rnd] == [0.02, 0.04, 0.02]
    assert rnd[0]["rms_mean"] == "inf" and abs(float(rnd[1]["rms_mean"]) - 0.04) < 1e-12
    assert {r["rms_median"] for r in rows if r["fit"] == "published"} == {""}
    js = json.loads(json.dumps(json_obj([split], results, methods, 3, (1.0, 1.0))))
    (r,) = [r for r in js["splits"]["moe"]["rows"] if r["method"] == "random"]
    assert r["rms_values"][0] == [None, 0.05, 0.02] and r["rms_medians"] == [0.02, 0.04, 0.02]
    md = markdown([split], results, methods, 3, (1.0, 1.0))
    line = next(x for x in md.splitlines() if "| random | andrea's fit | inf" in x)
    assert "| inf [2.00 %] | 4.00 ± 0.82 [4.00 %] | 2.00 ± 0.82 [2.00 %] |" in line
    print_split(split, results["moe"], methods, 3)
    out = capsys.readouterr().out
    assert "RMS relative error over the " in out
    lines = [x for x in out.splitlines() if x.startswith("here: random")]
    assert len(lines) == 2 and "inf [2.00 %]" in lines[1]
