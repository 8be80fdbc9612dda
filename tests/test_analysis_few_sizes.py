"""The analysis of small sweeps: the README's own grid `size=tiny-1,tiny-2` gives two
sizes, where every bootstrap resample is the fit itself and a multiplier's interval collapses onto
its point (or a rounding error beside it). Such sweeps must plot and tabulate, and a variant with
too few sizes to fit must say so."""

import numpy as np

from analysis.fit import main
from analysis.inputs.synthetic import make_sweep
from analysis.report import plots_multiplier, plots_scaling

PNG = b"\x89PNG\r\n\x1a\n"


def _run(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_two_size_sweep_plots_and_tabulates(tmp_path, capsys):
    make_sweep(tmp_path / "s", compute=(0.1, 0.3), dynamics=False)
    out = tmp_path / "out"
    rc, text = _run([str(tmp_path / "s"), "--out", str(out), "--bootstrap", "100"], capsys)
    assert rc == 0, text
    for name in ("scaling.png", "multiplier.png", "ablation.png", "fit_table.md"):
        assert (out / name).exists(), name
    assert (out / "scaling.png").read_bytes()[:8] == PNG
    assert "Compute multiplier vs baseline" in text  # the table printed, after the figures
    assert "attnres_full" in (out / "fit_table.md").read_text()


def test_one_point_per_variant_says_not_fitted(tmp_path, capsys):
    """One size (one point per variant): nothing can be fitted; the figure still shows the
    points and the output says why, with no traceback."""
    make_sweep(tmp_path / "s", compute=(0.3,), dynamics=False)
    out = tmp_path / "out"
    rc, text = _run([str(tmp_path / "s"), "--out", str(out), "--bootstrap", "50"], capsys)
    assert rc == 1  # nothing fitted: an exit status a script can test
    assert "not fitted" in text and "Traceback" not in text
    assert (out / "scaling.png").read_bytes()[:8] == PNG


def test_multiplier_interval_a_rounding_error_beside_its_point(tmp_path):
    """The crash of the issue, reduced: the interval lies 1e-15 below the point."""
    m = 1.1350445065135744
    at_ref = [
        {
            "variant": "attnres_full",
            "multiplier": m,
            "ci": (m - 4e-16, m - 4e-16),
            "c_ref_pflops_days": 0.3,
            "warning": None,
        }
    ]
    curve = {"compute_pflops_days": [0.1, 0.3], "multiplier": [m, m], "lo": [m, m], "hi": [m, m]}
    plots_multiplier.plot_multiplier({"attnres_full": curve}, at_ref, [tmp_path / "m.png"])
    assert (tmp_path / "m.png").read_bytes()[:8] == PNG


def test_scaling_title_tells_what_is_drawn(tmp_path):
    from test_analysis_powerlaw import fit_power_law

    from analysis.inputs.collect import aggregate, by_label, collect

    def title(seeds, n_boot):
        root = tmp_path / f"s{len(seeds)}_{n_boot}"
        make_sweep(root, compute=(0.1, 0.3, 1.0), seeds=seeds, dynamics=False)
        groups = by_label(aggregate(collect([root]).runs)[0])
        fits = {
            lb: fit_power_law(
                lb, [p.compute for p in ps], [p.val_loss for p in ps], n_bootstrap=n_boot
            )
            for lb, ps in groups.items()
        }
        banded = n_boot > 10
        return plots_scaling._scaling_title(groups, fits, banded)

    one = title((0,), 50)
    assert "std" not in one and "one seed per point, no error bars" in one
    assert "bootstrap CI" in one
    two = title((0, 1), 0)
    assert "error bars: ±1 std over 2 seeds" in two and "bootstrap" not in two


def test_dodge_is_centred_and_separates_series():
    n = 3
    xs = [plots_scaling._dodge(k, n, decades=2.0) for k in range(n)]
    assert np.isclose(xs[1], 1.0) and xs[0] < 1 < xs[2]
    assert np.isclose(xs[0] * xs[2], 1.0)  # symmetric on a log axis
    assert np.isclose(np.log10(xs[2] / xs[1]), 0.008 * 2.0)  # 0.8% of a 2-decade axis apart


def test_results_json_that_is_valid_json_but_not_an_object(tmp_path):
    """`[1, 2, 3]` parses: call it what it is, unlike a half-written file."""
    from analysis.inputs.collect import collect
    from andrea.run.rundir import RunDir

    odd, broken = RunDir(tmp_path / "odd"), RunDir(tmp_path / "broken")
    for rd in (odd, broken):
        rd.root.mkdir(parents=True)
    odd.results.write_text("[1, 2, 3]")
    broken.results.write_text('{"status": "compl')
    reasons = dict(collect([tmp_path]).invalid)
    assert reasons[str(odd.root)] == (
        "results.json is valid JSON, but a list, not a results object (a JSON object)"
    )
    assert "not valid JSON" in reasons[str(broken.root)]


def test_two_sizes_two_seeds_warn_of_unmeasured_coverage_and_say_why_a_line_is_missing(
    tmp_path, capsys
):
    from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs

    b = power_law(3.0, 0.05)
    laws = {"baseline": b, "attnres_full": shifted(b, 1.25)}
    write_runs(
        tmp_path / "s",
        simulate_runs(laws, (1e-9, 2.5e-9), (0, 1), (0.25, 0.5, 1.0), rng=np.random.default_rng(0)),
    )
    rc, text = _run(
        [str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--bootstrap", "100", "--no-plots"],
        capsys,
    )
    assert rc == 0, text
    assert (
        "! the coverage of this interval was never measured for a design of 2 sizes with 2 "
        "seed(s) per size"
    ) in text
    assert (
        "Cross-check with L = E + A·C^-alpha: not fitted (baseline: 2 distinct compute "
        "value(s); the irreducible law has 3 parameters and needs at least 3 sizes)"
    ) in text
    # a design the coverage tables hold (3 sizes x 3 seeds) gets neither
    write_runs(
        tmp_path / "m",
        simulate_runs(laws, (1e-9, 2.5e-9, 6e-9), (0, 1, 2), (1.0,), rng=np.random.default_rng(0)),
    )
    rc, text = _run(
        [str(tmp_path / "m"), "--out", str(tmp_path / "o2"), "--bootstrap", "100", "--no-plots"],
        capsys,
    )
    assert rc == 0 and "never measured" not in text and "alpha: not fitted" not in text
    assert "Cross-check with L = E + A·C^-alpha (point estimates):" in text
