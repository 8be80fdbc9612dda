"""The Hydra callback of a single run (`python sweep.py key=value ...`, no `-m`).

In run mode Hydra creates the run directory and writes `.hydra/` in `run_job`, before the task
function sees the config. Validating there would leave a stub directory for every bad input,
which the analysis later lists as "still running or missing results.json". `on_run_start` runs
before `run_job`, so the checks a sweep does in its planner (`resolve_run`) and its data
preparation happen here, and a bad configuration or corpus ends as `error: ...`, exit 2, with
nothing on disk. `on_run_end` says how the run ended and where it is.

(In `-m` mode Hydra calls neither: the sweeper validates every job before launching.)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from andrea.run.results import Record


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def run_dir_of(config: DictConfig) -> Path:
    """The directory `run_job` will create (hydra.run.dir, which needs HydraConfig set)."""
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(config)  # run_job sets the same config again
    return Path(str(config.hydra.run.dir))


def _sufficiency(config: DictConfig, spec, prepared) -> list[str]:
    """The sweep's data-sufficiency check (max_epochs, require_real_corpus) for this one run:
    the same run with -m was refused, without it trained 4.99 epochs silently."""
    from types import SimpleNamespace

    from andrea.config.resolve import to_dataclass
    from andrea.launch.sufficiency import CorpusTokens, describe, sufficiency_problems

    corpus = CorpusTokens(describe(spec.data), prepared.n_train_tokens, exact=True)
    job = SimpleNamespace(
        config=config,
        run=to_dataclass(config),
        spec=spec,
        corpus=corpus,
        overrides=list(config.hydra.overrides.task),
        epochs=spec.tokens / corpus.train_tokens if corpus.train_tokens else None,
    )
    return sufficiency_problems([job])


class SingleRunCheck(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        from andrea.config.resolve import ConfigError, resolve_run, to_dataclass
        from andrea.data import check_split_sizes, prepare_data
        from andrea.launch.packing import pack_of
        from andrea.launch.plan import over_budget_note
        from andrea.launch.task import world_size_of_job
        from andrea.run.results import is_completed

        # sweep.py sends a command line with hydra/launcher=, slurm= or launch.pack= to the
        # sweeper (as with -m); one that gets them from a config file would train here, ignoring
        # them
        engine = (config.hydra.get("launcher") or {}).get("engine")
        pack = pack_of(config)
        asked = [f"hydra.launcher.engine={engine}"] if engine else []
        asked += [f"launch.pack={pack}"] if pack != "1" else []
        if asked:
            _fail(
                f"{' and '.join(asked)}: only a sweep submits jobs; this single run would "
                "train here without them: run it with -m"
            )
        try:
            run = to_dataclass(config)
            spec = resolve_run(run, world_size=world_size_of_job())
        except ConfigError as e:
            _fail(str(e))
        note = over_budget_note([(run, spec)])  # the first line: a sweep's plan says it too
        if note:
            print(note, file=sys.stderr)
        if is_completed(run_dir_of(config)):
            return  # the task reports it and skips; its data need not exist any more
        # Tokenizing once here (cached, lock-protected) turns an empty, non-UTF-8 or too small
        # corpus into one line before a directory exists; training then finds the cache.
        try:
            prepared = prepare_data(spec.data, spec.model.vocab_size)
            for batch in {
                spec.micro_batch_size,
                spec.train.eval_batch_size or spec.micro_batch_size,
            }:
                check_split_sizes(prepared, batch, spec.seq_len, spec.world_size)
            from andrea.data.domains import check_domains

            check_domains(spec.eval, spec.data, prepared, [spec.seq_len])
        except (ValueError, OSError) as e:
            _fail(f"[size={spec.size} model={spec.label}] data: {e}")
        problems = _sufficiency(config, spec, prepared)
        if problems:
            _fail("\n\nerror: ".join(problems))

    def on_run_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """A single run ends on its outcome and its directory, not on a progress line."""
        if job_return.status != JobStatus.COMPLETED:
            return  # Hydra reports the exception next
        value = job_return.return_value
        record = Record(value if isinstance(value, Mapping) else {})
        where = Path(str(config.hydra.run.dir))
        if record.completed and record.val_loss is not None:
            print(
                f"done: final validation loss {record.val_loss:.4f} nats/token; run directory "
                f"{where}"
            )
        else:
            print(f"{record.status or '?'}: run directory {where}")
