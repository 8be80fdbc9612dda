"""What a residual scheme answers for: the one protocol every `model=<name>` implements.

A scheme replaces the residual adds around ANDREA's sublayers (docs/residual_schemes.md). It
answers, for a model config `cfg`, for everything that differs from the baseline, so that no
code outside `andrea/model/residuals/` branches on a scheme's name (the way torchtitan's models
answer for their own parameter and FLOP counts):

- `build(cfg)`: its own parameters as one module, stored on the model as `attribute` (the
  state_dict prefix, e.g. `depth.`); None for a scheme without parameters;
- `reset(module, cfg)`: their init, after the model's GPT-2 init of every Linear/Embedding;
- `forward(x, model, module, stats)`: the stream from the embedding `x` [B, T, d] to the input
  of the final LayerNorm, calling `model.blocks` / `model.sublayers()`; with `stats`, it appends
  each raw sublayer output's RMS to `stats["layer_rms"]` (and mixing weights to
  `stats["depth_weights"]` if it has any);
- `n_params(cfg)`: the closed form of `build`'s parameter count (tests compare it with the
  built model);
- `flops(cfg, seq_len)`: the forward FLOPs per token it adds, by term (`flop_terms` names them,
  `non_matmul` says which are not matmuls), following andrea/model/flops.py's conventions;
- `options`: a dataclass of its own hyper-parameters with their defaults. Each field becomes a
  `model.<field>` config key and a `ModelConfig` field; a non-default value on another scheme
  is refused. `check(cfg)` validates them (ValueError naming `model.<field>`);
  `label_suffix(values)` is how non-default values show in the run's label;
- `ln_eps(cfg, layer)`: the LayerNorm eps in front of sublayer `layer` (default: `cfg.ln_eps`);
- `model_conf`: the `model=<name>` config group entry (name, label, option values) for a scheme
  that ships no conf/model/<name>.yaml, e.g. a plug-in's; registered in Hydra's ConfigStore;
- `export`: the path of its module for the self-contained Hugging Face export (torch only; the
  interface is andrea/model/residuals/export/__init__.py's docstring), copied into an export
  folder as `residual_andrea.py`; None: the scheme cannot be exported, and
  `python -m andrea.eval.export` refuses its runs with one `error:` line;
- `block_size`: True when the scheme reads `model.block_size` / `model.n_blocks` (Block AttnRes's
  S), which the config resolves and checks against the depth.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Optional


def _no_module(cfg: Any) -> None:
    return None


def _no_reset(module: Any, cfg: Any) -> None:
    return None


def _no_params(cfg: Any) -> int:
    return 0


def _no_flops(cfg: Any, seq_len: int) -> dict[str, int]:
    return {}


def _no_check(cfg: Any) -> None:
    return None


def _no_suffix(values: Mapping[str, Any]) -> str:
    return ""


@dataclass(frozen=True)
class Scheme:
    name: str  # `model=<name>` and the variant everywhere (run dirs, results, tables)
    forward: Callable[..., Any]
    summary: str = ""  # one line: what it does and where it comes from
    attribute: Optional[str] = None
    build: Callable[[Any], Any] = _no_module
    reset: Callable[[Any, Any], None] = _no_reset
    n_params: Callable[[Any], int] = _no_params
    flops: Callable[[Any, int], dict[str, int]] = _no_flops
    flop_terms: tuple[str, ...] = ()
    non_matmul: tuple[str, ...] = ()
    options: Optional[type] = None
    check: Callable[[Any], None] = _no_check
    label_suffix: Callable[[Mapping[str, Any]], str] = _no_suffix
    ln_eps: Optional[Callable[[Any, int], float]] = None
    block_size: bool = False
    model_conf: Optional[dict] = None
    export: Optional[str] = None  # its export module's path (see the docstring); None: none

    def option_fields(self) -> tuple:
        return fields(self.options) if self.options is not None else ()

    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.option_fields())
