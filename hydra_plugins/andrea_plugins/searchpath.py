"""Adds the repository root to Hydra's search path so `sweeps/` and `slurm/` are config groups:
`python sweep.py -m sweeps=scaling_law slurm=example`."""

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

REPO_ROOT = Path(__file__).resolve().parents[2]


class AndreaSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="andrea", path=f"file://{REPO_ROOT}")
        from hydra_plugins.andrea_plugins.launcher import register_launcher_configs

        register_launcher_configs()
