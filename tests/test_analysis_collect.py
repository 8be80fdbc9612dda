import math
import shutil
from pathlib import Path

import pytest

from analysis.inputs.collect import (
    FLOPS_PER_PFLOPS_DAY,
    InputError,
    aggregate,
    by_label,
    collect,
    variant_label,
)
from andrea.run.rundir import RunDir


def _run(root, name, **kw):
    res = {
        "status": "completed",
        "error": None,
        "variant": "baseline",
        "block_size": None,
        "size": "s1",
        "params": 1e6,
        "params_nonembedding": 8e5,
        "tokens": 2e7,
        "flops": 1e18,
        "val_loss": 3.0,
        "wall_s": 10.0,
        "tokens_per_s": 1e4,
        "seed": 0,
    }
    res.update(kw)
    rd = RunDir(root / name)
    rd.write_results(res)
    return rd


def test_labels_keep_config_names_and_add_S():
    assert variant_label("attnres_block", 4) == "attnres_block_s4"
    assert variant_label("attnres_block", None) == "attnres_block"
    assert variant_label("attnres_full", None) == "attnres_full"
    assert variant_label("attnres_full", 4) == "attnres_full"


def test_run_dirs_classified(tmp_path):
    _run(tmp_path, "a/s1", flops=1e18)
    _run(tmp_path, "blk/s1", variant="attnres_block", block_size=8, val_loss=2.9)
    _run(tmp_path, "bad/s2", status="failed", error="CUDA out of memory", val_loss=None)
    _run(tmp_path, "nan/s3", val_loss=float("nan"))
    _run(tmp_path, "zero/s4", flops=0)
    (tmp_path / "run/s5/.hydra").mkdir(parents=True)  # started, no results yet
    (tmp_path / "ck/s5/checkpoints").mkdir(parents=True)
    broken = RunDir(tmp_path / "broken")
    broken.root.mkdir()
    broken.results.write_text('{"status": "compl')  # not valid JSON
    c = collect([tmp_path])
    assert sorted(r.label for r in c.runs) == ["attnres_block_s8", "baseline"]
    assert c.runs[0].compute == pytest.approx(c.runs[0].flops / FLOPS_PER_PFLOPS_DAY)
    assert [(s.split("/")[-2], e) for s, e in c.failed] == [("bad", "CUDA out of memory")]
    assert sorted(s.split("/")[-2] for s, _ in c.running) == ["ck", "run"]
    reasons = {s.split("/")[-2] if s.count("/") > 1 else s: r for s, r in c.invalid}
    assert any("val_loss" in r for r in reasons.values())
    assert any("flops=0" in r and "positive" in r for r in reasons.values())
    assert any("not valid JSON" in r for r in reasons.values())
    assert len(c.invalid) == 3


def test_runs_of_one_label_with_different_optimizers_are_refused(tmp_path):
    """An AdamW sweep and a Muon sweep given together would be fitted as seeds of one variant."""
    _run(tmp_path, "adamw/s0", seed=0)
    _run(tmp_path, "adamw/s1", seed=1, optimizer="adamw")
    assert len(collect([tmp_path]).runs) == 2  # no key (older runs) counts as adamw
    _run(tmp_path, "muon/s0", seed=0, optimizer="muon")
    with pytest.raises(InputError, match="baseline: runs trained with different optimizers"):
        collect([tmp_path])
    assert len(collect([tmp_path / "muon"]).runs) == 1


def test_seed_averaging(tmp_path):
    for seed, loss in enumerate([3.0, 3.2, 3.4]):
        _run(tmp_path, f"b/s1/seed{seed}", seed=seed, val_loss=loss)
    _run(tmp_path, "b/s2/seed0", size="s2", flops=4e18, val_loss=2.5)
    points, warnings = aggregate(collect([tmp_path]).runs)
    assert not warnings
    p1, p2 = by_label(points)["baseline"]
    assert (p1.size, p1.n_seeds, p1.seeds) == ("s1", 3, [0, 1, 2])
    assert p1.val_loss == pytest.approx(3.2)
    assert p1.val_loss_std == pytest.approx(0.2)
    assert (p2.n_seeds, p2.val_loss_std) == (1, 0.0)
    assert p1.to_json()["runs"] and p1.to_json()["compute_pflops_days"] > 0


def test_seeds_with_different_flops_warn(tmp_path):
    _run(tmp_path, "b/0", seed=0, flops=1e18)
    _run(tmp_path, "b/1", seed=1, flops=2e18)
    _, warnings = aggregate(collect([tmp_path]).runs)
    assert any("different FLOPs" in w for w in warnings)


