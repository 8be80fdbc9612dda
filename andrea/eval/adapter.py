"""andrea checkpoints as an lm-evaluation-harness model: `--model andrea`.

    lm_eval.simple_evaluate(model="andrea", model_args={"run_dir": RUN_DIR}, tasks=[...])
    python -m andrea.eval.harness run --model andrea --model_args run_dir=RUN_DIR --tasks ...

RUN_DIR may contain commas (andrea's run names do: `seed0,train.lr=0.001`): `parse_model_args`
keeps them in the path, which the harness's own comma split would cut.

The model is the run directory's newest checkpoint (any residual scheme) with the run's own
tokenizer (andrea/eval/load.py). The three request types of the harness's `LM` API:

- `loglikelihood`: log P(continuation | context), batched: requests sorted by length, padded on
  the right (a causal model's scores at a position never see later ones, so padding changes
  nothing), one forward per batch. The context is cut from the left to the training sequence
  length, as the harness's own Hugging Face model does.
- `loglikelihood_rolling`: the whole document in disjoint windows of the training sequence
  length, each token predicted once with the longest context the window allows (the harness's
  `get_rolling_token_windows`); the first token is conditioned on <|endoftext|>, andrea's
  document separator.
- `generate_until`: greedy decoding until a stop string, <|endoftext|> or `max_gen_toks`, one
  request at a time (andrea's model has no KV cache: each new token is a full forward over the
  window; here for completeness, not speed).

Only this module (and tasks.py, __main__.py) import lm_eval: `import andrea` never does.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
import torch.nn.functional as F
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model

from andrea.eval.load import EvalError, LoadedRun, load_run

log = logging.getLogger(__name__)

# Tokens generated when a task sets no max_gen_toks (the harness's own default).
DEFAULT_MAX_GEN_TOKS = 256


def resolve_device(device: str | None, strict: bool = True) -> torch.device:
    """auto: CUDA when present. A CUDA device without CUDA is an error, or with strict=False
    (the harness's CLI passes device=cuda:0 unless told otherwise) the CPU, with a warning."""
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        if strict:
            raise EvalError(f"device={device} but torch sees no CUDA device; use device=cpu")
        log.warning("device=%s but torch sees no CUDA device: evaluating on the CPU", device)
        return torch.device("cpu")
    try:
        return torch.device(device)
    except RuntimeError:  # torch's "Expected one of cpu, cuda, ... device type at start of ..."
        raise EvalError(
            f"device={device} is not a device torch knows; use auto, cpu or cuda[:i]"
        ) from None


# AndreaLM's model_args; `trust_remote_code` is what the harness adds on its own (ignored here).
MODEL_ARGS = (
    "run_dir",
    "pretrained",
    "device",
    "batch_size",
    "max_length",
    "tokenizer",
    "precision",
)
IGNORED_ARGS = ("trust_remote_code",)


def _unquote(value: str) -> str:
    v = value.strip()
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'" else v


def parse_model_args(text: str) -> dict[str, str]:
    """`key=value,key=value` as the harness spells model_args, except that a comma not followed
    by one of andrea's keys (`MODEL_ARGS`) continues the value before it: andrea names run
    directories after their overrides (`seed0,train.lr=0.001`), and the harness's own split at
    every comma cut such a path. A quoted value (`run_dir="a,b"`) is taken whole."""
    out: dict[str, str] = {}
    key = None
    for piece in text.split(","):
        k, eq, v = piece.partition("=")
        if eq and k.strip() in (*MODEL_ARGS, *IGNORED_ARGS):
            key = k.strip()
            out[key] = v
        elif key is not None:
            out[key] += "," + piece
        elif piece.strip():
            raise EvalError(
                f"model_args: expected key=value with a key among "
                f"{', '.join(MODEL_ARGS)}; got {piece!r}"
            )
    return {k: _unquote(v) for k, v in out.items()}


def merge_model_args(model_args: dict, harness: dict | None) -> dict:
    """The constructor's arguments from `--model_args` and the harness's own (`--device`,
    `--batch_size`, passed to every model). The harness always passes a batch size (its default
    1), so model_args' batch_size wins; `--device` is passed only when given, so a device in
    both that differs is refused rather than guessed (the harness itself raised TypeError)."""
    unknown = [k for k in model_args if k not in (*MODEL_ARGS, *IGNORED_ARGS, "loaded")]
    if unknown:
        raise EvalError(
            f"model_args key {unknown[0]!r} is not one of andrea's ({', '.join(MODEL_ARGS)}); "
            f"if it is part of a run directory whose name has commas, which the harness split "
            f"at, quote the path: --model_args 'run_dir=\"RUN_DIR\"'"
        )
    harness = {k: v for k, v in (harness or {}).items() if v is not None and k in MODEL_ARGS}
    if (
        "device" in model_args
        and "device" in harness
        and str(model_args["device"]) != str(harness["device"])
    ):
        raise EvalError(
            f"device={model_args['device']} in --model_args and --device "
            f"{harness['device']} disagree; give one of them"
        )
    merged = {**harness, **{k: v for k, v in model_args.items() if k not in IGNORED_ARGS}}
    return merged


@register_model("andrea")
class AndreaLM(TemplateLM):
    """An andrea run directory's newest checkpoint, for the harness.

    model_args: run_dir (or pretrained), device (auto|cpu|cuda[:i]), batch_size (requests per
    forward, default 16), max_length (default: the run's training sequence length), tokenizer
    (a tokenizer.json; must be the run's own), precision (fp32 default, or bf16 autocast on
    CUDA)."""

    def __init__(
        self,
        run_dir: str | None = None,
        pretrained: str | None = None,
        device: str | None = "auto",
        batch_size: int | str = 16,
        max_length: int | None = None,
        tokenizer: str | None = None,
        precision: str = "fp32",
        loaded: LoadedRun | None = None,
        **_: Any,
    ) -> None:
        super().__init__()
        path = run_dir or pretrained
        if loaded is None and not path:
            raise EvalError(
                "model andrea needs run_dir=RUN_DIR (a run directory with a checkpoint)"
            )
        self._device = resolve_device(device, strict=False)
        self.run = loaded if loaded is not None else load_run(path, self._device, tokenizer)
        self.run.model.to(self._device)
        self.model = self.run.model
        self.tok = self.run.tokenizer
        # Text that spells <|endoftext|> is plain text, as in training (andrea.data.tokenizer).
        self.tok.encode_special_tokens = True
        self.batch_size = int(batch_size) if str(batch_size) != "auto" else 16
        self.max_length = int(max_length) if max_length else self.run.seq_len
        if not 1 <= self.max_length <= self.run.cfg.context_length:
            raise EvalError(
                f"max_length={self.max_length} must lie in 1.."
                f"{self.run.cfg.context_length} (the model's context_length)"
            )
        if precision not in ("fp32", "bf16"):
            raise EvalError(f"precision={precision!r}; valid: fp32, bf16")
        self.precision = precision
        from andrea.data.tokenizer import EOT

        self._eot = self.tok.token_to_id(EOT)

    # ---- how the harness builds the model -------------------------------------------------
    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        return cls(**merge_model_args(parse_model_args(arg_string or ""), additional_config))

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None):
        return cls(**merge_model_args(dict(arg_dict), additional_config))

    # ---- what the harness asks of a TemplateLM ---------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self._eot

    @property
    def tokenizer_name(self) -> str:
        return f"andrea-{self.run.tokenizer_sha256[:16]}"

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, **kwargs: Any
    ) -> list[int]:
        return self.tok.encode(string, add_special_tokens=False).ids

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tok.decode(tokens, skip_special_tokens=True)

    def continuation_tokens(self, context: str, continuation: str) -> int:
        """How many tokens `loglikelihood` scores for this request (the harness's own split of
        context and continuation): the denominator of a per-token loss."""
        if context == "":
            enc = self.tok_encode(continuation)
            return len(enc) - (1 if enc and enc[0] == self.prefix_token_id else 0)
        return len(self._encode_pair(context, continuation)[1])

    # ---- scoring --------------------------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        # python -m andrea.eval sets TQDM_DISABLE; the harness passes disable=False explicitly
        quiet = disable_tqdm or os.environ.get("TQDM_DISABLE") == "1"
        return super().loglikelihood(requests, disable_tqdm=quiet)

    def _forward(self, batch: torch.Tensor) -> torch.Tensor:
        """Log-probabilities [B, T, V] in fp32."""
        amp = self.precision == "bf16" and self._device.type == "cuda"
        with torch.no_grad(), torch.autocast(self._device.type, dtype=torch.bfloat16, enabled=amp):
            logits = self.model(batch)
        return F.log_softmax(logits.float(), dim=-1)

    def _loglikelihood_tokens(
        self, requests, disable_tqdm: bool = False, **kwargs: Any
    ) -> list[tuple[float, bool]]:
        """(sum log P(continuation), greedy?) per (key, context ids, continuation ids)."""
        order = sorted(
            range(len(requests)), key=lambda i: -(len(requests[i][1]) + len(requests[i][2]))
        )
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            rows, spans = [], []
            for i in idx:
                _, ctx, cont = requests[i]
                if not cont:
                    raise EvalError("a request has an empty continuation: nothing to score")
                cont = cont[-self.max_length :]  # a continuation longer than the window: its tail
                whole = (list(ctx) + list(cont))[-(self.max_length + 1) :]
                inp = whole[:-1]
                rows.append(inp)
                spans.append((len(inp) - len(cont), cont))
            T = max(len(r) for r in rows)
            batch = torch.zeros((len(rows), T), dtype=torch.long)
            for j, r in enumerate(rows):
                batch[j, : len(r)] = torch.tensor(r, dtype=torch.long)
            logp = self._forward(batch.to(self._device))
            for j, i in enumerate(idx):
                first, cont = spans[j]
                lp = logp[j, first : first + len(cont)]
                target = torch.tensor(cont, dtype=torch.long, device=lp.device)
                score = float(lp.gather(-1, target[:, None]).sum())
                greedy = bool((lp.argmax(-1) == target).all())
                out[i] = (score, greedy)
                key = requests[i][0]
                if key is not None:
                    self.cache_hook.add_partial("loglikelihood", key, out[i])
        return out  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows, owner = [], []
        for n, (string,) in enumerate(req.args for req in requests):
            for ctx, cont in map(
                lm_utils.make_disjoint_window,
                lm_utils.get_rolling_token_windows(
                    token_list=self.tok_encode(string),
                    prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length,
                    context_len=1,
                ),
            ):
                windows.append((None, ctx, cont))
                owner.append(n)
        scores = self._loglikelihood_tokens(windows) if windows else []
        totals = [0.0] * len(requests)
        for n, (score, _) in zip(owner, scores):
            totals[n] += score
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for req in requests:
            context, gen_kwargs = req.args
            gen_kwargs = dict(gen_kwargs or {})
            until = gen_kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(gen_kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
            ids = self.tok_encode(context) or [self.prefix_token_id]
            new: list[int] = []
            text = ""
            for _ in range(max_new):
                window = (ids + new)[-self.max_length :]
                logp = self._forward(torch.tensor([window], device=self._device))
                nxt = int(logp[0, -1].argmax())
                if nxt == self._eot:
                    break
                new.append(nxt)
                text = self.tok_decode(new)
                if any(s in text for s in until):
                    break
            for s in until:
                text = text.split(s)[0]
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, req.args[1]), text)
        return out
