"""W&B dashboards as code: one command gives every sweep a ready workspace (and optionally a
report).

    python -m analysis.dashboard --entity E --project andrea --group <sweep_name> [--report]
    python -m analysis.dashboard ... --dry-run       # build and print the panels, no network
    python -m analysis.dashboard ... --dry-run --report --sizes tiny-1,tiny-2   # and the report's

The sweep's runs share a W&B group (the sweep name). The workspace shows only that group, groups
runs by (label, size) so seeds of one configuration are averaged and each variant × size is one
line, and has a section per question:
  scaling   val/loss vs training FLOPs, log-log: the envelope over sizes is the scaling law
  training  train/loss, lr, grad norm vs tokens
  speed     tokens/s and MFU per run (last value), and over training
  dynamics  the latest depth-attention heatmap, its max weight and entropy per routing, and
            per-layer output RMS (AttnRes and Delta AttnRes runs)
  analysis  the analysis run's fit table and scaling / compute-multiplier figures
Every key comes from andrea.run.logkeys. `build_workspace` / `build_report` make the objects without
touching the network; only `main` (and `maybe_create_dashboard`) save them, under a timeout.
"""

from __future__ import annotations

import argparse
import netrc
import os
import sys
import threading
from typing import Any, Callable, Optional, Sequence
from urllib.parse import urlparse

from andrea.run import logkeys as keys
from andrea.run.metrics import WandbConfig

try:
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.expr import And
except ImportError:  # optional dependency: pip install 'andrea[dashboard]'
    wr = ws = And = None

DEFAULT_BASE_URL = "https://api.wandb.ai"
# Group the runs table (and so every panel) by these W&B config keys, in this order.
GROUP_BY = (keys.CONFIG_LABEL, keys.CONFIG_SIZE)
# Stable colors for the run labels (style.md: variant names are the config names everywhere):
# the labels conf/model/*.yaml give by default (Block AttnRes by S or by N blocks, mHC and
# mHC-lite with their stream count).
LABEL_COLORS = {
    "baseline": "#4E79A7",
    "attnres_full": "#E15759",
    "attnres_block_s2": "#F28E2B",
    "attnres_block_s4": "#59A14F",
    "attnres_block_s8": "#B07AA1",
    "attnres_block_n2": "#FF9D9A",
    "attnres_block_n8": "#9C755F",
    "mhc_n2": "#76B7B2",
    "mhc_n4": "#499894",
    "mhc_n8": "#86BCB6",
    "mhc_lite_n2": "#EDC948",
    "mhc_lite_n4": "#B6992D",
    "mhc_lite_n8": "#F1CE63",
    "denseformer": "#BAB0AC",
}
# Any other label (an ablation's `attnres_full+sigmoid`, mhc_n6, ...) gets one of these, chosen by
# a hash of its name: the same colour in every sweep and workspace, without a table edit.
_SPARE_COLORS = (
    "#D37295",
    "#FABFD2",
    "#A0CBE8",
    "#FFBE7D",
    "#8CD17D",
    "#D4A6C8",
    "#79706E",
    "#D7B5A6",
    "#F28E2B",
    "#59A14F",
)


def label_color(label: str) -> str:
    """The label's colour: the table's, else a stable pick of _SPARE_COLORS."""
    import zlib

    return LABEL_COLORS.get(label) or _SPARE_COLORS[zlib.crc32(label.encode()) % len(_SPARE_COLORS)]


def label_colors(labels: Sequence[str] = ()) -> dict[str, str]:
    """The table, plus a colour for every label of `labels` it lacks."""
    return {**LABEL_COLORS, **{lb: label_color(lb) for lb in labels}}


def _require_workspaces() -> None:
    if ws is None:
        raise SystemExit(
            "analysis.dashboard needs the wandb-workspaces package: "
            "pip install 'andrea[dashboard]' (or pip install wandb-workspaces)"
        )


# --- panels, grouped by the question they answer ------------------------------------------------
_LOSS_AXIS = "val loss (nats/token)"
# (title, x, x title, y, y title): each a log-log line against compute; bits per byte is
# tokenizer-free, comparable with other ladders (docs/metrics.md)
_SCALING_PLOTS = (
    ("val loss vs training compute", keys.FLOPS, "training FLOPs", keys.VAL_LOSS, _LOSS_AXIS),
    ("val loss vs PF-days", keys.PFLOPS_DAYS, "PF-days", keys.VAL_LOSS, _LOSS_AXIS),
    (
        "val bits per byte vs training compute",
        keys.FLOPS,
        "training FLOPs",
        keys.VAL_BPB,
        "val bits per byte",
    ),
)


