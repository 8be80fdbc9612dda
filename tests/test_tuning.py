"""analysis.tuning: the multiplier at the baseline's LR, at each variant's own, and the ratio with
its interval, on synthetic LR scans whose answer is known."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis.inputs.synthetic import power_law, shifted, simulate_lr_scan, write_runs
from analysis.tuning import main

COMPUTE = (1e-9, 4e-9, 1.6e-8)
LRS = (1e-3, 2e-3, 4e-3, 8e-3)
ALPHA = 0.05
BASE = power_law(3.0, ALPHA)


def scan(tmp_path, optimum, sigma_run=1e-4, seeds=(0, 1, 2, 3), M=1.2):
    laws = {
        "baseline": BASE,
        "attnres_block_n2": shifted(BASE, M),
        "attnres_full": shifted(BASE, M),
    }
    runs, lrs = simulate_lr_scan(
        laws,
        COMPUTE,
        seeds,
        LRS,
        optimum,
        curvature=0.05,
        sigma_run=sigma_run,
        rng=np.random.default_rng(1),
    )
    write_runs(tmp_path / "scan", runs, extra={rid: {"lr": lr} for rid, lr in lrs.items()})
    return tmp_path / "scan"


def run(tmp_path, root, capsys, *extra):
    rc = main([str(root), "--out", str(tmp_path / "out"), "--bootstrap", "300", *extra])
    cap = capsys.readouterr()
    return (
        rc,
        cap,
        (json.loads((tmp_path / "out" / "tuning.json").read_text()) if rc == 0 else None),
    )


def test_the_multiplier_both_ways_recovers_the_known_cost_of_the_baselines_lr(tmp_path, capsys):
    """Block's optimum is one grid step (x2) above the baseline's at every size, Full's is the
    baseline's. At the baseline's LR Block's loss is exp(c·log10(2)²) higher, which a power law
    of exponent alpha turns into a multiplier smaller by exp(-c·log10(2)²/alpha); at its own LR it
    is the true 1.2x. Full gets the same runs both ways: a ratio of exactly 1."""
    opt = {"baseline": [2e-3] * 3, "attnres_block_n2": [4e-3] * 3, "attnres_full": [2e-3] * 3}
    rc, cap, rep = run(tmp_path, scan(tmp_path, opt), capsys)
    assert rc == 0, cap.err
    rows = {r["variant"]: r for r in rep["variants"]}
    block, full = rows["attnres_block_n2"], rows["attnres_full"]
    cost = math.exp(-0.05 * math.log10(2) ** 2 / ALPHA)
    assert block["at_own_lr"]["multiplier"] == pytest.approx(1.2, rel=0.01)
    assert block["at_baseline_lr"]["multiplier"] == pytest.approx(1.2 * cost, rel=0.01)
    assert block["ratio"] == pytest.approx(1 / cost, rel=0.01)
    lo, hi = block["ratio_ci"]
    assert 1 < lo < 1 / cost < hi  # tuning matters here, and the interval says so
    assert all(x["own"] == 4e-3 and x["baseline"] == 2e-3 for x in block["lrs"].values())
    assert full["ratio"] == 1.0 and full["ratio_ci"] == [1.0, 1.0]
    assert "| attnres_block_n2 |" in (tmp_path / "out" / "tuning.md").read_text()
    assert "sensitivity to tuning" in cap.out


def test_with_seed_noise_the_intervals_cover_and_the_ratio_is_paired(tmp_path, capsys):
    """Realistic noise (1 % of loss per run, shared half by seed): the ratio's interval is
    narrower than either multiplier's, since both conditions share the seeds' draws."""
    opt = {
        "baseline": [2e-3] * 3,
        "attnres_block_n2": [4e-3, 4e-3, 2e-3],
        "attnres_full": [2e-3] * 3,
    }
    rc, cap, rep = run(tmp_path, scan(tmp_path, opt, sigma_run=0.01), capsys)
    assert rc == 0, cap.err
    block = next(r for r in rep["variants"] if r["variant"] == "attnres_block_n2")
    width = lambda ci: math.log(ci[1] / ci[0])  # noqa: E731
    assert width(block["ratio_ci"]) < width(block["at_own_lr"]["ci"])
    assert block["ratio_ci"][0] <= block["ratio"] <= block["ratio_ci"][1]


def test_bad_input_is_one_error_line(tmp_path, capsys):
    opt = {"baseline": [2e-3] * 3, "attnres_block_n2": [4e-3] * 3, "attnres_full": [2e-3] * 3}
    root = scan(tmp_path, opt)
    rc, cap, _ = run(tmp_path, root, capsys, "--baseline", "nope")
    assert rc == 2 and "it needs nope and at least one other variant" in cap.err
    # a variant not run at the baseline's best LR cannot be compared at it
    for d in root.glob("attnres_full/s2/*lr=0.002"):
        (d / "results.json").unlink()
    rc, cap, _ = run(tmp_path, root, capsys)
    assert rc == 2 and "attnres_full at size s2 was not run at baseline's grid-best LR" in cap.err
    # runs without an lr (results.json from before it was recorded)
    for f in root.rglob("results.json"):
        f.write_text(json.dumps({k: v for k, v in json.loads(f.read_text()).items() if k != "lr"}))
    rc, cap, _ = run(tmp_path, root, capsys)
    assert rc == 2 and "record no lr" in cap.err and cap.err.count("error:") == 1


def test_a_sweep_that_is_not_an_lr_scan_is_refused(tmp_path, capsys):
    """The demo (one LR per size, tests/golden/demo_runs) printed "sensitivity to tuning 1.00x
    [1.00, 1.00]": each variant's own LR was the baseline's by construction. Refused, as
    analysis.architecture refuses a scaling sweep; so is a scan where only the baseline moved."""
    import shutil

    from conftest import REPO

    demo = tmp_path / "demo"
    shutil.copytree(REPO / "tests" / "golden" / "demo_runs", demo)
    rc, cap, _ = run(tmp_path, demo, capsys)
    assert rc == 2 and cap.out == "" and not (tmp_path / "out").exists()
    assert cap.err.startswith(
        "error: not an LR scan: no variant beside baseline ran at two or "
        "more LRs at a size (attnres_block_n2 at tiny-1: lr 0.00531 only)"
    )
    assert len(cap.err.splitlines()) == 1 and "analysis.fit" in cap.err

    opt = {"baseline": [2e-3] * 3, "attnres_block_n2": [4e-3] * 3, "attnres_full": [2e-3] * 3}
    root = scan(tmp_path, opt)
    for d in root.glob("attnres_*/s*/*"):
        if not d.name.endswith("lr=0.002"):
            shutil.rmtree(d)
    rc, cap, _ = run(tmp_path, root, capsys)
    assert rc == 2 and cap.err.startswith("error: not an LR scan")
