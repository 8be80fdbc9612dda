"""The training loop of one run: data → model → AdamW steps → evals, checkpoints, results.

`train(spec, run_dir, config)` is called once per run (and again after every requeue). It resumes
from the newest good checkpoint in the run directory, and ends by writing `results.json`
(status "completed", or "failed" with the reason). A signal (SIGUSR2 from Slurm before the time
limit or on preemption, SIGTERM) finishes the current step, checkpoints, then hands over to
submitit's handler (which requeues the job) or exits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from andrea import logkeys as keys
from andrea.checkpoint import load_latest_checkpoint, rng_state, save_checkpoint, set_rng_state
from andrea.config import RunSpec, spec_summary, steps_between
from andrea.data import TokenLoader, check_split_sizes, prepare_data, val_batches
from andrea.distributed import DistInfo, agreed_max, all_reduce_mean, init_distributed, shutdown
from andrea.flops import mfu, peak_flops, six_n_d, to_pflops_days, training_flops_per_token
from andrea.metrics import MetricsLogger, run_id_for
from andrea.model import ANDREA
from andrea.progress import Progress
from andrea.rundir import RunDir, RunLocked, code_version

log = logging.getLogger(__name__)


class TrainingFailed(RuntimeError):
    """The run cannot go on (non-finite loss, bad data); results.json says why."""


class Interrupted(SystemExit):
    """Checkpointed after a signal (or train.stop_after_steps); the run resumes when started
    again. Code 0 is a planned stop, 128 + signal a signal."""


# --------------------------------------------------------------------------------------------
# Schedule
# --------------------------------------------------------------------------------------------
def learning_rate(step: int, spec: RunSpec) -> float:
    """LR of optimizer step `step` (0-based): linear warmup, then cosine (or WSD) to min_lr."""
    t = spec.train
    peak, floor = spec.lr, spec.lr * t.min_lr_ratio
    warmup = max(1, round(t.warmup_frac * spec.steps))
    if step < warmup:
        return peak * (step + 1) / warmup
    if t.schedule == "cosine":
        progress = (step - warmup) / max(1, spec.steps - warmup)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(progress, 1.0)))
    decay_start = spec.steps - max(1, round(t.decay_frac * spec.steps))  # wsd
    if step < decay_start:
        return peak
    progress = (step - decay_start + 1) / max(1, spec.steps - decay_start)
    return peak + (floor - peak) * min(progress, 1.0)


# --------------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------------
@dataclass
class SignalFlag:
    """Defers SIGUSR2/SIGTERM to the end of the current optimizer step.

    submitit installs its own SIGUSR2 handler (checkpoint + requeue + exit); we keep it and call
    it only after our checkpoint is on disk, so a requeued job resumes from the step it reached.
    """

    received: int | None = None
    previous: dict[int, Any] = field(default_factory=dict)

    def install(self) -> None:
        for sig in (signal.SIGUSR2, signal.SIGTERM):
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. some test runners): no deferral
                pass

    def _handle(self, signum: int, frame: Any) -> None:
        log.warning("received %s: checkpointing at the end of this step", signal.Signals(signum).name)
        self.received = signum

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()

    def hand_over(self, signum: int) -> None:
        """After the checkpoint: let submitit requeue (its handler exits), else exit ourselves.

        `signum` is the signal agreed by all ranks, so rank 0 requeues even when only another
        rank received it."""
        handler = self.previous.get(signum)
        self.restore()
        if callable(handler):
            handler(signum, None)
        raise Interrupted(128 + signum)


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------
def resolve_device(choice: str) -> torch.device:
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise TrainingFailed("train.device=cuda but no CUDA device is visible")
    return torch.device(choice)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None  # fp32


def build_optimizer(model: torch.nn.Module, spec: RunSpec, device: torch.device):
    # Matrices (and embeddings) decay; biases, norm gains and pseudo-queries do not (nanoGPT).
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    t = spec.train
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=spec.lr,
        betas=(t.beta1, t.beta2),
        fused=device.type == "cuda",
    )


def lm_loss(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Next-token cross-entropy in nats, in fp32 whatever the autocast dtype of the logits."""
    return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1),
                           reduction=reduction)


