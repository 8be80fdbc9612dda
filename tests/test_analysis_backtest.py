"""analysis.backtest: fit without the largest size, predict it; a law that bends must miss."""

import json

import numpy as np
import pytest

from analysis.backtest import main
from analysis.estimates.held_out import backtest
from analysis.fits.settings import FitSettings
from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs

COMPUTE = (1e-4, 1e-3, 1e-2, 1e-1)


def _runs(law, seed=1):
    laws = {"baseline": law, "attnres_full": shifted(law, 1.25)}
    return simulate_runs(
        laws, COMPUTE, (0, 1, 2), (0.25, 0.5, 1.0), rng=np.random.default_rng(seed)
    )


def test_a_power_law_extrapolates_inside_its_intervals():
    bt = backtest(_runs(power_law(2.0, 0.06)), settings=FitSettings(n_bootstrap=300))
    assert {r["size"] for r in bt["losses"]} == {"s4"} and len(bt["losses"]) == 6
    assert all(r["inside"] for r in bt["losses"]), bt["losses"]
    assert all(abs(r["error_pct"]) < 3 for r in bt["losses"])
    (m,) = bt["multipliers"]
    assert m["inside"] and m["lo"] < 1.25 < m["hi"]


def test_curvature_the_c_law_misses_is_reported_as_a_miss():
    """E + A·C^-0.5 bends flat above the fitted sizes: a pure power law fitted below predicts the
    held-out size's loss far too low, outside its interval, at every budget."""
    bt = backtest(_runs(power_law(1.0, 0.5, E=1.5)), settings=FitSettings(n_bootstrap=300))
    base = [r for r in bt["losses"] if r["variant"] == "baseline"]
    assert base and not any(r["inside"] for r in base)
    assert all(r["predicted"] < r["lo"] or r["predicted"] < r["observed"] for r in base)
    assert all(r["error_pct"] < -5 for r in base)


def test_cli_writes_the_table_and_refuses_too_few_sizes(tmp_path, capsys):
    write_runs(tmp_path / "s", _runs(power_law(2.0, 0.06)))
    assert main([str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--bootstrap", "100"]) == 0
    out = capsys.readouterr().out
    assert "| baseline | s4 | 1 |" in out and "predicted multiplier" in out
    rep = json.loads((tmp_path / "o" / "backtest.json").read_text())
    assert rep["held_out"] == {"baseline": "s4", "attnres_full": "s4"}
    assert (tmp_path / "o" / "backtest.md").read_text().startswith("Held-out-size backtest")
    few = [r for r in _runs(power_law(2.0, 0.06)) if r.size in ("s1", "s2")]
    write_runs(tmp_path / "few", few)
    assert main([str(tmp_path / "few"), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: nothing to backtest")


def test_figure_draws_predicted_against_observed_with_intervals(tmp_path):
    from analysis.report.backtest_report import backtest_figure
    from analysis.report.plots import plt

    bt = backtest(
        _runs(power_law(1.0, 0.5, E=1.5)), settings=FitSettings(n_bootstrap=100)
    )  # misses: drawn as crosses
    fig = backtest_figure(bt)
    loss_ax, mult_ax = fig.axes[:2]
    first = {}
    for ln in loss_ax.lines + mult_ax.lines:
        if ln.get_gid():
            first.setdefault(ln.get_gid(), ln)
    for r in bt["losses"]:
        ln = first[f"loss:{r['variant']}:{r['point']}"]
        (x,), (y,) = ln.get_data()
        assert (x, y) == pytest.approx((r["observed"], r["predicted"]))
        assert (ln.get_marker() == "X") == (r["inside"] is False)
    for m in bt["multipliers"]:
        (x,), (y,) = first[f"multiplier:{m['variant']}"].get_data()
        assert (x, y) == pytest.approx((m["observed"], m["predicted"]))
    # the intervals: one error bar per held-out point
    assert sum(len(c.lines[2]) > 0 for c in loss_ax.containers) == len(bt["losses"])
    plt.close(fig)
    write_runs(tmp_path / "s", _runs(power_law(2.0, 0.06)))
    assert main([str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--bootstrap", "50"]) == 0
    assert (tmp_path / "o" / "backtest.png").read_bytes()[:4] == b"\x89PNG"


def test_an_interval_too_wide_to_predict_is_no_prediction_and_the_figure_stays_readable(
    tmp_path, capsys
):
    """On the demo (tests/golden/demo_runs) the two-size fits invert to multiplier intervals like
    [0.70, 1.5e15], which were counted "inside" and squashed backtest.png's right panel into a
    corner under piled-up tick labels. Such an interval is no prediction: neither inside nor a
    miss; the panel spans the estimates, with a few plain tick labels apart from each other."""
    import shutil

    from conftest import REPO

    from analysis.estimates.held_out import NO_PREDICTION_RATIO, is_prediction
    from analysis.report.backtest_report import backtest_figure
    from analysis.report.plots import plt

    assert is_prediction(0.8, 2.0) and is_prediction(1.0, NO_PREDICTION_RATIO)
    assert not is_prediction(0.704, 1.46e15) and not is_prediction(float("nan"), 2.0)
    demo = tmp_path / "demo"
    shutil.copytree(REPO / "tests" / "golden" / "demo_runs", demo)
    assert main([str(demo), "--out", str(tmp_path / "o"), "--bootstrap", "200"]) == 0
    out = capsys.readouterr().out
    bt = json.loads((tmp_path / "o" / "backtest.json").read_text())
    assert len(bt["multipliers"]) == 2
    for m in bt["multipliers"]:
        assert m["hi"] / m["lo"] > 1e6 and m["no_prediction"] and m["inside"] is None
        assert f"| {m['variant']} | 1.02e-08 |" in out
    assert out.count("| no prediction |") == 2 and " of 9 outside their interval" in out
    assert "No prediction: 2 multiplier interval(s) wider than a factor of 10" in out

    fig = backtest_figure(bt)
    fig.canvas.draw()
    mult_ax = fig.axes[1]
    lo, hi = mult_ax.get_ylim()
    top = max(max(m["predicted"], m["observed"]) for m in bt["multipliers"])
    assert hi < 2 * top and lo > 0.5 * min(m["observed"] for m in bt["multipliers"])
    for axis in (mult_ax.xaxis, mult_ax.yaxis):
        ticks = [
            t
            for t in axis.get_ticklabels()
            if t.get_text() and lo <= t.get_position()[axis is mult_ax.yaxis] <= hi
        ]
        assert 3 <= len(ticks) <= 10, [t.get_text() for t in ticks]
        boxes = [t.get_window_extent() for t in ticks]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        assert all("e+" not in t.get_text() for t in ticks)
    plt.close(fig)