def scaling_panels() -> list:
    return [
        wr.LinePlot(
            title=title, x=x, y=[y], log_x=True, log_y=True, title_x=title_x, title_y=title_y
        )
        for title, x, title_x, y, title_y in _SCALING_PLOTS
    ]


def training_panels() -> list:
    return [
        wr.LinePlot(
            title="train loss vs tokens",
            x=keys.TOKENS,
            y=[keys.TRAIN_LOSS],
            log_x=True,
            log_y=True,
            title_x="tokens",
            smoothing_factor=0.6,
            smoothing_type="exponential",
        ),
        wr.LinePlot(title="learning rate", x=keys.TOKENS, y=[keys.LR], title_x="tokens"),
        wr.LinePlot(
            title="grad norm (before clipping)",
            x=keys.TOKENS,
            y=[keys.GRAD_NORM],
            log_y=True,
            title_x="tokens",
        ),
    ]


def speed_panels() -> list:
    return [
        wr.BarPlot(title="tokens/s (last)", metrics=[keys.TOKENS_PER_S]),
        wr.BarPlot(title="MFU (last)", metrics=[keys.MFU]),
        wr.LinePlot(title="tokens/s", x=keys.TOKENS, y=[keys.TOKENS_PER_S], title_x="tokens"),
        wr.LinePlot(title="MFU", x=keys.TOKENS, y=[keys.MFU], title_x="tokens"),
    ]


def dynamics_panels() -> list:
    # Baseline runs log no depth weights, so the heatmap browsers show only the runs with depth
    # routing (AttnRes, Delta AttnRes).
    return [
        wr.MediaBrowser(title=title, media_keys=[key], num_columns=3)
        for title, key in (
            ("depth attention (latest eval)", keys.DEPTH_WEIGHTS),
            ("per-layer output RMS (latest eval)", keys.LAYER_RMS_PLOT),
            ("depth routing: max weight and entropy (latest eval)", keys.DEPTH_SHARPNESS),
        )
    ]


def analysis_panels() -> list:
    return [
        wr.WeavePanelSummaryTable(table_name=keys.ANALYSIS_FIT_TABLE),
        wr.MediaBrowser(title="scaling fits", media_keys=[keys.ANALYSIS_SCALING], num_columns=1),
        wr.MediaBrowser(
            title="compute multiplier", media_keys=[keys.ANALYSIS_MULTIPLIER], num_columns=1
        ),
    ]


SECTIONS: list[tuple[str, Callable[[], list]]] = [
    ("scaling: val loss vs compute", scaling_panels),
    ("training", training_panels),
    ("speed", speed_panels),
    ("dynamics (AttnRes)", dynamics_panels),
    ("analysis", analysis_panels),
]


def panel_keys(panel: Any) -> set[str]:
    """The logged keys a panel reads (x axis included)."""
    found: set[str] = set()
    for attr in ("y", "metrics", "media_keys"):
        found.update(getattr(panel, attr, None) or [])
    for attr in ("x", "table_name"):
        value = getattr(panel, attr, None)
        if isinstance(value, str):
            found.add(value)
    return found


def runs_filter(group: str, size: Optional[str] = None):
    """The sweep's runs (its W&B group), optionally only one size."""
    terms = [ws.Metric("Group") == group]
    if size is not None:
        terms.append(ws.Config(keys.CONFIG_SIZE) == size)
    return And(*terms)


# --- the workspace and the report ---------------------------------------------------------------
def workspace_name(group: str) -> str:
    return f"andrea sweep {group}"


def build_workspace(
    entity: str, project: str, group: str, name: Optional[str] = None, labels: Sequence[str] = ()
):
    """The sweep's workspace as an unsaved `ws.Workspace` (no network); `labels`: the sweep's run
    labels, each given a colour (label_colors)."""
    _require_workspaces()
    return ws.Workspace(
        entity=entity,
        project=project,
        name=name or workspace_name(group),
        sections=[
            ws.Section(
                name=title,
                panels=make(),
                is_open=True,
                layout_settings=ws.SectionLayoutSettings(columns=3, rows=2),
            )
            for title, make in SECTIONS
        ],
        settings=ws.WorkspaceSettings(
            x_axis=keys.TOKENS,  # default for auto panels; the curated ones set their own
            max_runs=200,  # a sweep is sizes × variants × seeds, beyond the default 10
            group_by_prefix="first",  # one section per namespace: train/, val/, speed/ ...
        ),
        runset_settings=ws.RunsetSettings(
            filters=runs_filter(group),
            groupby=[ws.Config(k) for k in GROUP_BY],
            group_colors=label_colors(labels),
        ),
    )


