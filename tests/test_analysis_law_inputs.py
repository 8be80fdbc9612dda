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


# --- a run directory's settings as law inputs (andrea.run.results.law_settings) ---------------
SEQ_LEN = 256
# log L = w·(1, z, z², cross terms) of z = (log lr, log bsz, log D, log N): ScaleBench lr_bsz's
# form, its weights inside the law's bounds
LR_BSZ_TRUTH = np.array(
    [3.0, 0.05, -0.02, -0.03, -0.04]
    + [0.01, 0.005, -0.001, 0.0005]
    + [-0.004, 0.001, 0.002, -0.001, 0.0005, 0.0003]
)


def _lr_bsz_log_loss(w, lr, bsz, D, N):
    """The form of ScaleBench lr_bsz sl_1, its 15 terms in the benchmark's order."""
    z = np.log([lr, bsz, D, N])
    pairs = [z[i] * z[j] for i, j in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))]
    return float(w @ np.concatenate([[1.0], z, z * z, pairs]))


def _lr_bsz_sweep(root, shift=(("baseline", 0.0), ("attnres_full", -0.02)), seq_len=True):
    """Run directories (results.json, `analysis.inputs.synthetic.write_runs`) of 3 sizes x 3
    peak LRs x 3 batch sizes, 3 budgets each, whose losses are the lr_bsz law of LR_BSZ_TRUTH
    (each variant's log L shifted by its own constant), noise-free. Without `seq_len` the
    files are those written before it was recorded."""
    from analysis.inputs.collect import Run
    from analysis.inputs.synthetic import write_runs

    runs, extra = [], {}
    for variant, dlog in shift:
        for i, (N, lr, bsz) in enumerate(
            (N, lr, bsz)
            for N in (1e7, 4e7, 1.6e8)
            for lr in (1e-3, 3e-3, 1e-2)
            for bsz in (32, 128, 512)
        ):
            rid = f"{variant}/c{i}/seed0"
            extra[rid] = {"lr": lr, "batch_tokens": bsz * SEQ_LEN, "beta2": 0.95}
            if seq_len:
                extra[rid]["seq_len"] = SEQ_LEN
            for p, D in enumerate((2e8, 8e8, 3.2e9)):
                loss = float(np.exp(_lr_bsz_log_loss(LR_BSZ_TRUTH, lr, bsz, D, N) + dlog))
                runs.append(
                    Run(
                        source=rid,
                        variant=variant,
                        block_size=None,
                        size=f"c{i}",
                        flops=6 * N * D,
                        val_loss=loss,
                        params=N,
                        tokens=D,
                        seed=0,
                        run_id=rid,
                        point=p,
                        budget=D / 8e8,
                    )
                )
    write_runs(root, runs, extra=extra)
    return root


def test_a_run_directorys_settings_are_its_law_inputs(tmp_path):
    """Runs collected from results.json carry their peak LR, batch (tokens and sequences per
    step) and other numeric settings by name, each point its own optimizer steps."""
    from analysis.inputs.collect import collect

    coll = collect([_lr_bsz_sweep(tmp_path / "sweep")])
    assert len(coll.runs) == 2 * 27 * 3 and not coll.invalid
    by = {(r.variant, r.size, r.point): r for r in coll.runs}
    r = by[("baseline", "c5", 2)]  # N 1e7, lr 3e-3, 512 sequences; its third point
    assert r.law_input("lr") == pytest.approx(3e-3, rel=1e-12)
    assert r.law_input("batch_tokens") == 512 * SEQ_LEN and r.law_input("batch_size") == 512
    assert r.law_input("seq_len") == SEQ_LEN and r.law_input("beta2") == pytest.approx(0.95)
    assert r.law_input("steps") == 300 and by[("baseline", "c5", 0)].law_input("steps") == 100
    # `params` is the non-embedding count (also by that name), total_params the file's params
    assert r.law_input("params") == r.law_input("non_embedding_params") == 1e7
    assert r.law_input("total_params") == pytest.approx(1.25e7)
    assert by[("attnres_full", "c19", 0)].law_input("batch_size") == 128
    got = inputs_of(coll.runs)
    assert {"lr", "batch_size", "batch_tokens", "tokens", "params"} <= set(got)


def test_scalebench_lr_bsz_fits_a_sweep_directory_and_recovers_its_weights(tmp_path):
    """`analysis.fit <sweep> --law scalebench_lr_bsz` on run directories whose losses are the
    law (noise-free): each variant's 15 weights come back within 1e-6 (the variant's own
    constant shift in w0)."""
    from analysis.fit import main

    pytest.importorskip("andrea_scalebench_laws")  # the plug-in `make env` installs
    sweep, out = _lr_bsz_sweep(tmp_path / "sweep"), tmp_path / "o"
    argv = [str(sweep), "--out", str(out), "--law", "scalebench_lr_bsz", "--no-plots"]
    assert main([*argv, "--bootstrap", "0", "--law-bootstrap", "0"]) == 0
    fits = json.loads((out / "fits.json").read_text())["law"]["fits"]
    assert set(fits) == {"baseline", "attnres_full"}
    for label, dlog in (("baseline", 0.0), ("attnres_full", -0.02)):
        assert fits[label]["inputs"] == ["lr", "batch_size", "tokens", "params"]
        want = LR_BSZ_TRUTH + np.eye(15)[0] * dlog
        assert np.asarray(fits[label]["theta"]) == pytest.approx(want, abs=1e-6), label


def test_a_sweep_without_a_laws_input_is_one_error_line_naming_it_and_those_present(
    tmp_path, capsys
):
    """results.json written before seq_len was recorded have no batch size in sequences:
    `--law scalebench_lr_bsz` is one error line that names it and every input the runs have
    (lr and batch_tokens among them), before any fit."""
    from analysis.fit import main

    pytest.importorskip("andrea_scalebench_laws")
    sweep, out = _lr_bsz_sweep(tmp_path / "sweep", seq_len=False), tmp_path / "o"
    assert main([str(sweep), "--out", str(out), "--law", "scalebench_lr_bsz"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 1 and err[0].startswith("error: --law scalebench_lr_bsz: "), err
    assert (
        "the runs do not record batch_size (every run records compute, params, tokens, " in err[0]
    )
    assert "batch_tokens" in err[0].split("every run records ")[1]
    assert "batch_tokens / seq_len" in err[0] and "column(s) batch_size" in err[0]
    assert not out.exists()
