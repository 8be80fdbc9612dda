"""analysis.lr_select: the LR picked per size from a scan, and the hparams file a sweep reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import compose_run

from analysis.lr_select import main
from andrea.config.resolve import resolve_run

GRID = [0.25, 0.5, 1.0, 2.0, 4.0]


def write_scan(
    root: Path,
    size: str,
    center: float,
    optimum: float,
    curvature: float = 0.3,
    seeds=(0, 1),
    batch: int = 2048,
    beta2: float = 0.99,
    noise: float = 0.0,
    variant: str = "baseline",
    floor: float = 3.0,
) -> None:
    """Runs whose val_loss = floor + curvature * (log10(lr / optimum))^2 (+ a seed offset)."""
    for scale in GRID:
        lr = center * scale
        for seed in seeds:
            d = root / size / variant / f"seed{seed},train.lr_scale={scale},b={batch},{beta2}"
            d.mkdir(parents=True)
            loss = floor + curvature * math.log10(lr / optimum) ** 2 + noise * (seed - 0.5)
            (d / "results.json").write_text(
                json.dumps(
                    {
                        "status": "completed",
                        "variant": variant,
                        "label": variant,
                        "size": size,
                        "seed": seed,
                        "lr": lr,
                        "batch_tokens": batch,
                        "beta2": beta2,
                        "val_loss": loss,
                        "flops": 1e12,  # every completed results.json records it
                    }
                )
            )


def test_parabola_recovers_the_optimum_between_grid_points(tmp_path, capsys):
    # optimum 1.5e-3 lies between the grid's 1e-3 and 2e-3; argmin alone would say 2e-3
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1.5e-3, noise=0.01)
    write_scan(tmp_path / "scan", "tiny-2", center=1e-3, optimum=7e-4)
    rc = main(
        [
            str(tmp_path / "scan"),
            "--name",
            "picked",
            "--out",
            str(tmp_path / "out"),
            "--hparams-dir",
            str(tmp_path / "hparams"),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    sel = json.loads((tmp_path / "out" / "lr_select.json").read_text())
    picks = {c["size"]: c["pick"] for c in sel["curves"]}
    assert picks["tiny-1"] == pytest.approx(1.5e-3, rel=0.01)  # exact parabola: seeds averaged
    assert picks["tiny-2"] == pytest.approx(7e-4, rel=0.01)
    assert (tmp_path / "out" / "lr_scan.png").stat().st_size > 10_000
    text = (tmp_path / "hparams" / "picked.yaml").read_text()
    assert "selected_by:" in text and "seed1,train.lr_scale=0.25" in text  # provenance

    # The scaling sweep picks them up through hparams=picked.
    over = [f"hydra.searchpath=[file://{tmp_path}]", "hparams=picked", "model=attnres_full"]
    spec = resolve_run(compose_run([*over, "size=tiny-1"]))
    assert spec.lr == pytest.approx(1.5e-3, rel=0.01) and spec.train.beta2 == 0.99
    assert resolve_run(compose_run([*over, "size=tiny-2"])).lr == pytest.approx(7e-4, rel=0.01)


def test_a_variant_scanned_too_gets_a_robustness_row_at_its_own_best_lr(tmp_path, capsys):
    # The baseline's optimum is at 1e-3 (a grid point); the variant's at 2e-3, with a lower floor.
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-3)
    write_scan(
        tmp_path / "scan", "tiny-1", center=1e-3, optimum=2e-3, floor=2.9, variant="attnres_block"
    )
    rc = main(
        [
            str(tmp_path / "scan"),
            "--name",
            "rob",
            "--out",
            str(tmp_path / "out"),
            "--hparams-dir",
            str(tmp_path / "hparams"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "Robustness" in out and "attnres_block" in out
    sel = json.loads((tmp_path / "out" / "lr_select.json").read_text())
    (row,) = sel["robustness"]
    assert row["label"] == "attnres_block" and row["reference_lr"] == pytest.approx(1e-3)
    assert row["own_pick"] == pytest.approx(2e-3, rel=0.01)
    assert row["own_best_lr"] == pytest.approx(2e-3) and row["own_best_loss"] == pytest.approx(2.9)
    # at the baseline's LR the variant sits 0.3 * log10(2)^2 above its own optimum
    assert row["loss_at_reference_lr"] == pytest.approx(2.9 + 0.3 * math.log10(2) ** 2)
    assert row["gain"] == pytest.approx(0.3 * math.log10(2) ** 2)
    # the hparams file is chosen on the baseline alone
    assert {c["size"] for c in sel["curves"]} == {"tiny-1"} and len(sel["curves"]) == 1
    assert "lr: 0.001" in (tmp_path / "hparams" / "rob.yaml").read_text()


def test_a_scan_of_several_variants_writes_each_variant_its_own_pick(tmp_path, capsys):
    """`<name>.yaml` keeps every variant at the baseline's pick (the report's protocol);
    `<name>_own.yaml` gives each scanned variant its own pick per size, and a sweep reads it
    through hparams=<name>_own with the usual precedence (train.* wins)."""
    for size, (b, v, f) in {"tiny-1": (1e-3, 2e-3, 1.5e-3), "tiny-2": (7e-4, 7e-4, 1e-3)}.items():
        write_scan(tmp_path / "scan", size, center=1e-3, optimum=b)
        write_scan(tmp_path / "scan", size, center=1e-3, optimum=v, variant="attnres_block_n2")
        write_scan(tmp_path / "scan", size, center=1e-3, optimum=f, variant="attnres_full")
    rc = main(
        [
            str(tmp_path / "scan"),
            "--name",
            "multi",
            "--out",
            str(tmp_path / "out"),
            "--hparams-dir",
            str(tmp_path / "hparams"),
        ]
    )
    assert rc == 0 and "hparams=multi_own" in capsys.readouterr().out
    shared = (tmp_path / "hparams" / "multi.yaml").read_text()
    assert "variants:" not in shared
    own = (tmp_path / "hparams" / "multi_own.yaml").read_text()
    assert "name: multi_own" in own and "selected_on: baseline" in own

    def lr(hp, model, size, *extra):
        over = [
            f"hydra.searchpath=[file://{tmp_path}]",
            f"hparams={hp}",
            f"model={model}",
            f"size={size}",
            *extra,
        ]
        return resolve_run(compose_run(over)).lr

    for size, (b, v, f) in {"tiny-1": (1e-3, 2e-3, 1.5e-3), "tiny-2": (7e-4, 7e-4, 1e-3)}.items():
        for model in ("baseline", "attnres_block_n2", "attnres_full"):
            assert lr("multi", model, size) == pytest.approx(b, rel=0.01)
        assert lr("multi_own", "baseline", size) == pytest.approx(b, rel=0.01)
        assert lr("multi_own", "attnres_block_n2", size) == pytest.approx(v, rel=0.01)
        assert lr("multi_own", "attnres_full", size) == pytest.approx(f, rel=0.01)
    assert lr("multi_own", "attnres_full", "tiny-1", "train.lr=0.005") == 0.005
    # a variant the scan did not hold is refused, not silently given the baseline's pick
    from andrea.config.resolve import ConfigError

    with pytest.raises(ConfigError, match="not for model denseformer"):
        lr("multi_own", "denseformer", "tiny-1")
    with pytest.raises(ConfigError, match="no attnres_full entry for size=tiny-3"):
        lr("multi_own", "attnres_full", "tiny-3")


def test_the_plot_title_names_the_variant_and_the_optimizer(tmp_path, monkeypatch):
    import analysis.lr_select as lrs

    titles = []
    import matplotlib.axes

    real = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(
        matplotlib.axes.Axes,
        "set_title",
        lambda self, t, **kw: (titles.append(t), real(self, t, **kw))[1],
    )
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-3)
    for d in (tmp_path / "scan").rglob("results.json"):
        d.write_text(d.read_text().replace('"status"', '"optimizer": "muon", "status"'))
    assert (
        lrs.main(
            [
                str(tmp_path / "scan"),
                "--name",
                "m",
                "--out",
                str(tmp_path / "out"),
                "--hparams-dir",
                str(tmp_path / "hparams"),
            ]
        )
        == 0
    )
    assert titles == ["LR scan of baseline under Muon (+ AdamW): loss vs LR per size"]


def test_best_at_the_edge_is_reported_not_extrapolated(tmp_path, capsys):
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-2)
    rc = main(
        [
            str(tmp_path / "scan"),
            "--name",
            "edge",
            "--out",
            str(tmp_path / "out"),
            "--hparams-dir",
            str(tmp_path / "hparams"),
        ]
    )
    assert rc == 0
    assert "edge of the scan" in capsys.readouterr().err
    (curve,) = json.loads((tmp_path / "out" / "lr_select.json").read_text())["curves"]
    assert curve["pick"] == pytest.approx(4e-3) and "EDGE" in curve["how"]


def test_the_better_batch_setting_wins(tmp_path):
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-3, batch=2048)
    # the same curve 0.1 higher at batch 4096
    for scale in GRID:
        d = tmp_path / "scan" / "tiny-1" / "baseline" / f"seed0,b4096,{scale}"
        d.mkdir(parents=True)
        lr = 1e-3 * scale
        (d / "results.json").write_text(
            json.dumps(
                {
                    "status": "completed",
                    "variant": "baseline",
                    "size": "tiny-1",
                    "seed": 0,
                    "lr": lr,
                    "batch_tokens": 4096,
                    "beta2": 0.99,
                    "val_loss": 3.1 + 0.3 * math.log10(lr / 1e-3) ** 2,
                    "flops": 1e12,
                }
            )
        )
    assert (
        main(
            [
                str(tmp_path / "scan"),
                "--name",
                "b",
                "--out",
                str(tmp_path / "out"),
                "--hparams-dir",
                str(tmp_path / "hparams"),
            ]
        )
        == 0
    )
    assert "batch_tokens: 2048" in (tmp_path / "hparams" / "b.yaml").read_text()


def test_no_usable_runs_is_exit_2(tmp_path, capsys):
    (tmp_path / "scan" / "x").mkdir(parents=True)
    (tmp_path / "scan" / "x" / "results.json").write_text(
        '{"status": "failed", "variant": "baseline"}'
    )
    assert main([str(tmp_path / "scan"), "--hparams-dir", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err
    assert "no completed baseline runs" in err and "status 'failed'" in err
    assert main([str(tmp_path / "nope")]) == 2


def test_the_scan_records_its_optimizer_and_refuses_a_mix(tmp_path, capsys):
    write_scan(tmp_path / "muon", "tiny-1", center=1e-3, optimum=1e-3)
    for p in (tmp_path / "muon").rglob("results.json"):  # a Muon scan (train.optimizer=muon)
        p.write_text(json.dumps({**json.loads(p.read_text()), "optimizer": "muon"}))
    args = ["--name", "m", "--out", str(tmp_path / "out"), "--hparams-dir", str(tmp_path / "hp")]
    assert main([str(tmp_path / "muon"), *args]) == 0
    assert "optimizer: muon" in (tmp_path / "hp" / "m.yaml").read_text()
    assert json.loads((tmp_path / "out" / "lr_select.json").read_text())["optimizer"] == "muon"
    write_scan(tmp_path / "adamw", "tiny-2", center=1e-3, optimum=1e-3)  # no key: adamw
    assert main([str(tmp_path / "muon"), str(tmp_path / "adamw"), *args]) == 2
    err = capsys.readouterr().err  # collect refuses one label trained with two optimizers
    assert "baseline: runs trained with different optimizers (adamw: " in err and "muon: " in err


def test_variants_trained_with_other_optimizers_are_refused(tmp_path, capsys):
    """Each label is one optimizer (collect checks that), but a baseline scanned with AdamW and a
    variant with Muon are no scan of one optimizer either."""
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-3)
    write_scan(tmp_path / "scan", "tiny-1", center=1e-3, optimum=1e-3, variant="attnres_full")
    for p in (tmp_path / "scan" / "tiny-1" / "attnres_full").rglob("results.json"):
        p.write_text(json.dumps({**json.loads(p.read_text()), "optimizer": "muon"}))
    args = ["--name", "m", "--out", str(tmp_path / "out"), "--hparams-dir", str(tmp_path / "hp")]
    assert main([str(tmp_path / "scan"), *args]) == 2
    assert "the runs mix optimizers (adamw, muon)" in capsys.readouterr().err
