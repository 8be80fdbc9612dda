"""The optimizer of a run: AdamW (default), or Muon for the hidden matrices with AdamW for the rest.

`train.optimizer=adamw` is AdamW on every parameter: matrices and embeddings decay, 1-D
parameters (biases, norm gains, pseudo-queries) do not (nanoGPT's split).

`train.optimizer=muon` is how the report trains its models (Kimi Team, arXiv:2603.15031: the
48B recipe uses Muon; Kimi's models are Muon-trained, Moonlight: Liu et al. 2025, "Muon is
Scalable for LLM Training", arXiv:2502.16982). Muon (Jordan et al. 2024, "Muon: An optimizer
for hidden layers in neural networks") orthogonalises each 2-D hidden weight's momentum with a
Newton-Schulz iteration; it is defined for matrices that map one hidden representation to
another, so it takes only the Linear weights of the attention and MLP sublayers
(`hidden_matrices`). Everything else stays on AdamW: the token/position embeddings and the LM
head (tied to the token embedding; Jordan et al. keep them on AdamW, their gradients are sparse
row lookups, not a linear map between hidden spaces), biases and LayerNorm gains (1-D), and every
depth-mixing parameter — AttnRes's pseudo-queries, key-norm gains, static logits and its
input-query projection, DenseFormer's weights, and any mixing module added later. The rule is an
allow-list (Linear layers owned by `CausalSelfAttention` / `MLP`), so a new module is on AdamW
unless it is put on the list on purpose.

The attention's fused qkv weight [3d, d] is three matrices stacked by rows (q, k, v; see
`CausalSelfAttention.forward`), and Muon treats it as three (`train.muon.split_qkv=true`, the
default): each block's momentum is orthogonalised on its own and its step scaled by its own
shape, d x d, exactly as if q, k and v were stored as separate Linear layers. That is how the
implementations the report's recipe descends from, and its peers, train: Moonlight (Liu et al.
2025) keeps Q, K and V as separate matrices; Megatron-LM's Muon has `muon_split_qkv`, on by
default (`--muon-no-split-qkv` turns it off), whose author found splitting "performed better
empirically"; nanochat (Karpathy) stores q, k and v as separate Linear layers; modded-nanogpt
(Jordan et al.) stores q, k, v and the output projection in one tensor and its Muon
orthogonalises it as four matrices. Orthogonalising the stack as one matrix instead couples the
three (one set of singular directions shared by 3d rows) and scales the step by sqrt(3d), not
sqrt(d). `split_qkv=false` keeps that fused treatment, for comparison.

Moonlight's update-RMS matching (`adjust_lr=match_rms_adamw`, torch's "match_rms_adamw"):
Muon's orthogonalised update O of an A x B matrix has RMS about 1/sqrt(max(A, B)); scaling the
step to lr * 0.2 * sqrt(max(A, B)) gives it an RMS of ~0.2, the RMS of a typical AdamW update,
so Muon reuses AdamW's learning rate (the same schedule drives both optimizers) and its
decoupled weight decay (W <- W - lr * wd * W, with the unscaled lr, as Moonlight adds it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Protocol, Union

import torch
from torch import nn

OPTIMIZERS = ("adamw", "muon")
ADJUST_LR = ("match_rms_adamw", "original")  # torch.optim.Muon's adjust_lr_fn choices


@dataclass
class MuonConfig:
    """`train.muon.*`: Muon's settings (train.optimizer=muon only); torch.optim.Muon's names.
    Defaults: Jordan et al. 2024 (momentum 0.95, Nesterov, 5 Newton-Schulz steps) and
    Moonlight's LR adjustment."""

    momentum: float = 0.95
    nesterov: bool = True
    ns_steps: int = 5
    # match_rms_adamw: lr * 0.2 * sqrt(max(A, B)) (Moonlight; reuses AdamW's LR and weight decay)
    # original: lr * sqrt(max(1, A / B)) (Jordan et al.; needs its own, larger LR)
    adjust_lr: str = "match_rms_adamw"
    # q, k and v of the fused qkv weight orthogonalised apart (Moonlight, Megatron-LM's
    # --muon-split-qkv default, modded-nanogpt, nanochat); false: one 3d x d matrix
    split_qkv: bool = True


@dataclass(frozen=True)
class OptimizerConfig:
    """What the optimizer needs, resolved from train.*, the hparams and the size
    (andrea/config/resolve.py, `RunSpec.optim`)."""

    lr: float  # the peak; the schedule sets each step's through `param_groups`
    weight_decay: float
    beta1: float
    beta2: float
    name: str = "adamw"  # train.optimizer: adamw | muon
    muon: MuonConfig = field(default_factory=MuonConfig)  # train.optimizer=muon only


class CarriesOptimizer(Protocol):
    """A run's spec, which carries its optimizer's settings (`RunSpec.optim`)."""

    @property
    def optim(self) -> OptimizerConfig: ...