def evaluate(model: torch.nn.Module, batches, device, amp_dtype, dist_info: DistInfo) -> float:
    model.eval()
    total = torch.zeros(2, dtype=torch.float64, device=device)
    with torch.no_grad():
        for x, y in batches:
            x, y = x.to(device), y.to(device)
            with autocast(device, amp_dtype):
                logits = model(x)
            loss = lm_loss(logits, y, reduction="sum")
            total += torch.stack([loss.double(), torch.tensor(y.numel(), dtype=torch.float64, device=device)])
    if dist_info.enabled:
        torch.distributed.all_reduce(total)
    model.train()
    return float(total[0] / total[1])


def autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def train(spec: RunSpec, run_dir: RunDir, config: dict[str, Any]) -> dict[str, Any]:
    """Train (or resume) one run; returns the results written to results.json."""
    run_dir.root.mkdir(parents=True, exist_ok=True)
    flag = SignalFlag()
    loggers: list[MetricsLogger] = []
    dist_info = DistInfo()
    try:
        device = resolve_device(spec.train.device)
        dist_info = init_distributed(device.type)
        if dist_info.world_size != spec.world_size:
            raise TrainingFailed(
                f"the run was validated for world_size={spec.world_size} but runs with "
                f"{dist_info.world_size} processes"
            )
        if device.type == "cuda":
            device = torch.device("cuda", dist_info.local_rank)
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        amp_dtype = autocast_dtype(spec.train.precision, device)
        with run_dir.exclusive(enabled=dist_info.is_main):
            return _train(spec, run_dir, config, device, amp_dtype, dist_info, flag, loggers)
    except Exception as e:  # not SystemExit/KeyboardInterrupt: an interrupted run resumes later
        if dist_info.is_main and not isinstance(e, RunLocked):
            results = failed_results(spec, e)
            run_dir.write_results(results)
            for lg in loggers:
                lg.finish(results)
        raise
    finally:
        flag.restore()
        shutdown(dist_info)


