import numpy as np
import pytest
from test_analysis_powerlaw import fit_power_law

from analysis.estimates.multiplier import multiplier_at, multiplier_curve
from analysis.inputs.collect import aggregate, by_label, collect
from analysis.inputs.synthetic import make_sweep
from analysis.report import plots, plots_multiplier, plots_scaling
from andrea.run.rundir import RunDir, read_json

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path, min_bytes=5000):
    data = path.read_bytes()
    return data[:8] == PNG and len(data) > min_bytes


def test_every_figure_renders(tmp_path):
    sweep = tmp_path / "sweep"
    make_sweep(sweep, seeds=(0, 1))
    points, _ = aggregate(collect([sweep]).runs)
    groups = by_label(points)
    fits = {
        lb: fit_power_law(lb, [p.compute for p in ps], [p.val_loss for p in ps], n_bootstrap=100)
        for lb, ps in groups.items()
    }
    base = fits["baseline"]
    at_ref = [multiplier_at(base, f, 5.6) for lb, f in fits.items() if lb != "baseline"]
    curves = {lb: multiplier_curve(base, f) for lb, f in fits.items() if lb != "baseline"}
    out = tmp_path / "figs"

    plots_scaling.plot_scaling(groups, fits, 5.6, [out / "scaling.png", out / "scaling.pdf"])
    assert _is_png(out / "scaling.png")
    pdf = (out / "scaling.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-" and len(pdf) > 5000

    plots_multiplier.plot_multiplier(curves, at_ref, [out / "multiplier.png"])
    assert _is_png(out / "multiplier.png")

    msg = plots.plot_ablation(points, [out / "ablation.png"])
    assert "S = 2, 4, 8" in msg and _is_png(out / "ablation.png")

    runs = []
    for lb, ps in groups.items():
        p = max(ps, key=lambda p: p.flops)
        runs.append(
            {"label": lb, "size": p.size, "dyn": read_json(RunDir(p.runs[0].run_dir).dynamics)}
        )
    plots.plot_dynamics(runs, [out / "dynamics.png"])
    assert _is_png(out / "dynamics.png")


def test_ablation_skips_without_block_runs(tmp_path):
    make_sweep(tmp_path / "s", laws={("baseline", None): (2.0, 0.05)}, dynamics=False)
    points, _ = aggregate(collect([tmp_path / "s"]).runs)
    msg = plots.plot_ablation(points, [tmp_path / "ablation.png"])
    assert "skipped" in msg and not (tmp_path / "ablation.png").exists()


def test_figures_survive_unfitted_and_infinite_values(tmp_path):
    """A variant without a fit is still drawn as points; inf/NaN multipliers do not crash."""
    make_sweep(tmp_path / "s", compute=(0.1, 1.0), dynamics=False)
    points, _ = aggregate(collect([tmp_path / "s"]).runs)
    groups = by_label(points)
    fits = {
        "baseline": fit_power_law(
            "baseline",
            [p.compute for p in groups["baseline"]],
            [p.val_loss for p in groups["baseline"]],
            n_bootstrap=20,
        )
    }
    plots_scaling.plot_scaling(groups, fits, None, [tmp_path / "a.png"])
    curve = {
        "compute_pflops_days": [0.1, 1.0],
        "multiplier": [np.inf, 1.2],
        "lo": [np.nan, 1.1],
        "hi": [np.inf, 1.3],
    }
    plots_multiplier.plot_multiplier({"attnres_full": curve}, [], [tmp_path / "m.png"])
    assert _is_png(tmp_path / "a.png") and _is_png(tmp_path / "m.png", 1000)


def test_colours_are_stable_per_variant():
    a = plots.colours(["baseline", "attnres_full", "attnres_block_s4"])
    b = plots.colours(["attnres_block_s4", "baseline", "attnres_full"])
    assert a == b and len(set(a.values())) == 3


def test_ablation_compares_final_points_and_skips_a_single_block_size(tmp_path):
    """with three budgets per run and one S, ablation.png drew Block at every budget
    and the references at their first, under a block-size title. One S: nothing to draw."""
    import json

    for label, variant, S in (
        ("baseline", "baseline", None),
        ("attnres_full", "attnres_full", None),
        ("attnres_block_n2", "attnres_block", 2),
    ):
        d = tmp_path / "s" / "tiny-2" / label / "seed0"
        d.mkdir(parents=True)
        pts = [
            dict(budget=b, tokens=1000 * b, flops=1e12 * b, val_loss=7 - b) for b in (0.25, 0.5, 1)
        ]
        (d / "results.json").write_text(
            json.dumps(
                dict(
                    status="completed",
                    variant=variant,
                    label=label,
                    block_size=S,
                    size="tiny-2",
                    seed=0,
                    tokens=1000,
                    flops=1e12,
                    val_loss=6.0,
                    points=pts,
                )
            )
        )
    points, _ = aggregate(collect([tmp_path / "s"]).runs)
    msg = plots.plot_ablation(points, [tmp_path / "ablation.png"])
    assert "one block size" in msg and "skipped" in msg
    assert not (tmp_path / "ablation.png").exists()


def test_dynamics_colour_scale_marks_weights_above_it(tmp_path, monkeypatch):
    """the heatmap's scale topped out at ~0.8 while layer 0's weight is 1.0, clipped
    without a sign. A clipped scale now has an arrow and says what lies above it."""
    figs = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, paths: figs.append(fig))
    dyn = {
        "layer_rms": [1.0, 0.5, 0.4],
        "step": 10,
        "depth_weights": [[1.0], [0.3, 0.7], [0.2, 0.5, 0.3], [0.1, 0.1, 0.4, 0.4]],
    }
    plots.plot_dynamics(
        [{"label": "attnres_full", "size": "tiny-1", "dyn": dyn}], [tmp_path / "d.png"]
    )
    bar = [a for a in figs[0].axes if "weight" in a.get_ylabel()][0]
    assert "above 0.70" in bar.get_ylabel() and "1.00" in bar.get_ylabel()
    assert figs[0].axes[1].images[0].colorbar.extend == "max"


