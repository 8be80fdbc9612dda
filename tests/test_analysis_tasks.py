"""Task metrics in the analysis: collected onto each run's final point, fitted with
`analysis.fit --metric task:<task>/<metric>`, the two-step accuracy prediction, its backtest,
and the chance statement. Synthetic sweeps with known laws, no training."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from analysis import backtest as backtest_cli
from analysis import fit as fit_cli
from analysis.estimates.task_accuracy import chance_verdict, fit_sigmoid, sigmoid_acc
from analysis.inputs.collect import collect
from analysis.inputs.metrics import MetricError, parse_task_metric, run_value
from andrea.run.rundir import atomic_write_json

SIZES = {"tiny-1": 1e15, "tiny-2": 4e15, "tiny-3": 1.6e16, "tiny-4": 6.4e16}
FLOPS_PER_PFD = 1e15 * 86400
TRUE_MULT = 1.5  # the variant reaches the baseline's bpb with 1/1.5 of its compute
K, L0, CHANCE = 6.0, 2.0, 0.25


def bpb_law(flops: float, mult: float = 1.0) -> float:
    return 1.0 * (mult * flops / FLOPS_PER_PFD) ** -0.08  # 2.5 .. 1.8 bits per byte


def make_sweep(root, seeds=3, n_docs=400, noise=0.01, step_of_record=None):
    rng = np.random.default_rng(0)
    for size, flops in SIZES.items():
        for label, mult in (("baseline", 1.0), ("attnres_full", TRUE_MULT)):
            for seed in range(seeds):
                run = root / size / label / f"seed{seed}"
                atomic_write_json(
                    run / "results.json",
                    {
                        "status": "completed",
                        "variant": label,
                        "label": label,
                        "size": size,
                        "seed": seed,
                        "flops": flops,
                        "tokens": flops / 6e6,
                        "steps": 100,
                        "val_loss": 5.0 * (flops / FLOPS_PER_PFD) ** -0.05,
                        "params_nonembedding": 1e6,
                    },
                )
                shared = rng.normal(0, noise)  # a seed's luck, shared by its tasks
                bpb = bpb_law(flops, mult) * math.exp(shared)
                acc = float(sigmoid_acc(bpb, K, L0, CHANCE)) + rng.normal(0, 0.01)
                at_chance = float(rng.binomial(n_docs, 0.5) / n_docs)
                atomic_write_json(
                    run / "tasks" / "abc.json",
                    {
                        "step": 100 if step_of_record is None else step_of_record,
                        "final": True,
                        "evaluated_utc": "2026-01-01T00:00:00+00:00",
                        "tasks": {
                            "ladder_local": {
                                "acc": acc,
                                "acc_norm": acc,
                                "loss": 1.5 * bpb,
                                "bpb": bpb,
                                "n": n_docs,
                                "chance": CHANCE,
                                "output_type": "multiple_choice",
                                "harness": {"acc": acc},
                            },
                            "copa_local": {
                                "acc": at_chance,
                                "bpb": bpb * 1.1,
                                "loss": bpb,
                                "n": n_docs,
                                "chance": 0.5,
                                "output_type": "multiple_choice",
                            },
                        },
                    },
                )
    return root


def fit(sweep, out, metric, bootstrap, plots=False) -> int:
    """`python -m analysis.fit <sweep> --out <out> --metric <metric> --bootstrap <n>`."""
    args = [str(sweep), "--out", str(out), "--metric", metric, "--bootstrap", str(bootstrap)]
    return fit_cli.main(args + ([] if plots else ["--no-plots"]))


def backtest(sweep, out, metric, bootstrap) -> int:
    """`python -m analysis.backtest <sweep> --out <out> --metric <metric> --bootstrap <n>`."""
    return backtest_cli.main(
        [str(sweep), "--out", str(out), "--metric", metric, "--bootstrap", str(bootstrap)]
    )


def test_the_final_point_carries_the_task_metrics(tmp_path):
    coll = collect([make_sweep(tmp_path / "s", seeds=1)])
    r = coll.runs[0]
    assert run_value(r, "task:ladder_local/bpb") == pytest.approx(
        r.metrics["task:ladder_local/bpb"]
    )
    assert {
        "task:ladder_local/acc",
        "task:ladder_local/acc_norm",
        "task:ladder_local/loss",
        "task:ladder_local/n",
        "task:ladder_local/chance",
        "task:copa_local/acc",
    } <= set(r.metrics)
    assert run_value(r, "val_loss") == r.val_loss
    assert run_value(r, "task:nope/acc") is None
    # an evaluation of an earlier checkpoint is not the final point's
    coll = collect([make_sweep(tmp_path / "old", seeds=1, step_of_record=50)])
    assert all(not any(k.startswith("task:") for k in r.metrics) for r in coll.runs)


def test_metric_names():
    assert parse_task_metric("val_loss") is None
    assert parse_task_metric("task:copa_local/acc") == ("copa_local", "acc")
    assert parse_task_metric("task:mmlu/stem/acc") == ("mmlu/stem", "acc")
    assert parse_task_metric("bpb") is None  # not a task metric: analysis.inputs.collect checks it
    for bad in ("task:copa_local", "task:/acc"):
        with pytest.raises(MetricError):
            parse_task_metric(bad)


def test_fit_of_a_task_bpb_recovers_the_multiplier(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "s")
    assert fit(sweep, tmp_path / "out", "task:ladder_local/bpb", 200) == 0
    out = capsys.readouterr().out
    assert "Metric: task:ladder_local/bpb" in out and "with L = task:ladder_local/bpb" in out
    report = json.loads((tmp_path / "out" / "fits.json").read_text())
    assert report["metric"]["name"] == "task:ladder_local/bpb"
    (m,) = report["multipliers"]["at_c_ref"]
    lo, hi = m["ci"]
    assert lo < TRUE_MULT < hi and m["multiplier"] == pytest.approx(TRUE_MULT, rel=0.1)
    assert report["metric"]["chance"]["at_chance"] is False  # its accuracy rises above chance


def test_accuracy_is_fitted_in_two_steps_and_chance_is_said(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "s")
    assert fit(sweep, tmp_path / "out", "task:ladder_local/acc", 200) == 0
    out = capsys.readouterr().out
    assert "fitted in two steps" in out and "Two-step prediction of ladder_local/acc" in out
    ts = json.loads((tmp_path / "out" / "fits.json").read_text())["metric"]["two_step"]
    assert ts["sigmoid"]["k"] == pytest.approx(K, rel=0.3)
    assert ts["sigmoid"]["L0"] == pytest.approx(L0, rel=0.05)
    assert "sits at chance" not in out

    assert fit(sweep, tmp_path / "out2", "task:copa_local/acc", 0) == 0
    out = capsys.readouterr().out
    assert "copa_local/acc sits at chance at these sizes" in out
    assert "an accuracy multiplier means nothing here" in out


def test_two_step_backtest_predicts_the_held_out_size(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "s")
    assert backtest(sweep, tmp_path / "bt", "task:ladder_local/acc", 200) == 0
    out = capsys.readouterr().out
    bt = json.loads((tmp_path / "bt" / "backtest.json").read_text())
    assert {r["size"] for r in bt["rows"]} == {"tiny-4"}
    assert all(r["inside"] for r in bt["rows"]), out
    assert "Two-step backtest of ladder_local/acc" in out
    # a loss-like task metric goes through the ordinary backtest
    assert backtest(sweep, tmp_path / "bt2", "task:ladder_local/bpb", 100) == 0
    assert "Metric: task:ladder_local/bpb" in capsys.readouterr().out


def test_bad_metric_input(tmp_path, capsys):
    sweep = make_sweep(tmp_path / "s", seeds=1)
    assert fit_cli.main([str(sweep), "--out", str(tmp_path / "o"), "--metric", "bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --metric 'bogus' is not a metric")
    assert (
        fit_cli.main(
            [str(sweep), "--out", str(tmp_path / "o"), "--metric", "task:hellaswag/acc_norm"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no completed run records task:hellaswag/bpb" in err[0]
    assert "task:ladder_local/bpb" in err[0]  # what is recorded


def test_chance_verdict_and_sigmoid_units():
    class R:
        def __init__(self, acc, n=100):
            self.metrics = {"task:t/acc": acc, "task:t/n": n, "task:t/chance": 0.5}

    assert chance_verdict([R(0.52), R(0.45)], "t", "acc")["at_chance"] is True
    v = chance_verdict([R(0.52), R(0.75)], "t", "acc")
    assert v["at_chance"] is False and v["above"] == 1
    L = np.linspace(1.0, 3.0, 30)
    fit = fit_sigmoid(L, sigmoid_acc(L, 4.0, 2.2, 0.25), 0.25)
    assert fit["ok"] and fit["k"] == pytest.approx(4.0, rel=1e-3)
    assert fit["L0"] == pytest.approx(2.2, rel=1e-3)


def test_accuracy_figures_and_one_metric_line(tmp_path, capsys, monkeypatch):
    """Under task:<task>/acc the output said both "Metric: task:…/bpb (L below)" and "Metric:
    task:…/acc (every 'loss' and 'L' below is this metric)"; the figures called the task's bits
    per byte a validation loss."""
    from test_analysis_metric import _figures

    drawn = _figures(monkeypatch)
    sweep = make_sweep(tmp_path / "s")
    assert fit(sweep, tmp_path / "out", "task:ladder_local/acc", 50, plots=True) == 0
    out = capsys.readouterr().out
    metric_lines = [line for line in out.splitlines() if line.startswith("Metric:")]
    assert metric_lines == [
        "Metric: task:ladder_local/bpb (L below), on 24 runs' final points; "
        "task:ladder_local/acc is higher-is-better: fitted in two steps through it"
    ]
    assert drawn["scaling.png"][0][0] == "Task ladder_local: bits per byte"
    assert "loss" not in drawn["multiplier.png"][0][1]
