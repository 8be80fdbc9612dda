"""analysis/ablations.py: rows by results.json label, t-intervals and paired differences against
hand computations, the four outputs and the block-size figure."""

from __future__ import annotations

import csv
import json
import math

import pytest

from analysis.ablations import main
from analysis.fits.replicates import paired, t_interval

# t_{0.975, 2} = 4.302652729911275 (two-sided 95 %, 2 degrees of freedom), from a t table.
T2 = 4.302652729911275
LOSSES = {  # label -> (variant, S, losses of seeds 0, 1, 2)
    "baseline": ("baseline", None, [3.00, 3.02, 3.04]),
    "attnres_full": ("attnres_full", None, [2.90, 2.93, 2.93]),
    "attnres_full+sigmoid": ("attnres_full", None, [2.95, 2.96, 2.99]),
    "attnres_block_s2": ("attnres_block", 2, [2.92, 2.94, 2.95]),
    "attnres_block_s4": ("attnres_block", 4, [2.97, 2.99, 3.00]),
}


def write_sweep(root):
    for label, (variant, S, losses) in LOSSES.items():
        for seed, loss in enumerate(losses):
            d = root / "tiny-2" / label / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "results.json").write_text(
                json.dumps(
                    dict(
                        status="completed",
                        variant=variant,
                        label=label,
                        block_size=S,
                        size="tiny-2",
                        seed=seed,
                        flops=1e12,
                        val_loss=loss,
                    )
                )
            )


def test_t_interval_and_paired_difference_by_hand():
    m, lo, hi = t_interval([3.00, 3.02, 3.04], 0.95)
    assert m == pytest.approx(3.02)
    assert hi - m == pytest.approx(T2 * 0.02 / math.sqrt(3))  # sample sd of 3.00, 3.02, 3.04
    # paired: differences 2.90-3.00, 2.93-3.02, 2.93-3.04 = -0.10, -0.09, -0.11
    d, dlo, dhi, n = paired({0: 2.90, 1: 2.93, 2: 2.93}, {0: 3.00, 1: 3.02, 2: 3.04, 5: 9.0}, 0.95)
    assert n == 3 and d == pytest.approx(-0.10)
    assert dhi - d == pytest.approx(T2 * 0.01 / math.sqrt(3))
    assert math.isnan(t_interval([1.0], 0.95)[1])


def test_table_rows_group_by_label_and_outputs_are_written(tmp_path, capsys):
    write_sweep(tmp_path / "sw")
    out = tmp_path / "out"
    assert main([str(tmp_path / "sw"), "--out", str(out)]) == 0
    for name in (
        "ablations.md",
        "ablations.csv",
        "ablations.tex",
        "ablations.png",
        "block_size.png",
    ):
        assert (out / name).stat().st_size > 0, name
    rows = {r["label"]: r for r in csv.DictReader(open(out / "ablations.csv"))}
    assert set(rows) == set(LOSSES)  # the sigmoid runs are not averaged into Full
    sig = rows["attnres_full+sigmoid"]
    assert float(sig["loss_mean"]) == pytest.approx(2.9666666, abs=1e-6)
    assert float(sig["d_full"]) == pytest.approx((0.05 + 0.03 + 0.06) / 3)
    assert float(sig["d_baseline"]) == pytest.approx(-0.0533333, abs=1e-6)
    assert rows["baseline"]["d_baseline"] == "" and rows["attnres_full"]["d_full"] == ""
    md = (out / "ablations.md").read_text()
    assert md.index("`baseline`") < md.index("`attnres_full`") < md.index("`attnres_block_s4`")
    assert "attnres\\_full{+}sigmoid" in (out / "ablations.tex").read_text()
    assert "block size: S = 2, 4" in capsys.readouterr().out


def test_no_runs_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2


def test_multi_budget_runs_are_tabulated_at_their_final_point(tmp_path, capsys):
    """runs with three budgets were tabulated at their first (¼-budget) point, with a
    'seed N twice' warning per later point. The table compares final points, silently."""
    for label, (variant, S, losses) in LOSSES.items():
        for seed, loss in enumerate(losses):
            d = tmp_path / "sw" / "tiny-2" / label / f"seed{seed}"
            d.mkdir(parents=True)
            pts = [
                dict(budget=b, tokens=1000 * b, flops=1e12 * b, val_loss=loss + 1 - b)
                for b in (0.25, 0.5, 1.0)
            ]
            (d / "results.json").write_text(
                json.dumps(
                    dict(
                        status="completed",
                        variant=variant,
                        label=label,
                        block_size=S,
                        size="tiny-2",
                        seed=seed,
                        tokens=1000,
                        flops=1e12,
                        val_loss=loss,
                        points=pts,
                    )
                )
            )
    out = tmp_path / "out"
    assert main([str(tmp_path / "sw"), "--out", str(out)]) == 0
    assert "twice" not in capsys.readouterr().err
    rows = {r["label"]: r for r in csv.DictReader(open(out / "ablations.csv"))}
    assert float(rows["baseline"]["loss_mean"]) == pytest.approx(3.02)


def test_figure_shows_each_row_s_paired_differences(tmp_path):
    from analysis.ablations import ablation_rows, rows_figure
    from analysis.inputs.collect import collect
    from analysis.report.plots import plt

    write_sweep(tmp_path / "sw")
    rows, size, _ = ablation_rows(collect([tmp_path / "sw"]).runs)
    fig = rows_figure(rows, size, 0.95)
    _, dx = fig.axes[:2]
    drawn = {}
    for ln in dx.lines:  # the marker first, then its error bar's caps (same gid)
        if ln.get_gid():
            drawn.setdefault(ln.get_gid(), ln)
    others = [lb for lb in LOSSES if lb != "baseline"]
    assert {f"paired:{lb}-baseline" for lb in others} <= set(drawn)
    assert {f"paired:{lb}-attnres_full" for lb in others if lb != "attnres_full"} <= set(drawn)
    # the marker sits at the hand-computed paired mean
    hand = sum(a - b for a, b in zip(LOSSES["attnres_full"][2], LOSSES["baseline"][2])) / 3
    (x,), _ = drawn["paired:attnres_full-baseline"].get_data()
    assert x == pytest.approx(hand)
    plt.close(fig)
