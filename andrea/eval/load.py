"""A run directory's newest checkpoint as an inference model, with the run's own tokenizer.

What evaluation (andrea/eval/adapter.py) and export (andrea/eval/export.py) share. Nothing here
imports lm_eval. A run trained since run directories carry `model.json` and `tokenizer.json`
(andrea.run.rundir.write_model_files) is read from those alone; an older one from its Hydra config
(`.hydra/config.yaml`), resolved as the sweep resolved it, and its data cache (the corpus is
fingerprinted by content, so the cache's tokenizer is the one it trained with).

Every way this can fail raises `EvalError` with one line that says what to do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

import torch

from andrea.components.checkpoint import load_latest_checkpoint
from andrea.model.transformer import ANDREA, ModelConfig
from andrea.run import results as results_file
from andrea.run.rundir import RunDir, read_json


class EvalError(ValueError):
    """Input that evaluation or export cannot use; the message is the whole error line."""


@dataclass
class LoadedRun:
    run_dir: RunDir
    model: ANDREA  # in eval mode, fp32, on the requested device
    cfg: ModelConfig
    tokenizer: Any  # a `tokenizers.Tokenizer`
    tokenizer_path: Path
    tokenizer_sha256: str
    seq_len: int  # the sequence length it trained at: positions beyond it are untrained
    step: int  # the checkpoint's optimizer step
    checkpoint: Path
    results: Optional[results_file.Record]  # results.json of a completed run, else None

    @property
    def final(self) -> bool:
        """True when the checkpoint is the completed run's last step (its final point)."""
        return self.results is not None and self.step == self.results.steps


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def model_config_of(rd: RunDir) -> tuple[ModelConfig, int, Optional[Path]]:
    """The run's ModelConfig, its training sequence length, and the tokenizer its config points
    to when it had to be resolved from the Hydra config (None when model.json has it all)."""
    saved = read_json(rd.model_config)
    if isinstance(saved, dict) and isinstance(saved.get("model"), dict):
        known = {f.name for f in fields(ModelConfig)}
        try:
            cfg = ModelConfig(**{k: v for k, v in saved["model"].items() if k in known})
        except (TypeError, ValueError) as e:
            raise EvalError(f"{rd.model_config} does not describe a model ({e})") from None
        return cfg, int(saved.get("seq_len") or cfg.context_length), None
    hydra_cfg = rd.hydra_dir / "config.yaml"
    if not hydra_cfg.exists():
        raise EvalError(
            f"{rd.root} has neither model.json nor .hydra/config.yaml: not an andrea "
            f"run directory (or one whose config was deleted)"
        )
    from omegaconf import OmegaConf

    from andrea.config.resolve import ConfigError, resolve_run
    from andrea.data import prepare_data

    try:
        spec = resolve_run(OmegaConf.load(hydra_cfg))
    except (ConfigError, ValueError) as e:
        raise EvalError(f"{hydra_cfg} no longer resolves with this andrea ({e})") from None
    key = (repr(spec.data), spec.model.vocab_size)
    if key not in _PREPARED:  # a sweep's runs share their data: read the corpus once
        _PREPARED[key] = prepare_data(spec.data, spec.model.vocab_size).tokenizer_path
    return spec.model, spec.seq_len, _PREPARED[key]


# The tokenizer of each (data config, vocab) a run's Hydra config named, in this process.
# prepare_data reads the whole corpus to fingerprint it before it finds the cache.
_PREPARED: dict[tuple[str, int], Optional[Path]] = {}


def check_run(path: str | Path, tokenizer: str | Path | None = None):
    """What `load_run` needs, checked without reading the weights: (RunDir, ModelConfig,
    training sequence length, tokenizer path). EvalError when something is missing."""
    from andrea.data.tokenizer import EOT, load_tokenizer

    rd = RunDir(Path(path))
    if not rd.root.is_dir():
        raise EvalError(f"{rd.root} is not a directory")
    if not rd.list_checkpoints():
        res = results_file.record(rd)
        why = (
            "its results.json says it failed"
            if res is not None and res.failed
            else "it has not trained a step yet, or its checkpoints were deleted"
        )
        raise EvalError(
            f"{rd.root} has no checkpoint ({rd.checkpoints}/step_*.pt): {why}; "
            f"train it first (python sweep.py ... re-runs it)"
        )
    cfg, seq_len, cached_tok = model_config_of(rd)
    run_tok = rd.tokenizer if rd.tokenizer.exists() else cached_tok
    if tokenizer is not None:
        tok_path = Path(tokenizer)
        if not tok_path.is_file():
            raise EvalError(f"tokenizer {tok_path} is not a file")
        if (
            run_tok is not None
            and Path(run_tok).exists()
            and sha256_file(tok_path) != sha256_file(run_tok)
        ):
            raise EvalError(
                f"tokenizer mismatch: {tok_path} is not the tokenizer {rd.root} was "
                f"trained with ({run_tok}); drop the tokenizer argument to use the "
                f"run's own"
            )
    elif run_tok is None or not Path(run_tok).exists():
        raise EvalError(
            f"{rd.root} has no tokenizer.json and its data has none (token shards); "
            f"pass the tokenizer its shards were made with (tokenizer=PATH)"
        )
    else:
        tok_path = Path(run_tok)
    try:
        tok = load_tokenizer(tok_path)
    except Exception as e:  # tokenizers raises its own exception types for a bad file
        raise EvalError(f"tokenizer {tok_path} does not load ({e})") from None
    if tok.get_vocab_size() > cfg.vocab_size:
        raise EvalError(
            f"tokenizer mismatch: {tok_path} has {tok.get_vocab_size()} ids but the "
            f"model of {rd.root} has vocab_size={cfg.vocab_size}"
        )
    if tok.token_to_id(EOT) is None:
        raise EvalError(
            f"tokenizer mismatch: {tok_path} has no {EOT} token (not an andrea tokenizer)"
        )
    return rd, cfg, seq_len, tok_path


def load_run(
    path: str | Path, device: str | torch.device = "cpu", tokenizer: str | Path | None = None
) -> LoadedRun:
    """The newest good checkpoint of run directory `path` as an eval-mode fp32 model, and the
    run's tokenizer (or `tokenizer`, a tokenizer.json, which must be the run's own)."""
    from andrea.data.tokenizer import load_tokenizer

    rd, cfg, seq_len, tok_path = check_run(path, tokenizer)
    loaded = load_latest_checkpoint(rd)
    if loaded is None:
        raise EvalError(
            f"every checkpoint in {rd.checkpoints} is unreadable (damaged on disk); "
            f"delete them and train the run again"
        )
    state, ckpt = loaded
    model = ANDREA(cfg)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:  # the config and the weights disagree
        first = str(e).strip().splitlines()[0]
        raise EvalError(f"{ckpt} does not fit the run's model config ({first})") from None
    model.to(device).eval()
    return LoadedRun(
        run_dir=rd,
        model=model,
        cfg=cfg,
        tokenizer=load_tokenizer(tok_path),
        tokenizer_path=tok_path,
        tokenizer_sha256=sha256_file(tok_path),
        seq_len=seq_len,
        step=int(state["step"]),
        checkpoint=ckpt,
        results=results_file.completed_record(rd),
    )