def test_runs_of_one_size_at_other_tokens_are_said_not_to_be_seeds(tmp_path):
    """A public (params, tokens) grid written with the model as `size` and no seed reads as
    seeds of that size; the warning says they are not, and how to write them. Seeds at the
    same tokens (their FLOPs differing by the measured kind) keep the plain warning."""
    p = tmp_path / "runs.csv"
    p.write_text(
        "variant,size,flops,val_loss,params,tokens\n"
        "baseline,m1,6e15,3.0,1e6,1e9\n"
        "baseline,m1,6e16,2.8,1e6,1e10\n"
        "baseline,m2,6e16,2.9,1e7,1e9\n"
        "baseline,m2,6.6e16,2.85,1e7,1e9\n"
    )
    _, warnings = aggregate(collect([p]).runs)
    (m1,) = [w for w in warnings if "size=m1" in w]
    assert "their tokens differ too (1e+09..1e+10), so they are not seeds" in m1
    assert "its own size (size=m1@1e+10)" in m1
    (m2,) = [w for w in warnings if "size=m2" in w]
    assert "different FLOPs" in m2 and "tokens differ" not in m2


def test_csv_input(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text(
        "variant,size,flops,val_loss,block_size,seed\n"
        "baseline,s1,1e18,3.0,,0\n"
        "attnres_block,s1,1e18,2.9,4,0\n"
        "attnres_block,s1,1e18,2.95,4,1\n"
        "baseline,s2,-5,2.5,,0\n"
        "baseline,s3,4e18,nan,,0\n"
        "baseline,s4,abc,2.5,,0\n"
    )
    c = collect([p])
    assert sorted(r.label for r in c.runs) == ["attnres_block_s4", "attnres_block_s4", "baseline"]
    lines = sorted(s.rsplit(" ", 1)[1] for s, _ in c.invalid)
    assert lines == ["5", "6", "7"]  # file line numbers name rows
    assert any("'abc' is not a number" in r for _, r in c.invalid)
    points, _ = aggregate(c.runs)
    blk = by_label(points)["attnres_block_s4"][0]
    assert blk.n_seeds == 2 and blk.val_loss == pytest.approx(2.925)


def test_csv_missing_columns(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("variant,size,loss\nbaseline,s1,3.0\n")
    with pytest.raises(InputError, match="flops, val_loss") as e:
        collect([p])
    assert "bad.csv" in str(e.value) and "found variant, size, loss" in str(e.value)


def test_missing_input(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        collect([tmp_path / "nope"])
    with pytest.raises(InputError, match="no input"):
        collect([])


def test_single_results_json(tmp_path):
    rd = _run(tmp_path, "one", val_loss=2.0)
    c = collect([rd.results])
    assert len(c.runs) == 1 and math.isclose(c.runs[0].val_loss, 2.0)


def test_multi_point_results_json(tmp_path):
    """results.json `points`: one record per point, in token order, sharing
    the run's id; `label` (item 2) names the group; device_s (item 3) per point."""
    pts = [
        {
            "budget": b,
            "tokens": int(1e6 * b),
            "flops": 1e17 * b,
            "val_loss": 3.0 / b**0.1,
            "step": int(100 * b),
            "wall_s": 5.0 * b,
            "device_s": 10.0 * b,
        }
        for b in (2, 0.5, 1)
    ]
    for seed in (0, 1):
        _run(
            tmp_path,
            f"full/s1/seed{seed}",
            variant="attnres_full",
            label="attnres_full+sigmoid",
            seed=seed,
            points=pts,
            flops=2e17,
            val_loss=pts[0]["val_loss"],
            device_name="cpu",
        )
    _run(tmp_path, "old/s1", seed=0)  # no points: one point
    c = collect([tmp_path])
    full = [r for r in c.runs if r.variant == "attnres_full"]
    assert len(full) == 6 and len(c.runs) == 7
    assert {r.label for r in full} == {"attnres_full+sigmoid"}
    one = sorted((r for r in full if r.seed == 0), key=lambda r: r.point)
    assert [r.budget for r in one] == [0.5, 1, 2] and [r.point for r in one] == [0, 1, 2]
    assert [r.device_s for r in one] == [5.0, 10.0, 20.0] and len({r.run_id for r in one}) == 1
    assert one[0].params == 8e5  # N: the non-embedding count
    points, _ = aggregate(c.runs)
    grp = by_label(points)["attnres_full+sigmoid"]
    assert [(p.n_seeds, p.tokens) for p in grp] == [(2, 5e5), (2, 1e6), (2, 2e6)]


def test_csv_rows_of_one_seed_are_one_run(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text(
        "variant,size,flops,val_loss,seed,params,tokens\n"
        "baseline,s1,2e17,2.9,0,1e6,2e7\n"
        "baseline,s1,1e17,3.0,0,1e6,1e7\n"
        "baseline,s1,1e17,3.1,1,1e6,1e7\n"
        "baseline,s1,2e17,2.95,1,1e6,2e7\n"
    )
    runs = collect([p]).runs
    assert len({r.run_id for r in runs}) == 2
    assert sorted((r.seed, r.point, r.val_loss) for r in runs) == [
        (0, 0, 3.0),
        (0, 1, 2.9),
        (1, 0, 3.1),
        (1, 1, 2.95),
    ]
    points, _ = aggregate(runs)
    assert [p.val_loss for p in points] == pytest.approx([3.05, 2.925])


# --- a run is one replicate wherever it is found ---------------------------------------------
DEMO = Path(__file__).parent / "golden" / "demo_runs"


def test_a_sweep_and_its_copy_count_each_run_once(tmp_path):
    """`rsync runs/demo/ copy/demo/` then both given: the copy's 36 runs are the same runs (same
    sweep, label, size, seed and settings), not 36 more seeds."""
    shutil.copytree(DEMO, tmp_path / "demo")
    shutil.copytree(DEMO, tmp_path / "copy" / "demo")
    one = collect([tmp_path / "demo"])
    for inputs in ([tmp_path / "demo", tmp_path / "copy" / "demo"], [DEMO, DEMO]):
        both = collect(inputs)
        assert len(both.runs) == len(one.runs) == 108
        assert len({r.run_id for r in both.runs}) == 36
        assert len(both.duplicates) == 36
        note = both.duplicate_note()
        assert note.startswith("36 run(s) found twice, each counted once (same sweep, ")
        assert note.endswith(", and 35 more")
        points, warnings = aggregate(both.runs)
        assert not warnings and max(p.n_seeds for p in points) == 4
    assert one.duplicate_note() is None


def test_one_run_with_other_results_in_a_copy_is_refused(tmp_path):
    shutil.copytree(DEMO, tmp_path / "a")
    shutil.copytree(DEMO, tmp_path / "b")
    rd = RunDir(tmp_path / "b" / "tiny-2" / "baseline" / "seed1")
    res = rd.read_results()
    res["points"][-1]["val_loss"] += 0.01
    rd.write_results(res)
    with pytest.raises(InputError) as e:
        collect([tmp_path / "a", tmp_path / "b"])
    msg = str(e.value)
    assert str(rd.root) in msg and str(tmp_path / "a" / "tiny-2" / "baseline" / "seed1") in msg
    assert "different results (val_loss " in msg and "at point 3 of 3" in msg
    assert "\n" not in msg


def test_runs_that_differ_in_sweep_or_settings_stay_apart(tmp_path):
    """The same label, size and seed trained in another sweep, or with another lr, is another
    run: kept, and aggregate says the seed repeats."""
    _run(tmp_path, "a/seed0", sweep="one", lr=1e-3)
    _run(tmp_path, "b/seed0", sweep="two", lr=1e-3, val_loss=3.1)
    _run(tmp_path, "c/seed0", sweep="one", lr=2e-3, val_loss=3.2)
    c = collect([tmp_path])
    assert len(c.runs) == 3 and not c.duplicates
    _, warnings = aggregate(c.runs)
    (w,) = warnings
    assert w.startswith("baseline size=s1: seed 0 in runs of other sweeps or settings (")
    assert w.endswith("each counts as a replicate")


def test_a_csv_given_twice_counts_each_run_once(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_text(
        "variant,size,flops,val_loss,seed\n"
        "baseline,s1,1e18,3.0,0\n"
        "baseline,s1,1e18,3.1,1\n"
        "baseline,s2,4e18,2.5,\n"
    )
    shutil.copy(p, tmp_path / "copy.csv")
    once = collect([p])
    twice = collect([p, tmp_path / "copy.csv"])
    assert len(collect([p, p]).runs) == len(once.runs) == 3
    # a row without a seed is known to be itself only in the same file
    assert len(twice.runs) == 4 and len(twice.duplicates) == 2
    (tmp_path / "other.csv").write_text(
        "variant,size,flops,val_loss,seed\nbaseline,s1,1e18,3.3,0\n"
    )
    with pytest.raises(InputError, match=r"runs.csv line 2 and .*other.csv line 2 are one run"):
        collect([p, tmp_path / "other.csv"])


def test_the_fit_of_a_sweep_and_its_copy_is_the_fit_of_the_sweep(tmp_path, capsys):
    """The interval is the seeds': a copy given beside its sweep narrows nothing."""
    import json

    from analysis.fit import main

    shutil.copytree(DEMO, tmp_path / "copy" / "demo_runs")
    got = {}
    for name, inputs in (("one", [DEMO]), ("both", [DEMO, tmp_path / "copy" / "demo_runs"])):
        out = tmp_path / name
        assert main([*map(str, inputs), "--out", str(out), "--no-plots", "--bootstrap", "200"]) == 0
        fits = json.loads((out / "fits.json").read_text())
        got[name] = [
            (m["variant"], m["multiplier"], m["ci"]) for m in fits["multipliers"]["at_c_ref"]
        ]
        got[name + " runs"] = fits["runs"]  # 36 completed, 108 points
        cap = capsys.readouterr()
    assert got["both"] == got["one"] and got["both runs"] == got["one runs"]
    assert (got["one runs"]["completed"], got["one runs"]["points"]) == (36, 108)
    assert "note: 36 run(s) found twice, each counted once" in cap.err
    assert "counts as a replicate" not in cap.out