def build_report(entity: str, project: str, group: str, sizes: Sequence[str] = ()):
    """A report for the sweep: the workspace's sections, plus train loss per size (no network)."""
    _require_workspaces()

    def runset(name: str, size: Optional[str] = None) -> Any:
        return wr.Runset(
            entity=entity,
            project=project,
            name=name,
            filters=runs_filter(group, size),
            groupby=list(GROUP_BY),
        )

    blocks: list = [
        wr.P(
            text=f"Sweep group {group!r}: runs grouped by {', '.join(GROUP_BY)}; "
            "keys from andrea.run.logkeys."
        ),
    ]
    for title, make in SECTIONS:
        blocks += [wr.H2(text=title), wr.PanelGrid(runsets=[runset(group)], panels=make())]
    for size in sizes:
        blocks += [
            wr.H2(text=f"train loss, size {size}"),
            wr.PanelGrid(
                runsets=[runset(f"{group} / {size}", size)],
                panels=training_panels()[:1],
            ),
        ]
    return wr.Report(
        entity=entity,
        project=project,
        title=f"andrea sweep {group}",
        description="Scaling-law sweep: compute vs loss, training, speed, dynamics.",
        blocks=blocks,
        width="fluid",
    )


# --- talking to W&B: never without credentials, never without a timeout -----------------------
def base_url() -> str:
    return os.environ.get("WANDB_BASE_URL", DEFAULT_BASE_URL).rstrip("/")


def missing_credentials(url: str) -> Optional[str]:
    """Why we cannot authenticate to `url` (None when a key is available), without the network."""
    if os.environ.get("WANDB_API_KEY"):
        return None
    host = urlparse(url).hostname or url
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        if netrc.netrc(path).authenticators(host):
            return None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        pass
    return (
        f"no W&B credentials for {host}: set WANDB_API_KEY or run `wandb login` "
        f"(looked in the environment and {path})"
    )


