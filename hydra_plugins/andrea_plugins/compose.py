"""The planner's job configs: one full Hydra composition per distinct set of config-group choices,
then each job's value overrides applied to a copy of it.

Hydra's sweeper composes every job from scratch (`load_sweep_config`: search path, defaults list,
every YAML file read and merged), half of the planning time of a large grid. Jobs that differ
only in values (`train.seed=1`, `train.lr_scale=2`) share their defaults list, so composing it
once and applying the values as Hydra does -- the same function, in the same order, in struct
mode, then the same `hydra.overrides.task` and `hydra.job.override_dirname` -- gives the config a
full composition gives (tests/test_compose.py checks every job of the shipped sweeps).

Only the planner uses this: the jobs themselves are composed by Hydra as before (the launchers
get their overrides), so no job's configuration depends on it.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf


class JobComposer:
    """`composer(overrides)` -> the job's config, as `load_sweep_config(master, overrides)`;
    `composer.transient(overrides)` -> the same config, valid only until the next call (the
    planner reads what it needs from it at once; no copy per job)."""

    def __init__(self, config_loader: Any, master: DictConfig) -> None:
        self.loader, self.master = config_loader, master
        self.parser = OverridesParser.create()
        self.parsed: dict[str, Override] = {}
        self.values: dict[str, bool] = {}  # by override: _is_value
        self.naming: dict[tuple, tuple] = {}  # by working config: override_dirname's settings
        # One config per (group choices, keys set by value): each job sets all of those keys
        # again, so none keeps a value of the job before it.
        self.working: dict[tuple, DictConfig] = {}
        self.repo = getattr(config_loader, "repository", None)
        # hydra.searchpath changes which names are groups: compose such sweeps in full.
        self.fast = self.repo is not None and not master.hydra.get("searchpath")

    def full(self, overrides: Sequence[str]) -> DictConfig:
        return self.loader.load_sweep_config(self.master, list(overrides))

    def __call__(self, overrides: Sequence[str]) -> DictConfig:
        return copy.deepcopy(self.transient(overrides))

    def _parse(self, line: str) -> Override:
        if line not in self.parsed:  # Hydra's parser takes ~0.5 ms an override
            self.parsed[line] = self.parser.parse_overrides([line])[0]
        return self.parsed[line]

    def _is_value(self, o: Override) -> bool:
        """A `key=value` override Hydra applies to the composed config (Hydra's own test, in
        defaults_list.Overrides), which a later `key=other` replaces entirely. Dict values merge
        and +key/~key add or delete: those go the full way."""
        if o.input_line not in self.values:
            self.values[o.input_line] = not (
                o.is_hydra_override()
                or o.package is not None
                or o.is_sweep_override()
                or o.is_add()
                or o.is_force_add()
                or o.is_delete()
                or isinstance(o.value(), dict)
                or self.repo.group_exists(o.key_or_group)
            )
        return self.values[o.input_line]

    def transient(self, overrides: Sequence[str]) -> DictConfig:
        if not self.fast:
            return self.full(overrides)
        try:
            parsed = [self._parse(line) for line in overrides]
            is_value = [self._is_value(o) for o in parsed]
        except Exception:  # noqa: BLE001 -- Hydra's full composition says what is wrong
            return self.full(overrides)
        values = [o for o, v in zip(parsed, is_value) if v]
        choices = tuple(o.input_line for o, v in zip(parsed, is_value) if not v)
        slot = (choices, tuple(o.key_or_group for o in values))
        cfg = self.working.get(slot)
        if cfg is None:
            cfg = self.working[slot] = self.full(choices)
            naming = cfg.hydra.job.config.override_dirname  # set by Hydra overrides: per slot
            self.naming[slot] = (
                naming.kv_sep,
                naming.item_sep,
                OmegaConf.to_container(naming.exclude_keys),
            )
        try:
            ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        except Exception:  # noqa: BLE001 -- a bad key or value: Hydra's own message
            del self.working[slot]
            return self.full(overrides)
        # What load_configuration derives from the whole override list (the master's overrides
        # are Hydra overrides only: the config already lists them under hydra.overrides.hydra).
        task = [o for o in parsed if not o.is_hydra_override()]
        cfg.hydra.overrides.task = [o.input_line for o in task]
        kv_sep, item_sep, exclude_keys = self.naming[slot]
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=task, kv_sep=kv_sep, item_sep=item_sep, exclude_keys=exclude_keys
        )
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        return cfg
