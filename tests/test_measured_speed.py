"""The device-seconds multiplier from a measured throughput.json (analysis.inputs.throughput_file,
analysis.estimates.measured_speed): its interval carries the timing's spread, and a file from
another device or shape is one error line."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from analysis import fit
from analysis.estimates.estimate import fit_variants
from analysis.estimates.measured_speed import combine, device_seconds_multipliers, measured_timing
from analysis.estimates.multiplier import multiplier_at
from analysis.fits.powerlaw import POWER
from analysis.fits.replicates import arrange
from analysis.fits.settings import FitSettings
from analysis.inputs import throughput_file
from analysis.inputs.collect import collect, final_points

GOLDEN = Path(__file__).parent / "golden" / "demo_runs"
DEVICE = "Intel(R) Xeon(R) Processor"  # the golden runs' device_name
RATIOS = {
    "baseline": (1.0, 1.0, 1.0),
    "attnres_full": (0.80, 0.70, 0.90),
    "attnres_block_n2": (0.95, 0.92, 0.98),
}
SHAPES = {"tiny-1": [2, 2, 32], "tiny-2": [2, 2, 48], "tiny-3": [3, 4, 64]}


def throughput(device_name=DEVICE, shapes=SHAPES) -> dict:
    entries = []
    for size, shape in shapes.items():
        for label, (med, lo, hi) in RATIOS.items():
            entries.append(
                {
                    "label": label,
                    "size": size,
                    "shape": shape,
                    "params_nonembedding": None,
                    "seq_len": 128,
                    "batch": 8,
                    "tokens_per_s": 2000.0 * med,
                    "ratio_trials": [lo, med, hi],
                    "ratio_median": med,
                    "ratio_min": lo,
                    "ratio_max": hi,
                }
            )
    return {
        "format": 1,
        "device": "cpu",
        "device_name": device_name,
        "dtype": "fp32",
        "compile": False,
        "threads": 1,
        "clock": "cpu",
        "trials": 3,
        "steps": 2,
        "baseline": "baseline",
        "entries": entries,
    }


@pytest.fixture
def sweep(tmp_path):
    d = tmp_path / "demo"
    shutil.copytree(GOLDEN, d)
    return d


def run_fit(sweep, tmp_path, capsys, *extra):
    rc = fit.main(
        [str(sweep), "--out", str(tmp_path / "out"), "--bootstrap", "60", "--no-plots", *extra]
    )
    out, err = capsys.readouterr()
    return rc, out, err


def test_combine_adds_the_fit_and_timing_log_widths_in_quadrature():
    lo, hi = combine(1.2, [1.0, 1.5], 1.1, 1.3)
    assert lo == pytest.approx(1.2 * math.exp(-math.hypot(math.log(1.2), math.log(1.2 / 1.1))))
    assert hi == pytest.approx(1.2 * math.exp(math.hypot(math.log(1.25), math.log(1.3 / 1.2))))
    assert combine(1.2, [1.0, 1.5], 1.2, 1.2) == pytest.approx([1.0, 1.5])  # no timing spread
    assert all(math.isnan(x) for x in combine(1.2, [math.nan, math.nan], 1.1, 1.3))


def test_device_time_is_tokens_over_the_measured_rate(sweep, tmp_path):
    (sweep / "throughput.json").write_text(json.dumps(throughput()))
    tp = throughput_file.load(sweep / "throughput.json")
    runs = collect([sweep]).runs
    r = next(r for r in runs if r.label == "attnres_full")
    t = measured_timing(tp)(r)
    assert t == pytest.approx(r.tokens / (2000.0 * 0.80))
    assert measured_timing(tp, "ratio_min")(r) > t


def test_fit_prints_the_measured_multiplier_with_the_timing_in_its_interval(
    sweep, tmp_path, capsys
):
    (sweep / "throughput.json").write_text(json.dumps(throughput()))
    rc, out, err = run_fit(sweep, tmp_path, capsys)
    assert rc == 0, err
    assert "Multiplier in device-seconds (measured by throughput.json" in out
    rep = json.loads((tmp_path / "out" / "fits.json").read_text())["device_seconds"]
    assert rep["measured"] is True
    for row in rep["multipliers"]:
        lo, hi = row["ci"]
        flo, fhi = row["fit_ci"]
        assert lo < flo <= row["multiplier"] <= fhi < hi  # wider than the fit's alone
    # Full trains 0.8x as fast per token here: its device-seconds multiplier falls below its
    # FLOP one by about that factor (timing at the median ratio, same fits otherwise)
    full = next(r for r in rep["multipliers"] if r["variant"] == "attnres_full")
    assert full["timing_range"][0] < full["multiplier"] < full["timing_range"][1]


def test_the_timing_range_is_the_estimate_at_the_slowest_and_fastest_trial(sweep):
    """The timing range's ends are, by definition, the device-seconds multiplier at T_ref with
    every variant at its slowest (fastest) trial's ratio: the same estimator as the estimate,
    only the x axis moved. It was refitted on other points than the estimate (without a
    bootstrap the fit took the seeds' means instead of every seed's final point): on these
    known speeds, 0.1 % off its definition."""
    (sweep / "throughput.json").write_text(json.dumps(throughput()))
    tp = throughput_file.load(sweep / "throughput.json")
    runs = final_points(collect([sweep]).runs)
    settings = FitSettings(n_bootstrap=60)
    res = device_seconds_multipliers(arrange(runs), tp, "baseline", POWER, settings)
    assert len(res["multipliers"]) == 2
    for i, which in enumerate(("ratio_min", "ratio_max")):
        fits = fit_variants(runs, "baseline", settings, POWER, measured_timing(tp, which)).fits
        for r in res["multipliers"]:
            m = multiplier_at(fits["baseline"], fits[r["variant"]], r["t_ref_device_s"])
            assert r["timing_range"][i] == pytest.approx(m["multiplier"], rel=1e-9), which


def test_no_file_keeps_the_runs_own_timings_and_their_check(sweep, tmp_path, capsys):
    rc, out, _ = run_fit(sweep, tmp_path, capsys)
    assert rc == 0
    assert "measured by" not in out
    assert "not shown: the timings are not comparable" in out  # the demo's loaded timings


@pytest.mark.parametrize(
    "bad, words",
    [
        (dict(device_name="NVIDIA H100 80GB HBM3"), "was measured on 'NVIDIA H100 80GB HBM3'"),
        (dict(shapes={**SHAPES, "tiny-3": [3, 4, 96]}), "with shape (n_layer, n_head, d_model)"),
        (dict(shapes={"tiny-1": SHAPES["tiny-1"]}), "has no timing of"),
    ],
)
def test_a_file_from_another_device_or_shape_is_one_error_line(sweep, tmp_path, capsys, bad, words):
    (sweep / "throughput.json").write_text(json.dumps(throughput(**bad)))
    rc, out, err = run_fit(sweep, tmp_path, capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err
    assert not (tmp_path / "out" / "fits.json").exists()  # nothing fitted or written
