"""`--metric`: every analysis command fits bpb or a domain's loss from sweeps and CSVs, and the
domains command compares the domains' multipliers with a paired seed bootstrap."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from analysis import ablations, architecture, backtest, domains, fit, lr_select, next_runs
from analysis.inputs.collect import collect
from analysis.inputs.metrics import record_value

SIZES = (("tiny-1", 1e15), ("tiny-2", 4e15), ("tiny-3", 1.6e16))


def law(C, A, m):
    """A loss falling as C^-0.05 for a variant that needs 1/m of the baseline's compute."""
    return A * (C * m / 8.64e19) ** -0.05


def rows(code_m=1.3, prose_m=1.3, seeds=4, seed=0):
    """Baseline and attnres_full: val_loss, bpb and two domains, with seed noise shared by every
    metric of a run (the same model scores them all)."""
    rng = np.random.default_rng(seed)
    out = []
    for variant, mc, mp in (("baseline", 1.0, 1.0), ("attnres_full", code_m, prose_m)):
        for size, C in SIZES:
            for s in range(seeds):
                e = rng.normal(0, 0.01)
                code = law(C, 3.0, mc) * np.exp(e + rng.normal(0, 0.002))
                prose = law(C, 4.0, mp) * np.exp(e + rng.normal(0, 0.002))
                out.append(
                    {
                        "variant": variant,
                        "size": size,
                        "flops": C,
                        "seed": s,
                        "val_loss": code,
                        "bpb": code * 0.45,
                        "domain:code/loss": code,
                        "domain:code/bpb": code * 0.45,
                        "domain:prose/loss": prose,
                        "domain:prose/bpb": prose * 0.6,
                    }
                )
    return out


def write_csv(path: Path, records: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    return path


def write_sweep(root: Path, records: list[dict]) -> Path:
    """One run directory per record; each run's results.json `points` holds its scores at two
    budgets, the top level those of the final one (as andrea's trainer writes them)."""
    for r in records:
        d = root / r["size"] / r["variant"] / f"seed{r['seed']}"
        d.mkdir(parents=True)
        scores = {k: v for k, v in r.items() if k == "val_loss" or k.startswith("domain:")}
        early = {k: v * 1.1 for k, v in scores.items()}
        points = [
            {
                "budget": 0.5,
                "tokens": 500,
                "flops": r["flops"] / 2,
                "val_bpb": r["bpb"] * 1.1,
                **early,
            },
            {"budget": 1.0, "tokens": 1000, "flops": r["flops"], "val_bpb": r["bpb"], **scores},
        ]
        res = {
            "status": "completed",
            "variant": r["variant"],
            "size": r["size"],
            "seed": r["seed"],
            "flops": r["flops"],
            "tokens": 1000,
            "lr": 1e-3,
            "batch_tokens": 1000,
            "val_bpb": r["bpb"],
            **scores,
            "points": points,
        }
        (d / "results.json").write_text(json.dumps(res))
    return root


def test_metric_value_reads_results_keys_and_csv_columns():
    assert record_value({"val_bpb": 1.2}, "bpb") == 1.2
    assert record_value({"bpb": "1.3"}, "bpb") == "1.3"  # a CSV column named after it
    assert record_value({"domain:x/loss": 2.0}, "domain:x/loss") == 2.0
    assert record_value({"val_loss": 2.0}, "bpb") is None


def test_collect_takes_each_points_own_score_of_the_metric(tmp_path):
    write_sweep(tmp_path / "s", rows())
    runs = collect([tmp_path / "s"], metric="domain:prose/loss").runs
    rec = rows()[0]
    mine = sorted(
        (r for r in runs if r.variant == "baseline" and r.size == "tiny-1" and r.seed == 0),
        key=lambda r: r.point,
    )
    assert [r.val_loss for r in mine] == pytest.approx(
        [rec["domain:prose/loss"] * 1.1, rec["domain:prose/loss"]]
    )
    bpb = collect([tmp_path / "s"], metric="bpb").runs
    assert sorted(r.val_loss for r in bpb)[0] == pytest.approx(min(x["bpb"] for x in rows()))


def test_fit_of_bpb_gives_the_nats_multiplier_on_sweeps_and_csvs(tmp_path):
    """bpb is nats times one constant per eval set: the power law's A absorbs it."""
    sweep = write_sweep(tmp_path / "s", rows())
    table = write_csv(tmp_path / "r.csv", rows())
    out = {}
    for name, inp, metric in (
        ("nats", sweep, "val_loss"),
        ("bpb", sweep, "bpb"),
        ("csv", table, "bpb"),
        ("prose", table, "domain:prose/bpb"),
    ):
        assert (
            fit.main(
                [
                    str(inp),
                    "--out",
                    str(tmp_path / name),
                    "--no-plots",
                    "--metric",
                    metric,
                    "--bootstrap",
                    "200",
                ]
            )
            == 0
        )
        report = json.loads((tmp_path / name / "fits.json").read_text())
        assert report["settings"]["metric"] == metric
        out[name] = report["multipliers"]["at_c_ref"][0]["multiplier"]
    assert out["bpb"] == pytest.approx(out["nats"], rel=1e-9)
    assert out["csv"] == pytest.approx(out["nats"], rel=1e-6)
    assert out["prose"] == pytest.approx(1.3, rel=0.15)


@pytest.mark.parametrize("command", [fit, backtest, ablations, architecture, next_runs])
def test_a_metric_the_runs_did_not_record_is_one_error(tmp_path, capsys, command):
    sweep = write_sweep(tmp_path / "s", rows())
    argv = [str(sweep), "--metric", "domain:books/loss"]
    if command in (fit, backtest, ablations, architecture):
        argv += ["--out", str(tmp_path / "out")]
    if command is next_runs:
        argv += ["--gpu-hours", "1"]
    assert command.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: --metric domain:books/loss: none of the 24 completed run(s) recorded it"
    )
    assert "records val_loss, bpb, domain:code/bpb, domain:code/loss" in err[0]