def test_multiplier_axis_is_log_and_a_wide_interval_is_clipped_with_a_mark():
    # two sizes: [0.92, 553.70] drew a linear axis to 450,000 and flattened every curve onto 0
    curve = {
        "compute_pflops_days": [1e-9, 2e-9, 4e-9],
        "multiplier": [1.4, 1.5, 1.6],
        "lo": [0.9, 0.92, 0.95],
        "hi": [300.0, 553.7, 900.0],
    }
    m = {
        "variant": "attnres_full",
        "multiplier": 1.52,
        "ci": (0.92, 553.7),
        "c_ref_pflops_days": 2e-9,
        "ci_level": 0.95,
    }
    fig = plots_multiplier.multiplier_figure({"attnres_full": curve}, [m])
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    lo, hi = ax.get_ylim()
    assert hi < 10 and lo < 0.92 and 1.52 / lo < 2 * plots_multiplier.MULTIPLIER_SPAN
    assert any(ln.get_gid() == "clipped:attnres_full" for ln in ax.lines)
    assert any("553.7 (clipped)" in t.get_text() for t in ax.texts)
    assert "clipped" in ax.get_title()
    plots.plt.close(fig)
    # a narrow interval: nothing clipped, the whole band shown
    narrow = {**curve, "lo": [1.2, 1.3, 1.4], "hi": [1.7, 1.8, 1.9]}
    fig = plots_multiplier.multiplier_figure({"attnres_full": narrow}, [{**m, "ci": (1.3, 1.8)}])
    ax = fig.axes[0]
    assert ax.get_ylim()[1] > 1.9 and not any(ln.get_gid() for ln in ax.lines if ln.get_gid())
    assert "clipped" not in ax.get_title()
    plots.plt.close(fig)


