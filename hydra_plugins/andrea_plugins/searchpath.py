"""A search-path plugin used as a hook: Hydra calls it after scanning (executing) every plugin
module, which is the one point where andrea's launchers can take over the names
`hydra/launcher=submitit_local|submitit_slurm` whatever order the plugins were scanned in.

(`sweeps/` and `slurm/` reach Hydra as the groups `sweeps=` and `slurm=` through the links
conf/sweeps and conf/slurm.)"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class AndreaSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        from hydra_plugins.andrea_plugins.launcher import register_launcher_configs

        register_launcher_configs()
