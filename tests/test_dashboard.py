"""The sweep dashboard plots only keys that runs really log, filtered and grouped the right way.

Source of truth for "really log": an offline MetricsLogger run in tmp (its metrics.jsonl and the
media files W&B wrote), fed with the real model's `return_stats`, and the keys andrea/train.py
passes to the logger.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import run_file_bytes

from andrea.run import logkeys as keys
from andrea.run.metrics import MetricsLogger, WandbConfig, run_id_for
from andrea.run.rundir import RunDir

ws = pytest.importorskip("wandb_workspaces.workspaces")
wr = pytest.importorskip("wandb_workspaces.reports.v2")
from wandb_workspaces.expr import string_to_filterexpr_list  # noqa: E402

from analysis import dashboard  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GROUP = "scaling-test"
ANALYSIS_KEYS = {keys.ANALYSIS_FIT_TABLE, keys.ANALYSIS_SCALING, keys.ANALYSIS_MULTIPLIER}


def filter_terms(filters) -> set[tuple]:
    """(section, name, op, value) of each AND-ed term (the library stores filters as a string)."""
    return {(f.key.section, f.key.name, f.op, f.value) for f in string_to_filterexpr_list(filters)}


def all_panels(workspace) -> list:
    return [p for s in workspace.sections for p in s.panels]


def plotted_keys(panels) -> set[str]:
    return set().union(*(dashboard.panel_keys(p) for p in panels))


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """Keys logged by a real offline run: {"jsonl": set, "media": set, "config": bytes}."""
    tmp = tmp_path_factory.mktemp("dash")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
        mp.setenv("WANDB_CONFIG_DIR", str(tmp / "wandb_config"))
        for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR", "WANDB_RUN_ID"):
            mp.delenv(var, raising=False)
        from andrea.model.transformer import ANDREA, ModelConfig

        model = ANDREA(
            ModelConfig(
                n_layer=2,
                n_head=2,
                d_model=16,
                vocab_size=64,
                context_length=8,
                residual="attnres_block",
                block_size=2,
            )
        )
        with torch.no_grad():
            _, stats = model(torch.randint(0, 64, (2, 8)), return_stats=True)

        rd = RunDir(tmp / "run")
        config = {
            keys.CONFIG_VARIANT: "attnres_block",
            keys.CONFIG_LABEL: "attnres_block_s2",
            keys.CONFIG_BLOCK_SIZE: 2,
            keys.CONFIG_SIZE: "tiny",
        }
        logger = MetricsLogger(
            rd,
            WandbConfig(mode="offline"),
            run_id=run_id_for(rd),
            name="tiny/attnres_block_s2",
            group=GROUP,
            tags=["attnres_block", "tiny"],
            config=config,
        )
        for step in (1, 2):
            tokens = 16 * step
            # Every scalar in logkeys, as train.py's log calls send them.
            logger.log(step, {k: float(step) for k in keys.SCALARS} | {keys.TOKENS: tokens})
        logger.log_dynamics(2, stats)
        logger.finish({"status": "completed"})

    jsonl = set()
    for line in rd.metrics.read_text().splitlines():
        jsonl |= set(json.loads(line))
    (run,) = rd.wandb_dir.glob("offline-run-*")
    media_root = run / "files" / "media"
    media = set()
    for f in media_root.rglob("*"):
        if f.is_file():  # media/images/dynamics/depth_weights_2_<hash>.png → dynamics/depth_weights
            rel = f.relative_to(media_root).parts[1:]
            media.add("/".join(rel[:-1] + (f.name.rsplit("_", 2)[0],)))
    return {"jsonl": jsonl, "media": media, "run": run}


@pytest.fixture(scope="module")
def workspace():
    return dashboard.build_workspace("my-team", "andrea", GROUP)


def test_every_plotted_key_is_logged(workspace, logged):
    logged_keys = logged["jsonl"] | logged["media"]
    assert keys.DEPTH_WEIGHTS in logged["media"] and keys.LAYER_RMS_PLOT in logged["media"]
    assert keys.DEPTH_SHARPNESS in logged["media"]
    missing = plotted_keys(all_panels(workspace)) - logged_keys - ANALYSIS_KEYS
    assert not missing, f"panels plot keys no run logs: {sorted(missing)}"


def test_trainer_logs_the_plotted_scalars(workspace):
    """The scalar keys the panels plot are ones andrea/train.py passes to its logger."""
    train_py = REPO / "andrea" / "train.py"
    if not train_py.exists():
        pytest.skip("andrea/train.py not written yet")
    used = {
        getattr(keys, node.attr)
        for node in ast.walk(ast.parse(train_py.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "keys"
        and hasattr(keys, node.attr)
    }
    scalars = plotted_keys(all_panels(workspace)) & set(keys.SCALARS)
    assert scalars and scalars <= used, sorted(scalars - used)


def test_panel_keys_come_from_logkeys(workspace):
    defined = {v for k, v in vars(keys).items() if k.isupper() and isinstance(v, str)}
    assert plotted_keys(all_panels(workspace)) <= defined


def test_panels_cover_the_questions(workspace):
    lines = {(p.x, tuple(p.y)): p for p in all_panels(workspace) if isinstance(p, wr.LinePlot)}
    scaling = lines[(keys.FLOPS, (keys.VAL_LOSS,))]
    assert scaling.log_x and scaling.log_y
    assert lines[(keys.TOKENS, (keys.TRAIN_LOSS,))].log_x
    bars = {k for p in all_panels(workspace) if isinstance(p, wr.BarPlot) for k in p.metrics}
    assert {keys.TOKENS_PER_S, keys.MFU} <= bars
    media = {
        k for p in all_panels(workspace) if isinstance(p, wr.MediaBrowser) for k in p.media_keys
    }
    assert {
        keys.DEPTH_WEIGHTS,
        keys.LAYER_RMS_PLOT,
        keys.DEPTH_SHARPNESS,
        keys.ANALYSIS_SCALING,
        keys.ANALYSIS_MULTIPLIER,
    } <= media
    tables = [
        p.table_name for p in all_panels(workspace) if isinstance(p, wr.WeavePanelSummaryTable)
    ]
    assert tables == [keys.ANALYSIS_FIT_TABLE]


def test_filtered_to_the_group_and_grouped_by_label_and_size(workspace, logged):
    rs = workspace.runset_settings
    assert filter_terms(rs.filters) == {("run", "Group", "=", GROUP)}
    assert [g.name for g in rs.groupby] == [keys.CONFIG_LABEL, keys.CONFIG_SIZE]
    assert all(isinstance(g, ws.Config) for g in rs.groupby)
    # The run carries the group and those config keys (checked in the file W&B wrote).
    # wandb-core writes the file after finish() returns: wait for it
    run_id = next(logged["run"].glob("run-*.wandb")).name[len("run-") : -len(".wandb")]
    for needle in (GROUP, keys.CONFIG_LABEL, keys.CONFIG_SIZE, "attnres_block_s2"):
        assert needle.encode() in run_file_bytes(logged["run"], run_id, needle.encode()), needle


def test_workspace_serialises_without_network(workspace):
    """What W&B receives on save: backend names for the group filter and the grouping."""
    spec = json.loads(workspace._to_model().model_dump_json(by_alias=True))
    assert spec["displayName"] == dashboard.workspace_name(GROUP)
    (runset,) = spec["spec"]["section"]["runSets"]
    (flt,) = runset["filters"]["filters"]
    assert (flt["key"], flt["op"], flt["value"]) == (
        {"section": "run", "name": "group"},
        "=",
        GROUP,
    )
    assert runset["grouping"] == [
        {"section": "config", "name": f"{k}.value"} for k in (keys.CONFIG_LABEL, keys.CONFIG_SIZE)
    ]
    assert keys.VAL_LOSS in json.dumps(spec)


def test_report_has_a_train_loss_grid_per_size():
    report = dashboard.build_report("my-team", "andrea", GROUP, sizes=["s1", "s2"])
    grids = [b for b in report.blocks if isinstance(b, wr.PanelGrid)]
    assert len(grids) == len(dashboard.SECTIONS) + 2
    per_size = grids[-2:]
    for grid, size in zip(per_size, ["s1", "s2"]):
        (runset,) = grid.runsets
        assert filter_terms(runset.filters) == {
            ("run", "Group", "=", GROUP),
            ("config", keys.CONFIG_SIZE, "=", size),
        }
        (panel,) = grid.panels
        assert (panel.x, panel.y) == (keys.TOKENS, [keys.TRAIN_LOSS])


def run_cli(args, env_extra, tmp_path, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        {
            "WANDB_BASE_URL": "http://127.0.0.1:9",
            "NETRC": str(tmp_path / "none.netrc"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(REPO),
            **env_extra,
        }
    )
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.dashboard", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    return proc, time.monotonic() - t


def test_cli_without_credentials_fails_fast_with_a_clear_message(tmp_path):
    proc, took = run_cli(["--entity", "e", "--project", "p", "--group", GROUP], {}, tmp_path)
    assert proc.returncode == 1
    assert "WANDB_API_KEY" in proc.stderr and "wandb login" in proc.stderr
    # "fast" = no network wait: wandb's client retries for minutes (analysis/dashboard.py). ~3 s
    # alone; the bound is wide so that a busy machine's slow start-up cannot fail it.
    assert took < 60


def test_cli_with_unreachable_server_fails_fast(tmp_path):
    proc, took = run_cli(
        ["--entity", "e", "--project", "p", "--group", GROUP], {"WANDB_API_KEY": "k" * 40}, tmp_path
    )
    assert proc.returncode == 1
    assert "cannot reach W&B at http://127.0.0.1:9" in proc.stderr
    assert took < 60  # as above: the failure mode is wandb's minutes of retries


def test_cli_dry_run_prints_the_panels(tmp_path):
    proc, _ = run_cli(["--group", GROUP, "--dry-run"], {}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert keys.VAL_LOSS in proc.stdout and f"Group\") == '{GROUP}'" in proc.stdout


def test_maybe_create_dashboard_offline_and_disabled(capsys):
    assert (
        dashboard.maybe_create_dashboard(WandbConfig(mode="offline", dashboard=True), GROUP) is None
    )
    out = capsys.readouterr().out
    assert "wandb sync" in out and f"--group {GROUP}" in out
    assert (
        dashboard.maybe_create_dashboard(WandbConfig(mode="disabled", dashboard=True), GROUP)
        is None
    )
    assert (
        dashboard.maybe_create_dashboard(WandbConfig(mode="online", dashboard=False), GROUP) is None
    )
    assert capsys.readouterr().out == ""


def test_maybe_create_dashboard_online_without_credentials_never_raises(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none.netrc"))
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    assert (
        dashboard.maybe_create_dashboard(WandbConfig(mode="online", dashboard=True), GROUP) is None
    )
    out = capsys.readouterr().out
    assert "not created" in out and "python -m analysis.dashboard" in out


def test_cli_dry_run_report_prints_the_report_panels(tmp_path):
    proc, _ = run_cli(["--group", GROUP, "--dry-run", "--report", "--sizes", "s1,s2"], {}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"report 'andrea sweep {GROUP}'" in out
    report = out[out.index("report '") :]
    assert "[train loss, size s1]" in report and "[train loss, size s2]" in report
    assert keys.VAL_LOSS in report and "Config(\"size\") == 's2'" in report
    proc, _ = run_cli(["--group", GROUP, "--dry-run", "--report"], {}, tmp_path)
    assert "report '" in proc.stdout and "pass --sizes" in proc.stdout


def test_every_default_label_and_any_new_one_has_a_colour():
    # the labels conf/model/*.yaml give: mHC and mHC-lite with their streams, Block with N = 8
    for label in ("mhc_n4", "mhc_lite_n4", "attnres_block_n8", "attnres_block_n2", "mhc_n2"):
        assert label in dashboard.LABEL_COLORS
    assert len(set(dashboard.LABEL_COLORS.values())) == len(dashboard.LABEL_COLORS)
    new = dashboard.label_colors(["attnres_full+sigmoid", "mhc_n6"])
    assert new["attnres_full+sigmoid"].startswith("#") and new["mhc_n6"].startswith("#")
    assert dashboard.label_color("mhc_n6") == new["mhc_n6"]  # stable
    spec = dashboard.build_workspace("e", "p", GROUP, labels=["mhc_n6"])
    assert spec.runset_settings.group_colors["mhc_n6"] == new["mhc_n6"]