def test_scaling_fits_are_drawn_over_their_data_and_an_extrapolation_is_marked(tmp_path):
    # each run's final point is fitted; its 1/4-budget point lies 4x lower in compute, and the
    # fit drawn there sat far above the measured points
    from analysis.estimates.estimate import fit_variants
    from analysis.fits.settings import FitSettings
    from analysis.inputs.collect import final_points
    from analysis.inputs.synthetic import power_law, shifted, simulate_runs

    b = power_law(3.0, 0.05)
    runs = simulate_runs(
        {"baseline": b, "attnres_full": shifted(b, 1.25)},
        (1e-9, 3e-9, 9e-9),
        (0, 1, 2),
        (0.25, 0.5, 1.0),
        rng=np.random.default_rng(0),
    )
    res = fit_variants(final_points(runs), "baseline", FitSettings(n_bootstrap=100))
    groups = by_label(aggregate(runs)[0])
    for c_ref, extrapolated in ((3e-9, False), (1e-7, True)):
        fig = plots_scaling.scaling_figure(groups, res.fits, c_ref)
        ax = fig.axes[0]
        for label, f in res.fits.items():
            lo, hi = f.compute_range
            line = next(ln for ln in ax.lines if ln.get_gid() == f"fit:{label}")
            x = line.get_xdata()
            assert x.min() >= lo * (1 - 1e-9) and x.max() <= hi * (1 + 1e-9)
            band = next(c for c in ax.collections if c.get_gid() == f"band:{label}")
            bx = np.concatenate([p.vertices[:, 0] for p in band.get_paths()])
            assert bx.min() >= lo * (1 - 1e-9) and bx.max() <= hi * (1 + 1e-9)
            ext = [ln for ln in ax.lines if ln.get_gid() == f"extrapolated:{label}"]
            assert bool(ext) == extrapolated
            if ext:
                assert ext[0].get_xdata().max() == pytest.approx(c_ref)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("extrapolated" in t for t in legend) == extrapolated
        plots.plt.close(fig)


def test_many_bands_move_to_one_panel_per_variant_beside_the_baseline():
    # the rivals' sweep: five fitted labels' hatched bands on one axis were unreadable
    from analysis.estimates.estimate import fit_variants
    from analysis.fits.settings import FitSettings
    from analysis.inputs.collect import final_points
    from analysis.inputs.synthetic import power_law, shifted, simulate_runs

    b = power_law(3.0, 0.05)
    laws = {
        "baseline": b,
        "attnres_full": shifted(b, 1.25),
        "attnres_block_n2": shifted(b, 1.3),
        "mhc": shifted(b, 1.1),
        "mhc_lite": shifted(b, 1.05),
    }
    runs = simulate_runs(laws, (1e-9, 3e-9, 9e-9), (0, 1, 2), rng=np.random.default_rng(0))
    res = fit_variants(final_points(runs), "baseline", FitSettings(n_bootstrap=100))
    fig = plots_scaling.scaling_figure(by_label(aggregate(runs)[0]), res.fits, 3e-9)
    main, *panels = fig.axes

    def bands(ax):
        return sorted(
            c.get_gid() for c in ax.collections if (c.get_gid() or "").startswith("band:")
        )

    assert bands(main) == [] and len(panels) == 4
    assert {frozenset(bands(ax)) for ax in panels} == {
        frozenset(("band:baseline", f"band:{lb}")) for lb in laws if lb != "baseline"
    }
    assert len([ln for ln in main.lines if (ln.get_gid() or "").startswith("fit:")]) == 5
    plots.plt.close(fig)
    # three bands still share one axis
    three = {k: laws[k] for k in ("baseline", "attnres_full", "attnres_block_n2")}
    runs = simulate_runs(three, (1e-9, 3e-9, 9e-9), (0, 1, 2), rng=np.random.default_rng(0))
    res = fit_variants(final_points(runs), "baseline", FitSettings(n_bootstrap=100))
    fig = plots_scaling.scaling_figure(by_label(aggregate(runs)[0]), res.fits, 3e-9)
    assert len(fig.axes) == 1 and len(bands(fig.axes[0])) == 3
    plots.plt.close(fig)


def test_dynamics_figure_names_the_seed_it_shows(tmp_path):
    from analysis.report.fit_outputs import _dynamics_runs

    sweep = tmp_path / "sweep"
    make_sweep(sweep, seeds=(3, 5))
    points, _ = aggregate(collect([sweep]).runs)
    runs, msgs = _dynamics_runs(points, None, "baseline")
    assert runs and all(r["seed"] in (3, 5) for r in runs)
    fig = plots.dynamics_figure(runs)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert all(f"seed {r['seed']}" in t for r, t in zip(runs, legend))
    titles = [ax.get_title() for ax in fig.axes[1:] if ax.get_visible() and ax.get_title()]
    assert titles and all("seed" in t for t in titles)
    plots.plt.close(fig)
