"""A law's inputs other than (params, tokens) flow through runs (`Run.law_inputs`, read by
`Run.law_input`): a pool's columns (`analysis.estimates.pool_law.as_runs`), a CSV's columns
(`analysis.inputs.collect`), fitted and rolled out as any law is."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from analysis.estimates import pool_law
from analysis.estimates.estimate import fit_variants, inputs_of, why_unusable
from analysis.estimates.law_choice import select_law
from analysis.fits.laws import Law, param_columns
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY, InputError, collect_csv

TRUTH = (1.2, 0.30, 0.10)  # log L = c - a·log N - b·log E


def _log_predict(theta, X):
    c, a, b = param_columns(theta)
    return c - a * np.log(X["params"]) - b * np.log(X["experts"])


# a law in (params, experts), as a plug-in law of the registry would declare it
TOY = Law(
    name="toy_experts",
    inputs=("params", "experts"),
    params=("c", "a", "b"),
    bounds=((-10.0, 10.0), (0.0, 2.0), (-1.0, 2.0)),
    log_predict=_log_predict,
    grid=lambda X, y: iter([(1.0, 0.2, 0.05), (2.0, 0.4, 0.2)]),
    formula="log L = c - a·log N - b·log E (a test's law)",
)


def _pool(n_per: int = 4, noise: float = 0.002, seed: int = 0):
    """Rows of (params, experts) at 8 sizes x 3 expert counts, their cost N·E, the truth's
    losses with a little noise."""
    rng = np.random.default_rng(seed)
    N, E = np.meshgrid(np.geomspace(1e7, 1e9, 8), [1.0, 4.0, 16.0])
    N, E = N.ravel(), E.ravel()
    c, a, b = TRUTH
    y = np.exp(c - a * np.log(N) - b * np.log(E)) * (1 + noise * rng.standard_normal(len(N)))
    return {"params": N, "experts": E}, y, N * E


def test_as_runs_keeps_every_column_by_name_and_sizes_by_all_inputs():
    """Two rows of one (params, tokens) and other learning rates are two configurations;
    every column is kept (lr and batch_size in law_inputs, read by Run.law_input); compute is
    6·N·D."""
    X = {
        "params": np.array([1e8, 1e8, 2e8]),
        "tokens": np.array([1e9, 1e9, 2e9]),
        "lr": np.array([1e-3, 3e-3, 1e-3]),
        "batch_size": np.array([256.0, 256.0, 512.0]),
    }
    runs = pool_law.as_runs(X, [3.0, 2.9, 2.8], ["a", "b", "c"])
    assert len({r.size for r in runs}) == 3
    assert runs[0].law_inputs == {"lr": 1e-3, "batch_size": 256.0}
    assert runs[1].law_input("lr") == pytest.approx(3e-3) and runs[1].law_input("params") == 1e8
    assert runs[2].flops == pytest.approx(6 * 2e8 * 2e9, rel=1e-12)
    got = inputs_of(runs)
    assert set(got) == {"compute", "params", "tokens", "lr", "batch_size"}
    assert got["batch_size"].tolist() == [256.0, 256.0, 512.0]
    # replicates (every input the same) share a size
    twice = pool_law.as_runs({k: v[[0, 0]] for k, v in X.items()}, [3.0, 3.01], ["a", "b"])
    assert twice[0].size == twice[1].size


def test_as_runs_without_params_and_tokens_takes_the_cost_as_compute_else_one_error():
    X, y, cost = _pool()
    runs = pool_law.as_runs(X, y, [f"r{i}" for i in range(len(y))], cost=cost)
    assert [r.compute for r in runs] == pytest.approx(cost.tolist(), rel=1e-12)
    assert len({r.size for r in runs}) == len(y) and runs[0].law_input("experts") == 1.0
    # the pool's own cost column serves as well
    col = pool_law.as_runs({**X, "cost": cost}, y, ["r"] * len(y))
    assert col[5].flops == pytest.approx(cost[5] * FLOPS_PER_PFLOPS_DAY)
    assert col[5].size == runs[5].size  # the cost names no configuration
    with pytest.raises(InputError, match="params, experts: neither params and tokens"):
        pool_law.as_runs(X, y, ["r"] * len(y))


def test_a_law_of_other_inputs_is_fitted_and_rolled_out_from_runs():
    """The law in (params, experts) fitted to the pool's rows as runs recovers the truth's
    exponents, and `--law auto`'s rollouts rank it (before, its inputs were not on the runs:
    it was skipped)."""
    X, y, cost = _pool()
    runs = pool_law.as_runs(X, y, [f"r{i}" for i in range(len(y))], cost=cost)
    assert why_unusable(TOY, runs) is None
    res = fit_variants(runs, pool_law.LABEL, FitSettings(n_bootstrap=0), TOY)
    theta = res.fits[pool_law.LABEL].theta
    assert theta[1:] == pytest.approx(TRUTH[1:], abs=0.01)
    sel = select_law([TOY], runs, runs)
    assert [r["law"] for r in sel["ranking"]] == ["toy_experts"], sel["skipped"]
    assert sel["ranking"][0]["rms_log_pct"] < 1.0
    two = [TOY, dataclasses.replace(TOY, name="toy_again")]
    law, lines = pool_law.choose(two, X, y, ["r"] * len(y), cost=cost)
    assert lines[0].startswith("--law auto: ") and "wins the compute rollouts" in lines[0]


def _csv(path, with_experts: bool = True):
    X, y, _ = _pool()
    rows = []
    for variant, shift in (("baseline", 1.0), ("v", 0.98)):
        for i in range(len(y)):
            N, E = X["params"][i], X["experts"][i]
            row = {"variant": variant, "size": f"n{N:.3g}e{E:g}", "flops": 6 * N * 20 * N}
            row.update(val_loss=y[i] * shift, params=N, seed=0, note="x")
            if with_experts:
                row["experts"] = E
            rows.append(row)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_a_csv_keeps_a_plugin_laws_columns_and_analysis_fit_fits_the_law(tmp_path, capsys):
    """A CSV's `experts` column reaches the runs (a text column does not), and
    `analysis.fit --law scalebench_moe` fits it to every variant, with no compute multiplier
    (the law cannot be asked a compute alone) and the reason."""
    from analysis.fit import main

    coll = collect_csv(_csv(tmp_path / "moe.csv"))
    assert coll.runs[3].law_inputs == {"experts": 1.0}
    assert coll.runs[3].law_input("experts") == 1.0 and not coll.invalid
    out = tmp_path / "o"
    argv = [str(tmp_path / "moe.csv"), "--out", str(out), "--law", "scalebench_moe"]
    assert main([*argv, "--bootstrap", "0", "--law-bootstrap", "0", "--no-plots"]) == 0
    law = json.loads((out / "fits.json").read_text())["law"]
    assert law["chosen"] == "scalebench_moe" and set(law["fits"]) == {"baseline", "v"}
    assert "a compute multiplier asks the law's loss at a compute" in capsys.readouterr().out


def test_a_plugin_law_without_its_columns_is_one_error_line_naming_them(tmp_path, capsys):
    from analysis.fit import main

    path = _csv(tmp_path / "moe.csv", with_experts=False)
    out = tmp_path / "o"
    assert main([str(path), "--out", str(out), "--law", "scalebench_moe"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 1 and err[0].startswith("error: --law scalebench_moe: "), err
    assert "do not record experts" in err[0] and "a CSV with the column(s) experts" in err[0]
    assert not out.exists()