def test_metric_errors_on_csvs_and_in_lr_select(tmp_path, capsys):
    table = write_csv(tmp_path / "r.csv", rows())
    assert fit.main([str(table), "--out", str(tmp_path / "o"), "--metric", "domain:books/bpb"]) == 2
    assert "no column 'domain:books/bpb' for --metric" in capsys.readouterr().err
    assert fit.main([str(table), "--out", str(tmp_path / "o"), "--metric", "perplexity"]) == 2
    assert "--metric 'perplexity' is not a metric" in capsys.readouterr().err
    sweep = write_sweep(tmp_path / "s", rows())
    assert (
        lr_select.main(
            [str(sweep), "--metric", "domain:books/loss", "--hparams-dir", str(tmp_path / "hp")]
        )
        == 2
    )
    # lr_select reads runs through collect, so it refuses with every other command's line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "error: --metric domain:books/loss: none of the 24 completed run(s) recorded it"
    )


def test_domains_agree_or_disagree_beyond_the_paired_interval(tmp_path, capsys):
    same = write_csv(tmp_path / "same.csv", rows(1.3, 1.3))
    assert domains.main([str(same), "--bootstrap", "300", "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().out
    assert "attnres_full         prose / code:" not in text  # pairs in name order
    line = next(l for l in text.splitlines() if "code / prose" in l)
    assert line.endswith("agree within the interval")
    for metric in (
        "val_loss",
        "bpb",
        "domain:code/loss",
        "domain:code/bpb",
        "domain:prose/loss",
        "domain:prose/bpb",
    ):
        assert any(l.startswith(metric + " ") for l in text.splitlines()), metric
    differ = write_csv(tmp_path / "differ.csv", rows(1.6, 1.0))
    assert domains.main([str(differ), "--bootstrap", "300", "--out", str(tmp_path / "b")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if "code / prose" in l)
    assert line.endswith("DISAGREE beyond the interval")
    report = json.loads((tmp_path / "b" / "domains.json").read_text())
    (cmp,) = report["domain_comparisons"]
    assert cmp["disagree"] and cmp["ci"][0] > 1 and cmp["ratio"] == pytest.approx(1.6, rel=0.1)
    # the paired interval is narrower than either domain's own: the shared seed luck cancels
    own = [
        report["metrics"][m]["multipliers"]["attnres_full"]["ci"]
        for m in ("domain:code/loss", "domain:prose/loss")
    ]
    assert np.log(cmp["ci"][1] / cmp["ci"][0]) < min(np.log(hi / lo) for lo, hi in own)


def _figures(monkeypatch) -> dict:
    """Every figure the analysis saves, by file name: (y label, title, y tick labels, x label)
    per axes."""
    from analysis.report import plots, plots_extra

    drawn = {}

    def keep(fig, paths):
        fig.canvas.draw()
        lo_hi = [ax.get_ylim() for ax in fig.axes]
        drawn[Path(paths[0]).name] = [
            (
                ax.get_ylabel(),
                ax.get_title(),
                [
                    t.get_text()
                    for t in ax.get_yticklabels()
                    if t.get_text() and lo <= t.get_position()[1] <= hi
                ],
                ax.get_xlabel(),
            )
            for ax, (lo, hi) in zip(fig.axes, lo_hi)
        ]
        plots.plt.close(fig)

    monkeypatch.setattr(plots, "save_figure", keep)
    monkeypatch.setattr(plots_extra, "save_figure", keep)
    return drawn


def test_figures_name_the_metric_they_draw(tmp_path, monkeypatch):
    """scaling.png and frontier.png said "Validation loss (nats/token)" over bits per byte and
    over a domain's loss; multiplier.png's title said "loss" whatever was fitted."""
    from analysis.inputs.metrics import metric_axis_label

    assert metric_axis_label("val_loss") == "Validation loss (nats/token)"
    assert metric_axis_label("domain:prose/loss") == "Held-out domain prose: loss (nats/token)"
    assert metric_axis_label("domain:prose/bpb") == "Held-out domain prose: bits per byte"
    assert metric_axis_label("task:copa/acc") == "Task copa: accuracy"
    metric, label = "bpb", "Validation bits per byte"
    drawn = _figures(monkeypatch)
    sweep = write_sweep(tmp_path / "s", rows())
    assert (
        fit.main(
            [str(sweep), "--out", str(tmp_path / "o"), "--metric", metric, "--bootstrap", "50"]
        )
        == 0
    )
    assert drawn["scaling.png"][0][0] == label
    assert drawn["frontier.png"][0][0] == f"{label}, mean over seeds"
    _, title, ticks, _ = drawn["multiplier.png"][0]
    assert f"to reach the variant's {metric} / C" in title
    assert len(ticks) >= 4, ticks  # more than 1 and 2 on the log axis
    assert (
        backtest.main(
            [str(sweep), "--out", str(tmp_path / "b"), "--metric", metric, "--bootstrap", "50"]
        )
        == 0
    )
    assert drawn["backtest.png"][0][3].startswith(f"observed: {label}\n")
