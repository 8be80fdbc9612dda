"""End to end: `python -m analysis.fit` on fake sweeps and CSVs."""

import json

import pytest

from analysis.fit import main
from analysis.inputs.synthetic import make_sweep
from andrea.run.rundir import RunDir

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    make_sweep(root, seeds=(0, 1))
    (root / "baseline/s6/seed0/.hydra").mkdir(parents=True)  # still running
    RunDir(root / "attnres_full/s6/seed0").write_results(
        {"status": "failed", "error": "NaN loss at step 812", "variant": "attnres_full"}
    )
    return root


def _strict_json(path):
    def bad(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(path.read_text(), parse_constant=bad)


def test_full_analysis(sweep, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(sweep), "--out", str(out), "--bootstrap", "200", "--c-ref", "2", "5.6"]) == 0
    text = capsys.readouterr().out
    assert "Collected 50 completed run(s)" in text
    assert "NaN loss at step 812" in text and "baseline/s6/seed0" in text
    assert "attnres_block_s4" in text and "Compute multiplier vs baseline" in text
    for name in (
        "fits.json",
        "fit_table.md",
        "fit_table.csv",
        "fit_table.tex",
        "scaling.png",
        "scaling.pdf",
        "multiplier.png",
        "ablation.png",
        "dynamics.png",
    ):
        assert (out / name).stat().st_size > 0, name
    for name in ("scaling.png", "multiplier.png", "ablation.png", "dynamics.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000, name

    rep = _strict_json(out / "fits.json")
    assert rep["settings"]["baseline"] == "baseline" and rep["settings"]["bootstrap"] == 200
    assert set(rep["fits"]) == {
        "baseline",
        "attnres_full",
        "attnres_block_s2",
        "attnres_block_s4",
        "attnres_block_s8",
    }
    f = rep["fits"]["attnres_block_s4"]
    assert f["n_points"] == 5 and f["ci"]["alpha"][0] < f["alpha"] < f["ci"]["alpha"][1]
    assert f["lsq"]["alpha"] == pytest.approx(f["alpha"], abs=0.005)
    ms = rep["multipliers"]["at_c_ref"]
    assert len(ms) == 8 and {m["c_ref_pflops_days"] for m in ms} == {2.0, 5.6}
    m = next(m for m in ms if m["variant"] == "attnres_block_s4" and m["c_ref_pflops_days"] == 5.6)
    assert 1.0 < m["multiplier"] < 1.6 and m["ci"][0] <= m["multiplier"] <= m["ci"][1]
    assert len(rep["multipliers"]["curves"]["attnres_full"]["lo"]) == 60
    assert rep["runs"]["failed"][0]["error"] == "NaN loss at step 812"
    assert len(rep["runs"]["running_or_missing"]) == 1
    p = next(p for p in rep["points"] if p["label"] == "baseline" and p["size"] == "s1")
    assert p["n_seeds"] == 2 and p["val_loss_std"] > 0

    csv_lines = (out / "fit_table.csv").read_text().splitlines()
    assert csv_lines[0].startswith("variant,form,n_points,A,A_lo,A_hi,alpha")
    assert csv_lines[1].startswith("baseline,") and len(csv_lines) == 6
    tex = (out / "fit_table.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"attnres\_block\_s4" in tex


def test_csv_input_other_baseline_and_bad_variant(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    rows = ["variant,size,flops,val_loss"]
    for i, C in enumerate([1e18, 1e19, 1e20, 1e21]):
        rows += [
            f"ref,s{i},{C},{3.0 * (C / 1e18) ** -0.05}",
            f"new,s{i},{C},{2.95 * (C / 1e18) ** -0.05}",
        ]
    rows += ["lonely,s0,1e18,3.0", "new,s9,0,2.0"]
    p.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    assert (
        main([str(p), "--out", str(out), "--baseline", "ref", "--bootstrap", "50", "--no-plots"])
        == 0
    )
    text = capsys.readouterr().out
    assert "not fitted: lonely: 1 point(s)" in text and "runs.csv line 10" in text
    assert "runs.csv line 11: flops=0.0 is not positive" in text
    rep = _strict_json(out / "fits.json")
    assert set(rep["fits"]) == {"ref", "new"} and "lonely" in rep["not_fitted"]
    m = rep["multipliers"]["at_c_ref"][0]
    assert m["variant"] == "new" and m["multiplier"] == pytest.approx((3.0 / 2.95) ** 20, rel=1e-3)
    assert not (out / "scaling.png").exists()


def test_irreducible_cli(tmp_path):
    root = tmp_path / "s"
    make_sweep(
        root,
        laws={("baseline", None): (1.9, 0.06), ("attnres_full", None): (1.87, 0.06)},
        dynamics=False,
    )
    out = tmp_path / "out"
    assert (
        main([str(root), "--out", str(out), "--irreducible", "--bootstrap", "30", "--no-plots"])
        == 0
    )
    rep = _strict_json(out / "fits.json")
    assert rep["settings"]["form"] == "irreducible" and "E" in rep["fits"]["baseline"]["ci"]


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda d: None, "no such file"),
        (lambda d: d.mkdir(), "no completed runs"),
        (lambda d: (d.parent / "x.csv").write_text("variant,size\n"), "missing required column"),
    ],
)
def test_bad_input_exits_nonzero(tmp_path, capsys, make, match):
    target = tmp_path / "in"
    make(target)
    arg = tmp_path / "x.csv" if (tmp_path / "x.csv").exists() else target
    assert main([str(arg), "--out", str(tmp_path / "out")]) != 0
    assert match in capsys.readouterr().err


