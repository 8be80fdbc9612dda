"""analysis.next_runs: a proposal within budget that narrows the predicted interval at least as
much as uniform seeds of the same cost (bench/next_runs_check.py checks it by simulation)."""

import numpy as np
import pytest

from analysis.estimates import seed_planner
from analysis.estimates.seed_planner import (
    MAX_SEED_RATIO,
    PRECISION_FLOOR,
    propose,
    with_added,
    worst_half_width,
)
from analysis.inputs.synthetic import power_law, shifted, simulate_runs, write_runs
from analysis.next_runs import main
from analysis.report.planner_lines import commands

PEAK, MFU = 989e12, 0.35
NOISE = {"sigma_run": 0.012, "rho": 0.3, "sigma_point": 0.003}


def _finished():
    b = power_law(3.0, 0.07)
    laws = {"baseline": b, "attnres_full": shifted(b, 1.25)}
    return simulate_runs(
        laws, (1e-3, 4e-3, 1.8e-2), (0, 1), (0.25, 0.5, 1.0), rng=np.random.default_rng(0)
    )


def _round_cost(runs):
    return sum(r.flops for r in runs if r.point == 2) / 2 / (PEAK * MFU) / 3600


def test_proposal_spends_within_budget_and_beats_uniform():
    runs = _finished()
    budget = 6 * _round_cost(runs)
    prop = propose(runs, budget, "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert 0 < prop["spent_gpu_hours"] <= budget * (1 + 1e-9)
    assert prop["uniform_rounds"] == 6
    assert prop["after"] < prop["before"] and prop["after"] <= prop["uniform_after"]
    # the reported half-width is the grid's own prediction
    grid = with_added(prop["finished"], prop["added"])
    assert prop["after"] == pytest.approx(worst_half_width(grid, "baseline", NOISE, 0.07))
    seeds = [len({r.seed for r in grid if r.size == s}) for s in prop["sizes"]]
    assert seeds == [prop["seeds"][s] for s in prop["sizes"]]
    assert max(seeds) <= MAX_SEED_RATIO * min(seeds), seeds  # no lopsided design (see module)
    # the cap binds here (the cheap sizes would take more) and a tighter one is honoured
    assert max(seeds) == MAX_SEED_RATIO * min(seeds), seeds
    tight = propose(runs, budget, "baseline", PEAK, MFU, noise=NOISE, alpha=0.07, max_seed_ratio=2)
    assert max(tight["seeds"].values()) <= 2 * min(tight["seeds"].values())
    assert tight["after"] >= prop["after"]
    n_new = len(grid) - len(prop["finished"])
    assert n_new == 2 * sum(prop["added"].values())  # a seed of each of the 2 labels
    for c in commands(prop, "demo"):
        assert c.startswith("python sweep.py -m sweeps=demo size=s") and "train.seed=" in c
        assert "train.seed=0" not in c and "train.seed=1," not in c  # new seed numbers only


def test_a_budget_below_one_seed_adds_nothing():
    runs = _finished()
    prop = propose(runs, 1e-3 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert prop["added"] == {} and prop["after"] == prop["before"] and prop["uniform_rounds"] == 0


def test_cli(tmp_path, capsys):
    runs = _finished()
    write_runs(tmp_path / "demo", runs)
    assert main([str(tmp_path / "demo"), "--gpu-hours", str(2 * _round_cost(runs))]) == 0
    out = capsys.readouterr().out
    assert "now →" in out and "python sweep.py -m sweeps=demo size=" in out
    assert main([str(tmp_path / "demo"), "--gpu-hours", str(1e5 * _round_cost(runs))]) == 0
    out = capsys.readouterr().out
    assert "(it reaches ±10% after " in out and "±0.0%" not in out
    write_runs(tmp_path / "only", [r for r in runs if r.label == "baseline"])
    assert main([str(tmp_path / "only"), "--gpu-hours", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: need finished runs of 'baseline'")
    assert main([str(tmp_path / "demo"), "--gpu-hours", "0"]) == 2


def test_grouped_prediction_is_the_one_of_every_run():
    # the Design prices counts of runs; materialised run by run (analysis.estimates.power's rows),
    # the half-width is the same
    runs = _finished()
    prop = propose(runs, 40 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    grid = with_added(prop["finished"], prop["added"])
    from analysis.estimates import power

    rows = [r for r in grid if r.label == "baseline"], [r for r in grid if r.label != "baseline"]
    xb = power._design(rows[0])[0]
    sd = power.log_multiplier_sd(
        *rows, 0.07, power.DEFAULT_MULTIPLIER, NOISE, 0.5 * (xb.min() + xb.max())
    )
    df = min(power._df(rows[0]), power._df(rows[1]))
    assert prop["after"] == pytest.approx(power.half_width(sd, df), rel=1e-9)


@pytest.fixture
def bounded_steps(monkeypatch):
    """Fails a test whose allocation evaluates the design 5000 times or more."""
    calls = {"n": 0}
    real = seed_planner.Design.half_width

    def counted(self, *a, **k):
        calls["n"] += 1
        assert calls["n"] < 5000, "the allocation is not bounded"
        return real(self, *a, **k)

    monkeypatch.setattr(seed_planner.Design, "half_width", counted)


def test_any_budget_is_allocated_in_a_bounded_number_of_steps(bounded_steps):
    # One GPU-hour buys a million seeds of tiny CPU runs: a seed at a time, that was millions of
    # evaluations (the command never returned). Steps grow with the seeds: a few hundred.
    runs = _finished()
    # floor=0: no precision floor, so the whole budget is allocated (the floor: the next test)
    small = propose(
        runs, 30 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07, floor=0
    )
    prop = propose(
        runs, 1e6 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07, floor=0
    )
    assert (
        0.999e6 * _round_cost(runs)
        < prop["spent_gpu_hours"]
        <= 1e6 * _round_cost(runs) * (1 + 1e-9)
    )
    seeds = list(prop["seeds"].values())
    assert max(seeds) <= MAX_SEED_RATIO * min(seeds) and sum(seeds) > 0.99e6 * 2
    assert prop["after"] < small["after"] and prop["uniform_rounds"] == 1_000_000
    assert prop["after"] <= prop["uniform_after"] * 1.01
    # where ±10 % was reached on the way: far below such a budget
    assert 0 < prop["gpu_hours_to_target"] < 1e-3 * prop["spent_gpu_hours"]
    with pytest.raises(ValueError, match="finite"):
        propose(runs, float("inf"), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)


@pytest.mark.parametrize("hours", ["inf", "nan", "0", "-1"])
def test_cli_refuses_a_budget_that_is_not_finite_and_positive(tmp_path, capsys, hours):
    write_runs(tmp_path / "demo", _finished())
    assert main([str(tmp_path / "demo"), "--gpu-hours", hours]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: need a finite --gpu-hours > 0") and len(err.splitlines()) == 1


def test_cli_unknown_gpu_lists_the_known_ones(tmp_path, capsys):
    write_runs(tmp_path / "demo", _finished())
    assert main([str(tmp_path / "demo"), "--gpu-hours", "1", "--gpu", "XYZ"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --gpu 'XYZ'") and "H100 SXM" in err and "A100" in err


def test_a_budget_beyond_what_the_question_needs_stops_at_the_floor(bounded_steps):
    """A million rounds' budget no longer buys a million seeds and ±0.02 %: the proposal stops
    at ±PRECISION_FLOOR, in a bounded number of steps, and the uniform seeds it is compared with
    cost what it spends."""
    runs = _finished()
    budget = 1e6 * _round_cost(runs)
    prop = propose(runs, budget, "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert prop["at_floor"] and 0.9 * PRECISION_FLOOR < prop["after"] <= PRECISION_FLOOR
    assert prop["spent_gpu_hours"] < 1e-2 * budget
    assert prop["uniform_gpu_hours"] <= prop["spent_gpu_hours"] * (1 + 1e-9)
    seeds = list(prop["seeds"].values())
    assert max(seeds) <= MAX_SEED_RATIO * min(seeds) < 1e4
    small = propose(runs, 6 * _round_cost(runs), "baseline", PEAK, MFU, noise=NOISE, alpha=0.07)
    assert not small["at_floor"] and small["after"] > PRECISION_FLOOR


def _demo(tmp_path):
    """The demo's 36 finished CPU runs (trained on an Intel Xeon), copied."""
    import shutil

    from conftest import REPO

    shutil.copytree(REPO / "tests" / "golden" / "demo_runs", tmp_path / "demo")
    return tmp_path / "demo"


def test_cpu_runs_are_priced_by_their_measured_speed_with_the_fits_exponent(tmp_path, capsys):
    """The demo's tiny CPU runs were priced in H100-hours (a seed: 1e-7 GPU-h, so 10 GPU-h
    bought 5.7 million seeds per size and ±0.023 %) with an exponent of 0.031 fitted to every
    budget's point, where analysis.fit prints 0.0482 (each run's final point, every seed)."""
    import csv

    from conftest import REPO

    from analysis.estimates import power
    from analysis.inputs.collect import collect_or_report

    demo = _demo(tmp_path)
    table = {
        r["variant"]: r
        for r in csv.DictReader((REPO / "tests" / "golden" / "demo_fit_table.csv").open())
    }
    runs = collect_or_report([str(demo)], "val_loss").runs
    assert power.measured(runs)[1] == pytest.approx(float(table["baseline"]["alpha"]), rel=1e-9)
    speed, devices = seed_planner.measured_speed(runs)
    assert devices == "Intel(R) Xeon(R) Processor" and 1e8 < speed < 1e11  # a CPU's FLOP/s

    assert main([str(demo), "--gpu-hours", "10"]) == 0
    out = capsys.readouterr().out
    assert "baseline exponent 0.0482 " in out and "H100" not in out and "GPU-h" not in out
    assert "measured speed" in out and "device-h per seed" in out
    added = [int(line.split()[-1]) for line in out.splitlines() if line.startswith("tiny-")]
    assert len(added) == 3 and 0 < max(added) < 1000, out  # hundreds of seeds, not millions
    assert "±0.0" not in out

    # priced on a GPU on request: 10 H100-hours are far more than the question needs
    assert main([str(demo), "--gpu-hours", "10", "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "Cost: FLOPs on H100 at 35% MFU." in out and "→ ±1% with the proposal" in out
    assert "The budget is more than the question needs" in out and "±0.0" not in out


def _one_seed_sweep(root=None):
    b = power_law(3.0, 0.07)
    runs = simulate_runs(
        {"baseline": b, "attnres_full": shifted(b, 1.25)},
        (1e-3, 4e-3, 1.8e-2),
        (0,),
        (0.25, 0.5, 1.0),
        rng=np.random.default_rng(0),
    )
    if root is not None:
        write_runs(root, runs)
    return runs


def test_a_one_seed_sweep_gets_seeds_a_budget_below_a_round_buys(tmp_path, capsys):
    """One seed per size: each first seed brings a degree of freedom whose t quantile (12.7 at
    1 df) outweighs it, so no single step narrowed the predicted interval and a budget of seven
    cheap seeds bought nothing ("Nothing to add: one seed at the cheapest size costs ...")."""
    runs = _one_seed_sweep(tmp_path / "one")
    cheapest = min(r.flops for r in runs if r.point == 2 and r.size == "s1") * 2 / (PEAK * MFU)
    budget = 7 * cheapest / 3600
    prop = propose(runs, budget, "baseline", PEAK, MFU)
    assert prop["added"] and prop["spent_gpu_hours"] <= budget * (1 + 1e-9), prop["added"]
    assert prop["finished_df"] == 0 and not prop["noise_measured"]
    assert main([str(tmp_path / "one"), "--gpu-hours", f"{budget:.6g}", "--gpu", "H100"]) == 0
    out = capsys.readouterr().out
    assert "Nothing to add" not in out and "Launch:" in out
    assert "one seed per size, so no noise is measured" in out


def test_a_one_seed_sweeps_proposal_is_never_wider_than_uniform_seeds():
    runs = _one_seed_sweep()
    one_round = 2 * _round_cost(runs)  # _round_cost halves two seeds' FLOPs; these have one
    prop = propose(runs, 4.1 * one_round, "baseline", PEAK, MFU)
    assert prop["uniform_rounds"] == 4
    assert prop["after"] <= prop["uniform_after"] < prop["before"], prop


def _record_overrides(run_dir, overrides, out_dir, written):
    """What Hydra writes in a run's .hydra/ (the parts analysis.inputs.overrides reads)."""
    hydra = run_dir / ".hydra"
    hydra.mkdir(parents=True, exist_ok=True)
    (hydra / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (hydra / "config.yaml").write_text(f"out_dir: {out_dir}\n")
    (hydra / "hydra.yaml").write_text(f"hydra:\n  runtime:\n    output_dir: {written}\n")


def test_launch_lines_are_the_overrides_the_runs_were_launched_with(tmp_path, capsys):
    """A grid given on the command line (no sweep file): `sweeps=<folder>` fails there
    ("error: sweeps=adapt: no such sweeps"); the recorded overrides launch the same grid, with
    out_dir where the runs lie now (a sweep copied elsewhere records its old one)."""
    root = tmp_path / "copy" / "adapt"
    runs = _finished()
    write_runs(root, runs)
    for r in {r.run_id: r for r in runs}.values():
        overrides = [
            f"model={r.label}",
            f"size={r.size}",
            f"train.seed={r.seed}",
            "train.budgets=[0.25,0.5,1]",
            "sweep_name=adapt",
            "out_dir=/elsewhere/runs",
        ]
        written = f"/elsewhere/runs/adapt/{r.run_id}"
        _record_overrides(root / r.run_id, overrides, "/elsewhere/runs", written)
    assert main([str(root), "--gpu-hours", str(2 * _round_cost(runs)), "--gpu", "H100"]) == 0
    launch = [x.strip() for x in capsys.readouterr().out.splitlines() if "sweep.py" in x]
    assert launch and all("sweeps=" not in x for x in launch), launch
    size = launch[0].split("size=")[1].split()[0]
    seeds = launch[0].split("train.seed=")[1].split()[0]
    assert launch[0] == (
        f"python sweep.py -m model=attnres_full,baseline size={size} train.seed={seeds} "
        f"'train.budgets=[0.25,0.5,1]' sweep_name=adapt out_dir={tmp_path / 'copy'}"
    ), launch[0]
    # --sweep still names a sweep file
    assert main([str(root), "--gpu-hours", str(2 * _round_cost(runs)), "--sweep", "demo"]) == 0
    assert "sweeps=demo size=" in capsys.readouterr().out
