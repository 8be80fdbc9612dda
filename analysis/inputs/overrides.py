"""The command-line overrides a finished run was launched with, as Hydra recorded them in the
run's `.hydra/` (overrides.yaml; hydra.yaml's output_dir and config.yaml's out_dir say where it
was written): what `analysis.next_runs` prints to launch more seeds of the same grid, whether the
grid came from a sweep file (`sweeps=demo`) or from the command line (`model=a,b size=s …`)."""

from __future__ import annotations

import shlex
from pathlib import Path

SEED = "train.seed"
OUT_DIR = "out_dir"


def _yaml(path: Path):
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def recorded_overrides(run_dir: Path | None) -> list[str] | None:
    """The run's overrides without its seed, with `out_dir` pointing where the run is now (a
    sweep copied elsewhere keeps its old out_dir in the record); None where none are recorded."""
    if run_dir is None:
        return None
    hydra_dir = Path(run_dir) / ".hydra"
    overrides = _yaml(hydra_dir / "overrides.yaml")
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        return None
    out = [o for o in overrides if _key(o) != SEED]
    moved = _moved_out_dir(Path(run_dir), hydra_dir)
    if moved is not None:
        out = [o for o in out if _key(o) != OUT_DIR] + [f"{OUT_DIR}={moved}"]
    return out


def _moved_out_dir(run_dir: Path, hydra_dir: Path) -> str | None:
    """The out_dir the run lies under now, where it was written under another one; else None."""
    hydra, config = _yaml(hydra_dir / "hydra.yaml"), _yaml(hydra_dir / "config.yaml")
    try:
        written = Path(hydra["hydra"]["runtime"]["output_dir"])
        out_dir = Path(config[OUT_DIR])
    except (TypeError, KeyError):
        return None
    here = run_dir.resolve()
    if not out_dir.is_absolute():
        return None  # relative to the launch's directory: not known here
    try:
        rel = written.relative_to(out_dir)
    except ValueError:
        return None
    if here == written or here.parts[-len(rel.parts) :] != rel.parts:
        return None
    return str(Path(*here.parts[: -len(rel.parts)]))


def grid_lines(per_run: list[list[str]]) -> list[list[str]]:
    """The overrides that launch the runs' grid again (seeds apart): one line where the runs
    differ in one key (`model=baseline,attnres_full`), else one line per distinct set."""
    distinct: list[list[str]] = []
    for o in per_run:
        if o not in distinct:
            distinct.append(o)
    if len(distinct) < 2:
        return distinct
    keys = [[_key(x) for x in o] for o in distinct]
    if any(k != keys[0] for k in keys):
        return distinct
    differ = {i for o in distinct for i, x in enumerate(o) if x != distinct[0][i]}
    if len(differ) != 1:
        return distinct
    (i,) = differ
    values = []
    for o in distinct:
        v = o[i].split("=", 1)[1]
        if v not in values:
            values.append(v)
    merged = list(distinct[0])
    merged[i] = f"{distinct[0][i].split('=', 1)[0]}={','.join(values)}"
    return [merged]


def grids_by_size(runs) -> dict[str, list[list[str]]] | None:
    """Per size, the `grid_lines` of its finished runs (analysis.inputs.collect Runs); None
    where a run has no recorded overrides (a CSV, or runs written by other tools)."""
    dirs: dict[str, dict[str, Path | None]] = {}
    for r in runs:
        dirs.setdefault(r.size, {}).setdefault(r.run_id, r.run_dir)
    out = {}
    for size, by_run in dirs.items():
        recorded = [recorded_overrides(d) for d in by_run.values()]
        if any(o is None for o in recorded):
            return None
        out[size] = grid_lines(recorded)
    return out


def shell_words(overrides: list[str]) -> str:
    """The overrides as shell words (quoted where a shell would read brackets or spaces)."""
    return " ".join(shlex.quote(o) for o in overrides)
