"""analysis/architecture.py and analysis/fits/parabola.py: the optimum finder recovers a known
optimum from synthetic losses (and its seed-bootstrap interval holds it), the paired per-cell gap
equals a hand computation, an optimum at the grid's edge is flagged, and the outputs are written."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from analysis.architecture import main
from analysis.fits import parabola

# (aspect asked, n_layer, d_model, n_head): realised aspects 40, 21.3, 14, 10, 7.5
SHAPES = [(40, 2, 80, 5), (21.3, 3, 64, 4), (14, 4, 56, 4), (10, 5, 50, 2), (7.5, 6, 45, 3)]
SEED_SHIFT = {0: 0.004, 1: -0.006, 2: 0.002}  # a seed's luck, shared by the cells it runs in


def loss(aspect, best, floor, seed, rng, curvature=0.08, noise=0.001):
    return (
        floor + curvature * math.log(aspect / best) ** 2 + SEED_SHIFT[seed] + rng.normal(0, noise)
    )


def write_sweep(root, optima, seeds=(0, 1, 2), noise=0.001, budgets=None):
    """budgets: the run's points as multiples of its budget (train.budgets); the earlier points
    sit 0.5 nats per halving above the final one, so a table that takes them is far off."""
    rng = np.random.default_rng(0)
    for label, (best, floor) in optima.items():
        variant = "attnres_block" if label.startswith("attnres_block") else label
        for asked, n_layer, d_model, n_head in SHAPES:
            size = f"tiny-3@a{asked:g}"
            for seed in seeds:
                d = root / size / label / f"seed{seed}"
                d.mkdir(parents=True)
                final = loss(d_model / n_layer, best, floor, seed, rng, noise=noise)
                flops = 1.4e12 + 1e10 * n_layer
                points = [
                    dict(
                        budget=b,
                        tokens=int(446_464 * b),
                        flops=flops * b,
                        val_loss=final + 0.5 * math.log2(1 / b),
                    )
                    for b in budgets or ()
                ]
                (d / "results.json").write_text(
                    json.dumps(
                        dict(
                            status="completed",
                            variant=variant,
                            label=label,
                            block_size=2 if variant == "attnres_block" else None,
                            size=size,
                            seed=seed,
                            n_layer=n_layer,
                            n_head=n_head,
                            d_model=d_model,
                            params_nonembedding=150_000,
                            tokens=446_464,
                            flops=flops,
                            val_loss=final,
                            **({"points": points} if points else {}),
                        )
                    )
                )


def test_parabola_vertex_is_exact_on_a_parabola_and_flags_the_edge():
    x = np.log([5, 10, 20, 40, 80])
    v = parabola.vertex(x, 2 + (x - math.log(17)) ** 2)
    assert v.kind == parabola.PARABOLA and math.exp(v.x) == pytest.approx(17, rel=1e-9)
    assert parabola.vertex(x, x).kind == parabola.EDGE  # falls to the left edge
    assert parabola.vertex(x[:2], x[:2]).kind == parabola.FEW
    assert parabola.vertex(x, [3, 1, 1.2, 0.9, 3]).kind in (parabola.PARABOLA, parabola.CONCAVE)


def test_known_optima_are_recovered_with_intervals_that_hold_them(tmp_path, capsys):
    truth = {"baseline": (20.0, 4.00), "attnres_block_s2": (11.0, 3.95)}
    write_sweep(tmp_path / "sw", truth)
    out = tmp_path / "out"
    assert main([str(tmp_path / "sw"), "--out", str(out), "--bootstrap", "300"]) == 0
    for name in (
        "architecture.md",
        "architecture.csv",
        "architecture.json",
        "heatmap.png",
        "aspect.png",
    ):
        assert (out / name).stat().st_size > 0, name
    got = {o["label"]: o for o in json.loads((out / "architecture.json").read_text())["optima"]}
    for label, (best, _) in truth.items():
        o = got[label]
        assert o["kind"] == parabola.PARABOLA
        assert o["aspect"] == pytest.approx(best, rel=0.1)
        assert o["lo"] < best < o["hi"] and o["lo"] < o["aspect"] < o["hi"]
        assert o["level"] > 0.95  # widened to the t quantile (df = 5 cells x 2)
    assert got["attnres_block_s2"]["aspect"] < got["baseline"]["aspect"]  # deeper, narrower


def test_per_cell_gap_is_the_paired_mean_and_an_edge_optimum_is_flagged(tmp_path, capsys):
    write_sweep(tmp_path / "sw", {"baseline": (60.0, 4.0), "attnres_block_s2": (20.0, 3.9)})
    out = tmp_path / "out"
    assert main([str(tmp_path / "sw"), "--out", str(out), "--bootstrap", "100"]) == 0
    rows = list(csv.DictReader(open(out / "architecture.csv")))
    res = {(r["label"], r["size"]): r for r in rows}
    by_seed = {}
    for p in (tmp_path / "sw").rglob("results.json"):
        r = json.loads(p.read_text())
        by_seed[(r["label"], r["size"], r["seed"])] = r["val_loss"]
    size = "tiny-3@a14"
    hand = np.mean(
        [by_seed[("attnres_block_s2", size, s)] - by_seed[("baseline", size, s)] for s in (0, 1, 2)]
    )
    assert float(res[("attnres_block_s2", size)]["gap_vs_baseline"]) == pytest.approx(hand)
    lo, hi = (float(res[("attnres_block_s2", size)][k]) for k in ("gap_lo", "gap_hi"))
    assert lo < hand < hi
    assert res[("baseline", size)]["gap_vs_baseline"] == ""
    opt = {o["label"]: o for o in json.loads((out / "architecture.json").read_text())["optima"]}
    assert opt["baseline"]["kind"] == parabola.EDGE  # the truth (60) lies beyond the widest cell
    assert "EDGE" in (out / "architecture.md").read_text()


def test_one_seed_gives_no_interval_and_says_so(tmp_path, capsys):
    write_sweep(tmp_path / "sw", {"baseline": (20.0, 4.0)}, seeds=(0,))
    assert main([str(tmp_path / "sw"), "--out", str(tmp_path / "out"), "--bootstrap", "50"]) == 0
    assert "no interval" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2


def test_runs_with_several_budgets_are_tabulated_at_their_final_point(tmp_path, capsys):
    # train.budgets gives each run a point at 1/4, 1/2 and all of its budget: the table is of the
    # full budget, and the optima are those of the final points (no "seed 0 twice")
    truth = {"baseline": (20.0, 4.00), "attnres_block_s2": (11.0, 3.95)}
    write_sweep(tmp_path / "one", truth)
    write_sweep(tmp_path / "three", truth, budgets=(0.25, 0.5, 1.0))
    for name in ("one", "three"):
        assert (
            main(
                [str(tmp_path / name), "--out", str(tmp_path / name / "out"), "--bootstrap", "100"]
            )
            == 0
        )
    assert "twice" not in capsys.readouterr().err
    one, three = (
        {
            (r["label"], r["size"]): r
            for r in csv.DictReader(open(tmp_path / name / "out" / "architecture.csv"))
        }
        for name in ("one", "three")
    )
    assert one.keys() == three.keys()
    for k in one:
        assert float(three[k]["loss_mean"]) == pytest.approx(float(one[k]["loss_mean"]))
        assert float(three[k]["flops"]) == pytest.approx(float(one[k]["flops"]))
    opt = [
        {
            o["label"]: o
            for o in json.loads((tmp_path / n / "out" / "architecture.json").read_text())["optima"]
        }
        for n in ("one", "three")
    ]
    for label in truth:
        assert opt[1][label]["aspect"] == pytest.approx(opt[0][label]["aspect"])
        assert opt[1][label]["hi"] > opt[1][label]["lo"]  # an interval, not [16, 16]


def test_a_scaling_sweep_is_refused_with_one_error_line(tmp_path, capsys):
    from analysis.inputs.synthetic import power_law, simulate_runs, write_runs

    laws = {"baseline": power_law(3.0, 0.07), "attnres_full": power_law(2.95, 0.07)}
    write_runs(
        tmp_path / "demo", simulate_runs(laws, (1e-9, 4e-9, 1.6e-8), (0, 1), (0.25, 0.5, 1.0))
    )
    for d in (tmp_path / "demo").rglob("results.json"):  # shapes recorded, as the trainer does
        r = json.loads(d.read_text())
        d.write_text(json.dumps({**r, "n_layer": 2, "n_head": 2, "d_model": 32}))
    assert main([str(tmp_path / "demo"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no run was trained with the shape rule") and "s1, s2, s3" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_named_size_without_reshapes_beside_it_is_left_out(tmp_path, capsys):
    write_sweep(tmp_path / "sw", {"baseline": (20.0, 4.0)})
    d = tmp_path / "sw" / "tiny-1" / "baseline" / "seed0"
    d.mkdir(parents=True)
    d.joinpath("results.json").write_text(
        json.dumps(
            dict(
                status="completed",
                variant="baseline",
                label="baseline",
                size="tiny-1",
                seed=0,
                n_layer=2,
                n_head=2,
                d_model=32,
                params_nonembedding=25_000,
                tokens=75_000,
                flops=1e11,
                val_loss=6.0,
            )
        )
    )
    assert main([str(tmp_path / "sw"), "--out", str(tmp_path / "out"), "--bootstrap", "50"]) == 0
    assert "tiny-1 have no re-shaped cell" in capsys.readouterr().err
    assert "tiny-1" not in (tmp_path / "out" / "architecture.csv").read_text()


def test_heatmap_titles_fit_a_one_aspect_grid():
    from analysis.estimates.shape_optima import Cell
    from analysis.report.plots import plt
    from analysis.report.shape_figures import heatmap_figure

    cells = [
        Cell(
            label,
            "tiny-2@a24",
            "tiny-2",
            24.0,
            None,
            2,
            2,
            48,
            56_640,
            167_936,
            1e12,
            {0: 5.0 + d, 1: 5.01 + d},
        )
        for label, d in (("baseline", 0.0), ("attnres_block_s2", -0.02))
    ]
    fig = heatmap_figure(
        cells, {("attnres_block_s2", "tiny-2@a24"): (-0.02, -0.03, -0.01, 2)}, [], "baseline"
    )
    fig.canvas.draw()
    box = fig.bbox
    titles = [fig._suptitle] + [ax.title for ax in fig.axes if ax.get_title()]
    assert len(titles) == 4
    for t in titles:
        ext = t.get_window_extent()
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, t.get_text()
    plt.close(fig)