def test_dynamics_runs_selection(sweep, tmp_path, capsys):
    out = tmp_path / "out"
    run = sweep / "attnres_block_s4" / "s2" / "seed1"
    assert (
        main(
            [
                str(sweep),
                "--out",
                str(out),
                "--bootstrap",
                "0",
                "--dynamics-runs",
                "baseline:s3",
                str(run),
                "nosuch:s1",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "dynamics: baseline:s3 seed 0, attnres_block_s4:s2 seed 1" in text
    assert "no run matches 'nosuch:s1'" in text
    assert (out / "dynamics.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize("mode", ["disabled", "offline"])
def test_wandb_never_blocks(sweep, tmp_path, monkeypatch, capsys, mode):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "out"
    assert (
        main(
            [
                str(sweep),
                "--out",
                str(out),
                "--bootstrap",
                "20",
                "--no-plots",
                "--wandb",
                "--wandb-mode",
                mode,
                "--wandb-group",
                "test",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert f"W&B: logged to project andrea, group test (mode {mode})" in text
    if mode == "offline":
        assert "wandb sync" in text and any((out / "wandb").glob("offline-run-*"))


def test_paired_bootstrap(sweep, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(
            [
                str(sweep),
                "--out",
                str(out),
                "--bootstrap",
                "100",
                "--no-plots",
                "--paired-bootstrap",
            ]
        )
        == 0
    )
    assert "unpaired" not in capsys.readouterr().out
    rep = _strict_json(out / "fits.json")
    assert rep["settings"]["paired_bootstrap"] is True
    m = rep["multipliers"]["at_c_ref"][0]
    assert m["ci"][0] <= m["multiplier"] <= m["ci"][1]


def test_paired_bootstrap_falls_back_for_other_sizes(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    rows = ["variant,size,flops,val_loss"]
    rows += [
        f"baseline,s{i},{C},{3.0 * (C / 1e18) ** -0.05}" for i, C in enumerate([1e18, 1e19, 1e20])
    ]
    rows += [f"new,s{i},{C},{2.9 * (C / 1e18) ** -0.05}" for i, C in enumerate([1e18, 1e19])]
    p.write_text("\n".join(rows) + "\n")
    assert (
        main(
            [
                str(p),
                "--out",
                str(tmp_path / "o"),
                "--bootstrap",
                "50",
                "--no-plots",
                "--paired-bootstrap",
            ]
        )
        == 0
    )
    assert (
        "new has sizes ['s0', 's1'], the baseline ['s0', 's1', 's2']; its bootstrap is unpaired"
        in capsys.readouterr().out
    )


def test_few_sizes_warn_once_for_all_variants_that_share_them(tmp_path, capsys):
    p = tmp_path / "runs.csv"
    computes = [1e18, 1e19, 1e20, 1e21]
    rows = ["variant,size,flops,val_loss"]
    for variant, A in (("baseline", 3.0), ("attnres_full", 2.9), ("attnres_block", 2.95)):
        rows += [
            f"{variant},s{i},{C},{A * (C / 1e18) ** -0.05 * (1 + 0.001 * (-1) ** i)}"
            for i, C in enumerate(computes)
        ]
    p.write_text("\n".join(rows) + "\n")
    assert main([str(p), "--out", str(tmp_path / "o"), "--bootstrap", "50", "--no-plots"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if "distinct resamples" in l]
    assert len(lines) == 1, lines
    labels, _, text = lines[0].removeprefix("warning: ").partition(": ")
    assert sorted(labels.split(", ")) == ["attnres_block", "attnres_full", "baseline"]
    assert text.startswith("4 sizes: a bootstrap over them has at most 31 distinct resamples")
    report = json.loads((tmp_path / "o" / "fits.json").read_text())
    assert sum("distinct resamples" in w for w in report["warnings"]) == 3  # per fit, on disk


def test_multi_point_seeds_sweep_with_device_seconds(tmp_path, capsys):
    """A sweep of WSD runs (4 budgets each, 2 seeds) written as results.json with `points`:
    the seed bootstrap, seed noise, L(N, D), frontier, isoFLOP figure and device-seconds."""
    from test_analysis_laws import nd_sweep_runs

    from analysis.inputs.synthetic import write_runs

    runs = nd_sweep_runs()
    write_runs(tmp_path / "sweep", runs, {"baseline": 1e-12, "attnres_full": 1.05e-12})
    out = tmp_path / "out"
    assert main([str(tmp_path / "sweep"), "--out", str(out), "--bootstrap", "100"]) == 0
    text = capsys.readouterr().out
    assert "Collected 16 completed run(s) (64 points)" in text
    assert "sizes, not seeds" not in text
    assert "bootstrap resamples over seeds" in text and "Seed noise" in text
    assert "Chinchilla L(N, D)" in text and "hardware-specific" in text and "test-cpu" in text
    rep = _strict_json(out / "fits.json")
    assert rep["settings"]["interval"] == {"baseline": "seeds", "attnres_full": "seeds"}
    f = rep["fits"]["baseline"]
    # the C-law is fitted on each run's final point (analysis.estimates.estimate.C_LAW_POINTS);
    # L(N, D) on all
    assert (f["n_points"], f["n_runs"]) == (4, 8) and rep["settings"]["c_law_points"] == "final"
    assert rep["chinchilla"]["fits"]["baseline"]["n_points"] == 32
    assert len(rep["seed_noise"]) == 8 and all(r["std_log_loss"] > 0 for r in rep["seed_noise"])
    ch = rep["chinchilla"]["fits"]["baseline"]
    assert ch["a"] > 0 and ch["b"] > 0
    # N and D both count 1.1x: 1.21x the compute at every loss
    assert rep["chinchilla"]["multipliers"][0]["multiplier"] == pytest.approx(1.21, rel=0.05)
    m = rep["multipliers"]["at_c_ref"][0]
    assert not m["c_ref_outside_baseline_data"] and m["interval"] == "seeds"
    # device time is FLOPs x 1e-12 s for the baseline, 5 % slower per FLOP for Full
    dev = rep["device_seconds"]
    assert dev["hardware_specific"] and dev["device_names"] == ["test-cpu"]
    assert dev["multipliers"][0]["multiplier"] < m["multiplier"]
    assert rep["frontier"]["baseline"] and rep["other_form"]["form"] == "irreducible"
    for name in ("frontier.png", "isoflop.png"):
        assert (out / name).read_bytes()[:8] == PNG


def test_one_size_multiplier_says_it_is_not_a_scaling_law(tmp_path, capsys):
    """one size with three budgets printed a multiplier without a word, while the
    planner says a multiplier needs two or more sizes. The fit now says the same beside it."""
    rows = ["variant,size,seed,budget,params,tokens,flops,val_loss"]
    for v, shift in (("baseline", 0.0), ("attnres_full", -0.02)):
        for seed in (0, 1, 2):
            for b in (0.25, 0.5, 1.0):
                loss = 6.0 + shift - 0.3 * b + 0.01 * seed
                rows.append(f"{v},tiny-2,{seed},{b},1e5,{2e6 * b},{1.2e12 * b},{loss}")
    (tmp_path / "one.csv").write_text("\n".join(rows) + "\n")
    # The primary C-law fits each run's final point: one size gives one compute value, refused.
    assert (
        main(
            [
                str(tmp_path / "one.csv"),
                "--out",
                str(tmp_path / "f"),
                "--bootstrap",
                "50",
                "--no-plots",
            ]
        )
        == 1
    )
    assert "two or more sizes" in capsys.readouterr().out
    assert (
        main(
            [
                str(tmp_path / "one.csv"),
                "--out",
                str(tmp_path / "o"),
                "--bootstrap",
                "50",
                "--no-plots",
                "--c-law-points",
                "all",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "span one size (tiny-2)" in out and "two or more sizes" in out
    rep = _strict_json(tmp_path / "o" / "fits.json")
    assert any("span one size" in w for w in rep["warnings"])


def test_a_sweep_of_only_the_baseline_exits_1_saying_no_multiplier(tmp_path, capsys):
    """A sweep of only the baseline exited 0 with an empty multiplier table: the answer the
    command exists for was missing and a script could not tell. It still writes the fit table."""
    from analysis.inputs.synthetic import DEFAULT_LAWS

    make_sweep(tmp_path / "s", laws={("baseline", None): DEFAULT_LAWS[("baseline", None)]})
    out = tmp_path / "out"
    argv = [str(tmp_path / "s"), "--out", str(out), "--bootstrap", "20", "--no-plots"]
    assert main(argv) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert err[-1] == (
        "error: no compute multiplier: the runs hold only the baseline 'baseline', "
        f"no variant beside it (its fit is written: python -m analysis.predict {out} QUERY.csv "
        "asks it for a loss)"
    )
    assert "baseline" in (out / "fit_table.csv").read_text()