def _train(spec: RunSpec, run_dir: RunDir, config: dict[str, Any], device: torch.device,
           amp_dtype: torch.dtype | None, dist_info: DistInfo, flag: SignalFlag,
           loggers: list[MetricsLogger]) -> dict[str, Any]:
    t = spec.train
    summary = spec_summary(spec)
    is_main = dist_info.is_main

    # ---- data: prepared once per corpus, shared by every run (the cache is lock-protected) ----
    prepared = prepare_data(spec.data, spec.model.vocab_size)
    if prepared.vocab_size > spec.model.vocab_size:  # a smaller tokenizer only leaves rows unused
        raise TrainingFailed(
            f"vocabulary mismatch: the data's tokens need vocab_size={prepared.vocab_size} but "
            f"the model has vocab_size={spec.model.vocab_size} (size.vocab_size / data.vocab_size)"
        )
    eval_bs = t.eval_batch_size or spec.micro_batch_size
    check_split_sizes(prepared, spec.micro_batch_size, spec.seq_len, dist_info.world_size)
    check_split_sizes(prepared, eval_bs, spec.seq_len, dist_info.world_size)
    loader = TokenLoader(prepared.train_shards, spec.micro_batch_size, spec.seq_len, t.seed,
                         dist_info.rank, dist_info.world_size)
    val = val_batches(prepared.val_shards, eval_bs, spec.seq_len, t.eval_batches,
                      rank=dist_info.rank, world_size=dist_info.world_size)

    # ---- model and optimizer ----
    torch.manual_seed(t.seed)
    model = ANDREA(spec.model).to(device)
    optimizer = build_optimizer(model, spec, device)
    flops_per_token = training_flops_per_token(spec.model, spec.seq_len)
    # fp32 on CUDA runs its matmuls in TF32 (enabled above), so that is the peak to compare with.
    peak = peak_flops(torch.cuda.get_device_name(device), amp_dtype or "tf32") \
        if device.type == "cuda" else None

    step, elapsed_before = 0, 0.0
    final_val_loss: float | None = None  # set when resuming from the final checkpoint
    resumed = load_latest_checkpoint(run_dir)
    if resumed is not None:
        state, path = resumed
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        loader.load_state_dict(state["loader"])
        set_rng_state(state["rng"])
        step, elapsed_before = int(state["step"]), float(state["elapsed_s"])
        final_val_loss = state.get("final_val_loss")
        if is_main:
            log.info("resumed from %s at step %d/%d", path, step, spec.steps)
    run_model: torch.nn.Module = model
    if dist_info.enabled:
        run_model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    if t.compile:  # compile the DDP module: DDPOptimizer overlaps all-reduce with backward
        run_model = torch.compile(run_model)

    logger = MetricsLogger(
        run_dir, spec.wandb, run_id=run_id_for(run_dir),
        name=f"{spec.sweep_name}/{spec.size}/{spec.label}/seed{t.seed}",
        group=spec.sweep_name, tags=[spec.variant, spec.size, spec.label],
        config={**summary, "run": config},
        rank=dist_info.rank, resume=resumed is not None,
    )
    loggers.append(logger)
    if resumed is not None:
        logger.truncate_after(step)
    if is_main and resumed is None:
        run_dir.write_code_version()

    eval_every = steps_between(spec.steps, t.evals)
    ckpt_every = steps_between(spec.steps, t.checkpoints)
    progress = Progress(spec.steps, start=step, enabled=is_main and t.progress,
                        label=f"{spec.size}/{spec.label}",
                        log_file=run_dir.log if is_main else None)  # train.log keeps the lines
    session_start, session_start_step = time.time(), step
    interval_loss, interval_count = torch.zeros((), device=device), 0
    interval_start = time.time()
    val_loss: float | None = None
    stop_at = None if t.stop_after_steps is None else step + t.stop_after_steps

    def checkpoint(**extra: Any) -> None:
        if is_main:
            save_checkpoint(run_dir, step, {
                **extra,
                "step": step,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "loader": loader.state_dict(),
                "rng": rng_state(),
                "tokens": step * spec.batch_tokens,
                "flops": step * spec.batch_tokens * flops_per_token,
                "elapsed_s": elapsed_before + time.time() - session_start,
                "schedule": {"kind": t.schedule, "lr": spec.lr, "steps": spec.steps},
            }, keep=t.keep_checkpoints)
        if dist_info.enabled:
            torch.distributed.barrier()

    def do_eval() -> float:
        loss = evaluate(run_model, val, device, amp_dtype, dist_info)
        if is_main:
            model.eval()
            with torch.no_grad(), autocast(device, amp_dtype):
                _, stats = model(val[0][0].to(device), return_stats=True)
            model.train()
            tokens = step * spec.batch_tokens
            logger.log(step, {keys.VAL_LOSS: loss, keys.TOKENS: tokens,
                              keys.FLOPS: tokens * flops_per_token,
                              keys.PFLOPS_DAYS: to_pflops_days(tokens * flops_per_token)})
            logger.log_dynamics(step, stats, meta={"variant": spec.variant, "size": spec.size,
                                                   "block_size": summary["block_size"]})
        return loss

    model.train()
    # From here a signal means "checkpoint, then requeue"; before, submitit's own handler acts
    # at once (nothing to save yet).
    flag.install()
    while step < spec.steps:
        lr = learning_rate(step, spec)
        for group in optimizer.param_groups:
            group["lr"] = lr
        for micro in range(spec.grad_accum):
            x, y = loader.next_batch()
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            sync = micro == spec.grad_accum - 1
            no_sync = run_model.no_sync() if dist_info.enabled and not sync else contextlib.nullcontext()
            with no_sync, autocast(device, amp_dtype):
                logits = run_model(x)
                loss = lm_loss(logits, y)
            (loss / spec.grad_accum).backward()
            interval_loss += loss.detach()
            interval_count += 1
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1

        if step % t.log_every == 0 or step == spec.steps:
            mean_loss = float(all_reduce_mean(interval_loss / interval_count, dist_info))
            if not math.isfinite(mean_loss):
                raise TrainingFailed(f"non-finite training loss ({mean_loss}) at step {step}")
            now = time.time()
            tokens = step * spec.batch_tokens
            tok_s = interval_count / spec.grad_accum * spec.batch_tokens / max(now - interval_start, 1e-9)
            metrics = {
                keys.TRAIN_LOSS: mean_loss, keys.LR: lr, keys.GRAD_NORM: float(grad_norm),
                keys.TOKENS: tokens, keys.FLOPS: tokens * flops_per_token,
                keys.PFLOPS_DAYS: to_pflops_days(tokens * flops_per_token),
                keys.TOKENS_PER_S: tok_s, keys.ELAPSED: elapsed_before + now - session_start,
            }
            if peak:
                metrics[keys.MFU] = mfu(tok_s * flops_per_token, peak, dist_info.world_size)
            logger.log(step, metrics)
            progress.update(step, loss=mean_loss, tokens_per_s=tok_s)
            interval_loss.zero_()
            interval_count, interval_start = 0, now

        if eval_every and step % eval_every == 0 and step < spec.steps:
            val_loss = do_eval()
            progress.note(f"step {step}: val/loss {val_loss:.4f}")
        # Ranks agree on a signal at logging steps only: a collective per step would stall.
        signum = agreed_max(flag.received or 0, dist_info, device) \
            if step % t.log_every == 0 or step == spec.steps else 0
        if signum or (stop_at is not None and step >= stop_at and step < spec.steps):
            checkpoint()
            progress.close()
            if signum:
                flag.hand_over(signum)
            raise Interrupted(0)
        if ckpt_every and step % ckpt_every == 0 and step < spec.steps:
            checkpoint()

    if final_val_loss is None:
        val_loss = do_eval()
        progress.note(f"step {step}: final val/loss {val_loss:.4f}")
        checkpoint(final_val_loss=val_loss)
    else:  # a crash came between the final checkpoint and results.json: its eval is logged
        val_loss = final_val_loss
    progress.close()
    session_s = time.time() - session_start
    wall_s = elapsed_before + session_s
    tokens = spec.steps * spec.batch_tokens
    flops = tokens * flops_per_token
    results = {
        "status": "completed",
        **summary,
        "sweep": spec.sweep_name,
        "tokens": tokens,
        "steps": spec.steps,
        "flops": flops,
        "flops_6nd": six_n_d(spec.params_nonembedding, tokens),
        "pflops_days": to_pflops_days(flops),
        "val_loss": val_loss,
        "wall_s": wall_s,
        # This session's speed; a session that only finished a run (resumed from its final
        # checkpoint) reports the whole run's.
        "tokens_per_s": ((spec.steps - session_start_step) * spec.batch_tokens / max(session_s, 1e-9)
                         if spec.steps > session_start_step else tokens / max(wall_s, 1e-9)),
        "world_size": dist_info.world_size,
        "device": str(device.type),
        "code": code_version(),
        "wandb_run_id": logger.run_id,
    }
    if is_main:
        run_dir.write_results(results)
    logger.finish(results)
    return results


def failed_results(spec: RunSpec, error: BaseException) -> dict[str, Any]:
    return {"status": "failed", "error": f"{type(error).__name__}: {error}", **spec_summary(spec),
            "sweep": spec.sweep_name, "val_loss": None, "tokens": None, "flops": None}