def _with_timeout(fn: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """fn() in a daemon thread; raises TimeoutError if it has not returned after timeout_s.

    wandb's client retries network errors for minutes; a dashboard must never hold a sweep up.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=target, name=f"wandb-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout_s:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _api(timeout_s: float):
    import wandb

    api = wandb.Api(timeout=max(1, int(timeout_s)))
    api.viewer  # noqa: B018 - one authenticated request: fails fast on a bad key or no server
    return api


def _sweep_sizes(api, entity: str, project: str, group: str) -> list[str]:
    runs = api.runs(f"{entity}/{project}", filters={"group": group}, per_page=200)
    return sorted({str(r.config[keys.CONFIG_SIZE]) for r in runs if keys.CONFIG_SIZE in r.config})


def _sweep_labels(api, entity: str, project: str, group: str) -> list[str]:
    runs = api.runs(f"{entity}/{project}", filters={"group": group}, per_page=200)
    return sorted({str(r.config[keys.CONFIG_LABEL]) for r in runs if keys.CONFIG_LABEL in r.config})


def create_dashboard(
    entity: Optional[str],
    project: str,
    group: str,
    report: bool = False,
    sizes: Sequence[str] = (),
    timeout_s: float = 30.0,
    labels: Sequence[str] = (),
) -> list[str]:
    """Save the sweep's workspace (and report) to W&B; returns their URLs. `labels`: the sweep's
    run labels, for their colours (default: those of the group's runs).

    Raises RuntimeError with a message for people when there are no credentials or W&B cannot
    be reached in time.
    """
    _require_workspaces()
    url = base_url()
    problem = missing_credentials(url)
    if problem:
        raise RuntimeError(problem)
    probe_s = min(5.0, timeout_s)
    try:
        api = _with_timeout(lambda: _api(probe_s), probe_s, "connecting to W&B")
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"cannot reach W&B at {url}: {type(e).__name__}: {e}") from e
    entity = entity or api.default_entity
    if not entity:
        raise RuntimeError("no W&B entity: pass --entity (or set wandb.entity)")

    def save() -> list[str]:
        run_labels = list(labels) or _sweep_labels(api, entity, project, group)
        workspace = build_workspace(entity, project, group, labels=run_labels).save()
        urls = [workspace.url]
        if report:
            report_sizes = list(sizes) or _sweep_sizes(api, entity, project, group)
            urls.append(build_report(entity, project, group, report_sizes).save().url)
        return urls

    try:
        return _with_timeout(save, timeout_s, "saving the W&B workspace")
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"could not save the dashboard to {url}: {type(e).__name__}: {e}") from e


def maybe_create_dashboard(
    wandb_cfg: WandbConfig, group: str, timeout_s: float = 30.0, labels: Sequence[str] = ()
) -> Optional[str]:
    """At sweep launch: create the workspace when W&B is online and asked for; never raises."""
    if wandb_cfg.mode == "disabled" or not wandb_cfg.dashboard:
        return None
    entity_arg = f"--entity {wandb_cfg.entity} " if wandb_cfg.entity else ""
    command = (
        f"python -m analysis.dashboard {entity_arg}--project {wandb_cfg.project} --group {group}"
    )
    if wandb_cfg.mode != "online":
        print(
            f"W&B is offline: after `wandb sync <run dir>/wandb/offline-run-*`, create the "
            f"sweep's dashboard with\n  {command}",
            flush=True,
        )
        return None
    try:
        (url, *_) = create_dashboard(
            wandb_cfg.entity, wandb_cfg.project, group, timeout_s=timeout_s, labels=labels
        )
    except Exception as e:  # noqa: BLE001 - a dashboard is never worth a failed launch
        print(f"W&B dashboard not created ({e}); create it later with\n  {command}", flush=True)
        return None
    print(f"W&B dashboard for sweep {group}: {url}", flush=True)
    return url


# --- CLI ----------------------------------------------------------------------------------------
def describe(workspace) -> str:
    lines = [
        f"workspace {workspace.name!r} in {workspace.entity}/{workspace.project}",
        f"  runs: {workspace.runset_settings.filters}",
        f"  grouped by config: {', '.join(GROUP_BY)}",
    ]
    for section in workspace.sections:
        lines.append(f"  [{section.name}]")
        for panel in section.panels:
            title = getattr(panel, "title", None) or type(panel).__name__
            lines.append(f"    {title}: {', '.join(sorted(panel_keys(panel)))}")
    return "\n".join(lines)


def describe_report(report) -> str:
    """The report's blocks as `describe` prints a workspace: headings, then each grid's panels
    with the keys they plot and the runs they show."""
    lines = [f"report {report.title!r} in {report.entity}/{report.project}"]
    for block in report.blocks:
        if isinstance(block, wr.H2):
            lines.append(f"  [{block.text}]")
        elif isinstance(block, wr.PanelGrid):
            for rs in block.runsets:
                lines.append(f"    runs: {rs.filters}")
            for panel in block.panels:
                title = getattr(panel, "title", None) or type(panel).__name__
                lines.append(f"    {title}: {', '.join(sorted(panel_keys(panel)))}")
        elif isinstance(block, wr.P):
            lines.append(f"  {block.text}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis.dashboard",
        description="Create the W&B workspace (and optionally a report) for one sweep.",
    )
    parser.add_argument(
        "--entity", default=None, help="W&B entity (default: the API key's default entity)"
    )
    parser.add_argument("--project", default=WandbConfig.project, help="W&B project")
    parser.add_argument("--group", required=True, help="the sweep's W&B group (its sweep_name)")
    parser.add_argument("--report", action="store_true", help="also create a report")
    parser.add_argument(
        "--sizes",
        default="",
        help="comma-separated sizes for the report's per-size panels "
        "(default: the sizes of the group's runs)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before giving up")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="build and print the workspace without contacting W&B",
    )
    args = parser.parse_args(argv)
    _require_workspaces()

    sizes = [s for s in args.sizes.split(",") if s]
    if args.dry_run:
        entity = args.entity or "<entity>"
        print(describe(build_workspace(entity, args.project, args.group)))
        if args.report:
            print(describe_report(build_report(entity, args.project, args.group, sizes)))
            if not sizes:
                print(
                    "  (no per-size panels: a dry run does not ask W&B for the group's sizes; "
                    "pass --sizes)"
                )
        return 0
    try:
        urls = create_dashboard(
            args.entity,
            args.project,
            args.group,
            report=args.report,
            sizes=sizes,
            timeout_s=args.timeout,
        )
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for url in urls:
        print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
