"""bench.scalebench (ScaleBench replayed, Li et al. 2026, arXiv 2604.22753) and its plug-in laws
(plugins/andrea-scalebench-laws): the quick subset against the published rows, the dev and
held-out marks, and bad input. The planner is not run here (bench.scalebench is a script)."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from analysis.fits import law_registry
from bench import (
    alabdulmohsin_splits,
    gadre_splits,
    gemstones_splits,
    gpt3_splits,
    l2l_splits,
    llama3_splits,
    marin_splits,
    misfit_splits,
    oellm_splits,
    olmo_ladder_splits,
    opt_splits,
    pandey_splits,
    porian_splits,
    xlstm_splits,
)
from bench.scalebench import main
from bench.scalebench_splits import (
    DATA,
    DEV,
    PLANNER_DEV,
    PUBLISHED,
    SCALEBENCH,
    SKIPPED,
    SPLITS,
    load_split,
)

PLUGIN_LAWS = {
    "vocab": "scalebench_vocab",
    "lr_bsz": "scalebench_lr_bsz",
    "moe": "scalebench_moe",
    "parallel": "scalebench_parallel",
    "sparsity": "scalebench_sparsity",
}


def test_quick_subset_reproduces_the_published_random_row_and_marks_dev_and_held_out(
    tmp_path, capsys
):
    """`--quick`: Farseer's random baseline at 1 % lies within the published row's sd (Li et
    al.'s Table 2: -0.77 ± 0.55, one law instance, as here); the table marks Farseer dev and
    moe held out, in every format."""
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "farseer [dev: " in out and "moe [held out]" in out
    for name in SKIPPED:
        assert f"skipped {name}: " in out
    rows = list(csv.DictReader(open(tmp_path / "scalebench.csv")))
    random_1pct = [
        r
        for r in rows
        if (r["split"], r["method"], r["fit"], r["fraction"])
        == ("farseer", "random", "benchmark", "0.01")
    ]
    (pub_mean, pub_sd), *_ = PUBLISHED["farseer"]["Random"]
    assert len(random_1pct) == 1
    assert abs(float(random_1pct[0]["mean"]) - pub_mean) <= pub_sd
    assert {r["set"] for r in rows if r["split"] == "farseer"} == {"dev"}
    assert {r["set"] for r in rows if r["split"] == "moe"} == {"held-out"}
    md = (tmp_path / "scalebench.md").read_text()
    assert "| farseer (1/5/10 %) | dev |" in md and "| moe (1/5/10 %) | held-out |" in md
    js = json.loads((tmp_path / "scalebench.json").read_text())
    assert js["splits"]["farseer"]["set"] == "dev" and js["splits"]["moe"]["set"] == "held-out"
    # the CSV's median is the median of the JSON's repetitions
    (rnd,) = [r for r in js["splits"]["farseer"]["rows"] if (r["method"], r["fit"]) == (
        "random", "benchmark")]  # fmt: skip
    assert abs(float(random_1pct[0]["median"]) - np.median(np.array(rnd["values"])[:, 0])) < 1e-9
    # the fit to the whole Farseer pool: the published All Data row is 0.91 ± 0.01
    full = [
        r for r in rows if (r["split"], r["method"], r["fit"]) == ("farseer", "full", "benchmark")
    ]
    assert abs(float(full[0]["mean"]) - 0.91) < 0.05


def test_a_split_file_missing_a_column_is_one_error_line_naming_file_and_column(tmp_path, capsys):
    """A moe pool without its `experts` column (an input of the plug-in law): one `error:` line
    that names the file, the column and the law; exit 2 and nothing written."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    path = data / "moe_train.csv"
    rows = list(csv.DictReader(open(path)))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, [c for c in rows[0] if c != "experts"], extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "out"
    code = main(["--splits", "moe", "--methods", "random", "--reps", "1", "--data", str(data),
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 2 and len(lines) == 1 and not out.exists()
    assert "moe_train.csv" in lines[0] and "'experts'" in lines[0]
    assert "scalebench_moe" in lines[0]


def test_unknown_split_or_method_is_one_error_line(capsys):
    assert main(["--splits", "farseer,chinchila"]) == 2
    assert main(["--methods", "random,oracle"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 2 and all(x.startswith("error: --") for x in err)
    assert "chinchila" in err[0] and "oracle" in err[1]


def test_the_default_pilot_buys_at_the_first_budget_what_cheapest_buys_and_plans_after():
    """`--pilot cheapest`, the default since its adoption (docs/held_out.md, "Two deciding sweeps,
    one pass"): on sparsity's second group the planner's first budget is the cheapest-first
    baseline's runs (no tie of cost straddles it there), and it plans from them after, where
    `--pilot spread`'s (the default before) first budget is other runs."""
    from bench.scalebench import planner_selection, selections
    from bench.scalebench_splits import load_split

    split = load_split("sparsity")
    g = split.groups[1]
    g.budgets = g.budgets[:2]
    cand = planner_selection(split.law, g, 0, "cheapest")
    cheapest = [sel[1] for sel in selections(split, "cheapest", 0)]
    assert sorted(cand[0]) == sorted(cheapest[0])
    assert set(cand[0]) < set(cand[1])
    assert planner_selection(split.law, g, 0) == cand
    assert sorted(planner_selection(split.law, g, 0, "spread")[0]) != sorted(cand[0])


def test_the_spread_pilot_is_the_replays_not_the_coverages(capsys):
    assert main(["--coverage", "--splits", "farseer", "--pilot", "spread"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 1 and err[0].startswith("error: --pilot")


def test_coverage_refuses_out_which_it_would_not_write(tmp_path, capsys):
    """--coverage with --out ran and wrote nothing there, without a word (found when misfit was
    scored); now one error line before any split is loaded, and nothing written."""
    assert main(["--coverage", "--splits", "farseer", "--out", str(tmp_path / "o")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert len(err) == 1 and err[0].startswith("error: --out writes the replay's tables")
    assert not (tmp_path / "o").exists()


def test_a_plugin_law_without_the_inputs_of_a_pool_is_one_error_line(tmp_path, capsys):
    """`analysis.next_runs --pool … --law scalebench_moe` on a pool of (params, tokens): one
    `error:` line naming the column the law reads and the pool lacks."""
    from analysis.next_runs import main as next_runs_main

    pool, target = tmp_path / "pool.csv", tmp_path / "target.csv"
    pool.write_text("params,tokens,cost,loss\n1e8,1e9,1,3.0\n2e8,2e9,2,2.9\n")
    target.write_text("params,tokens\n1e9,1e10\n")
    code = next_runs_main(["--pool", str(pool), "--target", str(target), "--law",
                           "scalebench_moe", "--gpu-hours", "1", "--replay"])  # fmt: skip
    err = [x for x in capsys.readouterr().err.splitlines() if x]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:")
    assert "experts" in err[0] and "scalebench_moe" in err[0]


def test_every_split_is_dev_or_held_out_and_the_dev_ones_say_why():
    assert set(DEV) == {"farseer", "data_constrained"}
    assert all(len(why) > 20 for why in DEV.values())
    held_out = [s for s in SCALEBENCH if s not in DEV]
    assert held_out == ["vocab", "lr_bsz", "moe", "parallel", "sparsity"]
    # sparsity's planner rows changed with the first-budget pilot, after they had been seen
    assert all(load_split(s).mark == "held-out" for s in held_out if s != "sparsity")
    sparsity = load_split("sparsity")
    assert sparsity.mark == "dev" and "pilot" in PLANNER_DEV["sparsity"]
    # and misfit's and oellm's, whose planner rows scored --pilot cheapest by its rule
    # (docs/planner.md; on oellm, its third deciding sweep, it is adopted: docs/held_out.md)
    # and Gadre's and Pandey's, on which the default first budget, cheapest, was designed or
    # scored (their tables are the spread pilot's), and llama3's, on which the candidate
    # --pilot spread was scored by its rule
    assert set(PLANNER_DEV) - {"sparsity"} == {
        *(n for n in l2l_splits.SPLITS if "_c80" in n),
        *misfit_splits.SPLITS,
        *oellm_splits.SPLITS,
        *gadre_splits.SPLITS,
        *pandey_splits.SPLITS,
        *llama3_splits.SPLITS,
    }
    assert all("was designed on its planner rows" in PLANNER_DEV[n] for n in gadre_splits.SPLITS)
    assert all(
        "scored on it by its rule and failed" in PLANNER_DEV[n] for n in pandey_splits.SPLITS
    )
    assert all("which --pilot cheapest passed" in PLANNER_DEV[n] for n in misfit_splits.SPLITS)
    assert all("which it passed: adopted" in PLANNER_DEV[n] for n in oellm_splits.SPLITS)
    assert all("--pilot spread by its rule" in PLANNER_DEV[n] for n in llama3_splits.SPLITS)
    assert not set(SPLITS) & set(SKIPPED)
    # the rest are Porian et al. 2024's, Gadre et al. 2024's, Brandfonbrener et al. 2024's, Brown
    # et al. 2020's, Zhang et al. 2022's, Bhagia et al. 2024's, McLeish et al. 2025's, the
    # Marin ladder's, Alabdulmohsin et al. 2022's, Pandey 2024's, Li, Kudugunta & Zettlemoyer
    # 2025's, OpenEuroLLM's, Beck et al. 2025's and Grattafiori et al. 2024's (Llama 3), every one
    # held out for the planner but l2l's _c80, Gadre's, Pandey's, misfit's, oellm's and llama3's
    # (PLANNER_DEV, above)
    # (tests/test_porian.py, tests/test_gadre.py, tests/test_l2l.py, tests/test_gpt3.py,
    # tests/test_opt.py, tests/test_olmo_ladder.py, tests/test_gemstones.py, tests/test_marin.py,
    # tests/test_alabdulmohsin.py, tests/test_pandey.py, tests/test_misfit.py,
    # tests/test_oellm.py, tests/test_xlstm.py, tests/test_llama3.py)
    runs = (
        porian_splits,
        gadre_splits,
        l2l_splits,
        gpt3_splits,
        opt_splits,
        olmo_ladder_splits,
        gemstones_splits,
        marin_splits,
        alabdulmohsin_splits,
        pandey_splits,
        misfit_splits,
        oellm_splits,
        xlstm_splits,
        llama3_splits,
    )
    assert set(SPLITS) - set(SCALEBENCH) == set().union(*(m.SPLITS for m in runs))
    assert not set(DEV) & set(l2l_splits.SPLITS)


def test_the_plugin_laws_join_the_registry_through_the_entry_point():
    names = law_registry.names()
    for split, law in PLUGIN_LAWS.items():
        assert law in names and SPLITS[split].law == law


@pytest.mark.parametrize("split", list(PLUGIN_LAWS))
def test_plugin_law_jacobian_and_loss_form_agree(split):
    """Each law's exact Jacobian of log L matches central differences, and its loss form (the
    benchmark fit's) is exp of its log L; a batch of parameters gives one row per member."""
    from andrea_scalebench_laws import LOSS_FORMS

    s = load_split(split)
    law, g = s.law, s.groups[0]
    X = {k: v[:40] for k, v in g.X.items()}
    theta = next(
        np.asarray(t) for t in law.grid(X, np.log(g.y[:40]))
        if np.all(np.isfinite(law.log_predict(np.asarray(t), X)))
    )  # fmt: skip
    J = law.jacobian(theta, X)
    h = 1e-6 * np.maximum(1.0, np.abs(theta))
    num = np.column_stack(
        [
            (law.log_predict(theta + h[i] * e, X) - law.log_predict(theta - h[i] * e, X))
            / (2 * h[i])
            for i, e in enumerate(np.eye(len(theta)))
        ]
    )
    scale = np.abs(num).max(axis=0) + 1e-12
    assert np.max(np.abs(J - num) / scale) < 1e-4
    value, dvalue = LOSS_FORMS[law.name]
    assert np.allclose(value(theta, X), np.exp(law.log_predict(theta, X)), rtol=1e-12)
    assert np.allclose(dvalue(theta, X), value(theta, X)[:, None] * J, rtol=1e-6, atol=1e-12)
    both = law.log_predict(np.vstack([theta, theta]), X)
    assert both.shape == (2, len(X[law.inputs[0]])) and np.allclose(
        both[1], law.log_predict(theta, X)
    )


def test_andrea_fit_of_each_plugin_law_on_its_whole_pool_matches_the_benchmark_fit_in_sample():
    """In sample only (no target region): andrea's log-space Huber fit from the law's grid
    reaches a loss RMSE within 15 % of the benchmark's least-squares fit of the loss."""
    from analysis.fits.laws import fit_law_scaled_huber
    from bench.scalebench import benchmark_fit, loss_form

    for split in PLUGIN_LAWS:
        s = load_split(split)
        form = loss_form(s.law)
        for g in s.groups:  # the plug-in laws' bounds are the benchmark's
            th = benchmark_fit(form, s.law.bounds, g.X, g.y, np.random.default_rng(0))
            rmse_b = np.sqrt(np.mean((form[0](th, g.X) - g.y) ** 2))
            f = fit_law_scaled_huber(s.law, split, g.X, g.y)
            rmse_a = np.sqrt(np.mean((f.predict(g.X) - g.y) ** 2))
            assert rmse_a < 1.15 * rmse_b, (split, g.name, rmse_a, rmse_b)


def test_a_method_that_fails_on_a_split_is_one_error_line_and_a_failed_row(
    tmp_path, capsys, monkeypatch
):
    """The table survives one method's failure: an `error:` line naming the split, the method and
    the exception; its row reads "failed" and the other methods' rows are there."""
    import bench.scalebench as sb

    def broken(law, group, seed, pilot="cheapest"):
        raise KeyError("tokens")

    monkeypatch.setattr(sb, "planner_selection", broken)
    assert main(["--splits", "moe", "--methods", "planner,full", "--reps", "1", "--out",
                 str(tmp_path)]) == 0  # fmt: skip
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert any("moe planner failed: KeyError" in x for x in err)
    md = (tmp_path / "scalebench.md").read_text()
    assert "| moe (1/5/10 %) | held-out | scalebench_moe | planner | benchmark's fit | failed" in md
    assert "| all runs | benchmark's fit | +" in md


def test_coverage_on_the_dev_split_farseer_prints_one_row_with_a_coverage(capsys):
    """`--coverage --splits farseer`: one row for the dev split, its 7 target runs scored
    against the 90 % band calibrated on the whole pool's rollouts: a coverage in [0, 1], a
    positive width, the targets past the pool (factor > 1)."""
    from bench.scalebench_coverage import split_row

    assert main(["--coverage", "--splits", "farseer"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [x for x in lines if x.startswith("farseer ")]
    assert len(rows) == 1 and rows[0].split()[1] == "dev"
    row = split_row(load_split("farseer"))
    assert row["set"] == "dev" and row["targets"] == 7
    # every group had a band; the one note: a band analysis.predict gives no user (only
    # chinchilla's coverage past the data is measured)
    assert row["note"] == (
        "farseer: analysis.predict withholds this band (its coverage past the data not measured "
        ">= 90 %)"
    )
    assert 0.0 <= row["coverage"] <= 1.0
    assert row["median_log_width"] > 0 and row["median_factor"] > 1
    assert f"{row['coverage']:.1%}" in rows[0]
    # the band's factor changed after every ScaleBench split's band coverage was seen: dev for
    # the band, the planner's marks unchanged
    moe = load_split("moe")
    assert moe.band_mark == "dev" and moe.mark == "held-out"


def test_coverage_counts_the_target_runs_whose_band_predict_withholds_off_the_pools_d_per_n():
    """data_constrained: 2 of its 21 target runs lie outside the pool's tokens per parameter,
    where analysis.predict withholds the band (docs/laws.md); the note counts them and scores
    the rest, the coverage column still every target run."""
    from bench.scalebench_coverage import score_group, split_row

    split = load_split("data_constrained")
    s = score_group(split.law, split.groups[0])
    assert len(s["off"]) == len(s["inside"]) == 21 and sum(s["off"]) == 2
    row = split_row(split)
    given = [x for x, o in zip(s["inside"], s["off"]) if not o]
    assert row["coverage"] == pytest.approx(sum(s["inside"]) / 21)
    assert (
        f"PI withheld off the pool's D/N at 2 of 21 ({sum(given) / 19:.1%} of the rest)"
        in (row["note"])
    )