def check_optimizer(optimizer: str, muon: MuonConfig, hparams_optimizer: Optional[str]) -> None:
    """Raise ValueError naming the key when the optimizer settings cannot run."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"train.optimizer={optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if optimizer != "muon":
        changed = [
            f"train.muon.{k}={v}" for k, v in asdict(muon).items() if v != getattr(MuonConfig, k)
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} applies to train.optimizer=muon only, not to "
                f"train.optimizer={optimizer}"
            )
    if not 0.0 <= muon.momentum < 1.0:
        raise ValueError(f"train.muon.momentum={muon.momentum} must lie in [0, 1)")
    if not 1 <= muon.ns_steps < 100:  # torch refuses >= 100
        raise ValueError(
            f"train.muon.ns_steps={muon.ns_steps} must lie in 1..99 "
            "(Newton-Schulz iterations; 5 is Muon's)"
        )
    if muon.adjust_lr not in ADJUST_LR:
        raise ValueError(f"train.muon.adjust_lr={muon.adjust_lr!r}; valid: {', '.join(ADJUST_LR)}")
    if hparams_optimizer is not None and hparams_optimizer != optimizer:
        raise ValueError(
            f"the hparams file was selected under train.optimizer={hparams_optimizer} "
            f"but this run trains with train.optimizer={optimizer}; pick the hparams "
            "of this optimizer's LR scan"
        )


def optimizer_summary(optimizer: str, muon: MuonConfig) -> dict[str, Any]:
    """results.json's `optimizer` and `muon` (null under AdamW): compared by the reuse check."""
    return {"optimizer": optimizer, "muon": asdict(muon) if optimizer == "muon" else None}


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """The Linear weights of the attention and MLP sublayers: Muon's parameters.

    An allow-list by module type, not `p.ndim == 2`: the tied embedding / LM head and AttnRes's
    input-query projection are 2-D too, and must stay on AdamW."""
    from andrea.model.transformer import MLP, CausalSelfAttention  # model imports nothing from here

    tied = {id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()}
    out, seen = [], set()
    for sub in model.modules():
        if not isinstance(sub, (CausalSelfAttention, MLP)):
            continue
        for m in sub.modules():
            if (
                isinstance(m, nn.Linear)
                and m.weight.requires_grad
                and id(m.weight) not in tied | seen
            ):
                out.append(m.weight)
                seen.add(id(m.weight))
    return out


def qkv_weights(model: nn.Module) -> list[nn.Parameter]:
    """The attention's fused qkv weights: [3d, d], q, k and v stacked by rows in that order
    (`CausalSelfAttention.forward` splits the projection's output into three d-wide parts)."""
    from andrea.model.transformer import CausalSelfAttention

    return [
        m.qkv.weight
        for m in model.modules()
        if isinstance(m, CausalSelfAttention) and m.qkv.weight.requires_grad
    ]


class Muon(torch.optim.Muon):
    """torch.optim.Muon where a parameter group's `split` = k (default 1) orthogonalises each
    parameter as k equal row blocks, each on its own and with its step scaled by its own shape.

    The blocks are views of the parameter, its gradient and its momentum buffer (row blocks of a
    row-major matrix are contiguous), handed to torch's own update: the result is exactly the
    update of k separately stored matrices (tested), and the state (one momentum buffer per
    parameter, of its full shape) is torch's."""

    @torch.no_grad()
    def step(self, closure=None):
        from torch.optim._muon import muon

        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, bufs = [], [], []
            has_complex = self._init_group(group, params, grads, bufs)
            k = group.get("split", 1)
            if k > 1:
                params, grads, bufs = (
                    [b for t in ts for b in t.chunk(k, dim=0)] for ts in (params, grads, bufs)
                )
            muon(
                params,
                grads,
                bufs,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                momentum=group["momentum"],
                nesterov=group["nesterov"],
                ns_coefficients=group["ns_coefficients"],
                eps=group["eps"],
                ns_steps=group["ns_steps"],
                adjust_lr_fn=group["adjust_lr_fn"],
                has_complex=has_complex,
            )
        return loss


def _adamw(
    params: list[nn.Parameter], cfg: OptimizerConfig, device: torch.device
) -> torch.optim.AdamW:
    # Matrices (and embeddings) decay; biases, norm gains and pseudo-queries do not (nanoGPT).
    return torch.optim.AdamW(
        [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=cfg.lr,
        betas=(cfg.beta1, cfg.beta2),
        fused=device.type == "cuda",
    )


class MuonWithAdamW:
    """Muon on the hidden matrices and AdamW on the rest, stepped as one optimizer.

    The training loop sets the LR through `param_groups` (both optimizers' groups, so one
    schedule drives both), clips the gradients of all parameters before `step`, and saves
    `state_dict()` — both states, by name — in its checkpoints."""

    def __init__(self, muon: Muon, adamw: torch.optim.AdamW) -> None:
        self.optimizers = {"muon": muon, "adamw": adamw}

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for opt in self.optimizers.values() for g in opt.param_groups]

    def step(self) -> None:
        for opt in self.optimizers.values():
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state) != set(self.optimizers):
            raise ValueError(
                "the checkpoint's optimizer state is not Muon + AdamW (was the run "
                "started with another train.optimizer?); delete its checkpoints to "
                "train it again"
            )
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state[name])


def build_optimizer(
    model: nn.Module, cfg: Union[OptimizerConfig, CarriesOptimizer], device: torch.device
):
    """AdamW, or MuonWithAdamW, for `model` (the bare module, not a DDP wrapper). `cfg`: the
    optimizer's settings, or a run's spec that carries them."""
    c = cfg if isinstance(cfg, OptimizerConfig) else cfg.optim
    params = [p for p in model.parameters() if p.requires_grad]
    if c.name == "adamw":
        return _adamw(params, c, device)
    matrices = hidden_matrices(model)
    on_muon = {id(p) for p in matrices}
    m = c.muon
    split = {id(p) for p in qkv_weights(model)} & on_muon if m.split_qkv else set()
    groups = [{"params": [p for p in matrices if id(p) not in split]}]
    if split:
        groups.append({"params": [p for p in matrices if id(p) in split], "split": 3})
    muon = Muon(
        groups,
        lr=c.lr,
        weight_decay=c.weight_decay,
        momentum=m.momentum,
        nesterov=m.nesterov,
        ns_steps=m.ns_steps,
        adjust_lr_fn=m.adjust_lr,
    )
    return MuonWithAdamW(muon, _adamw([p for p in params if id(p) not in on_muon], c, device))
