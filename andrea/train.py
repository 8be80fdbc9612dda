"""The training loop of one run: data → model → optimizer steps → evals, checkpoints, results.

`train(spec, run_dir, config)` is called once per run (and again after every requeue). It resumes
from the newest good checkpoint in the run directory, and ends by writing `results.json`
(status "completed", or "failed" with the reason). A signal (SIGUSR2 from Slurm before the time
limit or on preemption, SIGTERM) finishes the current step, or stops an evaluation at its next
batch, checkpoints, then hands over to submitit's handler (which requeues the job) or exits.

The loop is a `Trainer` whose phases are its methods: set-up (`_setup`: data, model with its
shards and optimizer, the resumed state, the wrapped model, logging, timers; `_resume`), step
(`_train_step`, `_after_step`), evaluate (`_evaluate`), checkpoint (`_checkpoint`), the budgets'
cooldown branches (`_cooldown`, see andrea/components/schedule.py and docs/budgets.md) and finish
(`_finish`). `run()` strings them together. Its helpers live beside it: the process's device,
signals and early ends in andrea/components/runtime.py, the loss and validation in
andrea/components/evaluate.py, the wall-clock in andrea/components/clock.py. (Past ~400 lines on
purpose: the Trainer is one loop, read top to bottom, whose phases share its state; split across
files it would not be easier to follow.)
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Optional

import torch
from torch.nn.parallel import DistributedDataParallel

from andrea.components import fsdp
from andrea.components.checkpoint import (
    drop_checkpoints_after,
    load_latest_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from andrea.components.clock import Clock
from andrea.components.distributed import (
    DistInfo,
    agreed_max,
    all_reduce_mean,
    init_distributed,
    shutdown,
)
from andrea.components.evaluate import (
    EvaluationStopped,
    Scorer,
    evaluate,  # noqa: F401
    lm_loss,
)  # (evaluate: bench/budget_cost.py's)
from andrea.components.optim import build_optimizer  # noqa: F401  (also bench/budget_cost.py's)
from andrea.components.progress import Progress
from andrea.components.runtime import (
    Interrupted,
    SignalFlag,
    TrainingFailed,
    autocast,
    autocast_dtype,
    device_name,
    resolve_device,
    use_cuda_matmul_settings,
)
from andrea.components.schedule import Cooldown, learning_rate
from andrea.config.resolve import RunSpec, spec_summary, steps_between
from andrea.data import (
    PreparedData,
    TokenLoader,
    ValidationSet,
    check_split_sizes,
    prepare_data,
)
from andrea.data.domains import describe_domain, load_training_tokenizer, prepare_domains
from andrea.data.tokenizer import token_byte_lengths
from andrea.model.flops import six_n_d, training_flops_per_token
from andrea.model.residuals import depth_backend, registry
from andrea.model.transformer import ANDREA
from andrea.run import logkeys as keys
from andrea.run import results as results_file
from andrea.run.metrics import MetricsLogger, run_id_for
from andrea.run.rundir import (
    RunDir,
    RunLocked,
    atomic_write_json,
    code_version,
    read_json,
    write_model_files,
)
from andrea.run.units import mfu, peak_flops, to_pflops_days

__all__ = ["Interrupted", "TrainingFailed", "learning_rate", "train"]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


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
            use_cuda_matmul_settings(device)
        amp_dtype = autocast_dtype(spec.train.precision, device)
        with run_dir.exclusive(enabled=dist_info.is_main):
            return Trainer(spec, run_dir, config, device, amp_dtype, dist_info, flag, loggers).run()
    except Exception as e:  # not SystemExit/KeyboardInterrupt: an interrupted run resumes later
        if dist_info.is_main and not isinstance(e, RunLocked):
            _record_failure(spec, run_dir, loggers, e)
        raise
    finally:
        flag.restore()
        shutdown(dist_info)


class Trainer:
    """One run's training loop; see the module docstring for its phases."""

    def __init__(
        self,
        spec: RunSpec,
        run_dir: RunDir,
        config: dict[str, Any],
        device: torch.device,
        amp_dtype: torch.dtype | None,
        dist_info: DistInfo,
        flag: SignalFlag,
        loggers: list[MetricsLogger],
    ) -> None:
        self.spec, self.t, self.run_dir, self.config = spec, spec.train, run_dir, config
        self.device, self.amp_dtype, self.dist, self.flag = device, amp_dtype, dist_info, flag
        self.loggers = loggers
        self.is_main = dist_info.is_main
        self.summary = spec_summary(spec)
        self.plugins = registry.plugins_of(spec.model.residual)  # recorded; reuse compares
        self.step = 0
        self.clock = Clock()
        self.final_val_loss: Optional[float] = None  # set when resuming from the final checkpoint
        self.final_scores: Optional[dict[str, Any]] = None  # its bpb and domains, likewise
        self.points: dict[float, dict[str, Any]] = {}  # budget -> finished point
        self.branch: Optional[Cooldown] = None  # the cooldown being trained, None on the trunk
        self.trunk: Optional[dict[str, Any]] = None  # the trunk's state while a branch runs
        self.session_steps = 0  # optimizer steps trained by this process (trunk and branches)
        self.eval_due = False  # resumed from a checkpoint written mid-way through this step's eval

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self._setup()
        self.model.train()
        # From here a signal means "checkpoint, then requeue"; before, submitit's own handler
        # acts at once (nothing to save yet).
        self.flag.install()
        if self.eval_due:  # a signal cut this step's evaluation short: score it now
            self._periodic_eval()
        if self.branch is not None:  # resumed inside a cooldown: finish it first
            self._cooldown(self.branch)
        while self.step < self.spec.steps:
            for c in self.spec.cooldowns[:-1]:  # the last one is the trunk's own end
                if c.start == self.step and c.budget not in self.points:
                    self._cooldown(c)
            lr = learning_rate(self.step, self.schedule)
            grad_norm = self._train_step(lr)
            self._after_step(lr, grad_norm, end=self.spec.steps)
        return self._finish()

    # ---- set-up ---------------------------------------------------------------------------
    def _setup(self) -> None:
        """Data, model (sharded, with its optimizer), the resumed state, the model as the loop
        runs it, logging, the loop's timers: in this order (the seed is set before the model's
        init, the logging window before a resume restores it)."""
        prepared = self._build_data()
        self._build_model()
        resumed = self._resume_state()
        self._wrap_model()
        self._build_logging(prepared, resumed)
        self._build_timers()

    def _build_data(self) -> PreparedData:
        """The corpus (prepared once per corpus, shared by every run: the cache is
        lock-protected), the training loader, the validation set and the scorer."""
        spec, t, dist = self.spec, self.t, self.dist
        prepared = prepare_data(spec.data, spec.model.vocab_size)
        if prepared.vocab_size > spec.model.vocab_size:  # a smaller one only leaves rows unused
            raise TrainingFailed(
                f"vocabulary mismatch: the data's tokens need vocab_size={prepared.vocab_size} "
                f"but the model has vocab_size={spec.model.vocab_size} (size.vocab_size / "
                "data.vocab_size)"
            )
        self.eval_bs = t.eval_batch_size or spec.micro_batch_size
        check_split_sizes(prepared, spec.micro_batch_size, spec.seq_len, dist.world_size)
        check_split_sizes(prepared, self.eval_bs, spec.seq_len, dist.world_size)
        self.loader = TokenLoader(
            prepared.train_shards,
            spec.micro_batch_size,
            spec.seq_len,
            t.seed,
            dist.rank,
            dist.world_size,
        )
        self.val = ValidationSet(prepared.val_shards, spec.seq_len, spec.val_tokens)
        self._note_validation_size()
        self.scorer = self._scorer(prepared)
        return prepared

    def _note_validation_size(self) -> None:
        t = self.t
        if t.eval_batches is not None and self.is_main:
            log.warning(
                "train.eval_batches is obsolete and ignored: validation scores a fixed "
                "list of %d tokens (train.val_tokens, docs/validation.md)",
                self.val.n_tokens,
            )
        if self.val.n_tokens < self.spec.val_tokens and self.is_main:  # loud only when asked
            log.log(
                logging.WARNING if t.val_tokens is not None else logging.INFO,
                "validation scores %d tokens: the split holds fewer than train.val_tokens=%d",
                self.val.n_tokens,
                self.spec.val_tokens,
            )

    def _build_model(self) -> None:
        """The model from the run's seed, its depth kernel, its shards under FSDP, the
        optimizer over them, and the FLOPs and device peak that MFU compares."""
        spec = self.spec
        torch.manual_seed(self.t.seed)
        self.model = ANDREA(spec.model).to(self.device)
        self.depth_backend = self._use_depth_backend(spec.depth_backend)
        # FSDP shards the initialised weights (each rank keeps its rows) before the optimizer
        # is built, so that it holds the shards. One process has nothing to shard with.
        self.sharded = self.t.parallel == "fsdp" and self.dist.enabled
        if self.sharded:
            fsdp.shard_model(self.model, self.device.type)
        self.optimizer = build_optimizer(self.model, spec.optim, self.device)
        self.schedule = spec.schedule
        self.flops_per_token = training_flops_per_token(spec.model, spec.seq_len)
        # fp32 on CUDA runs its matmuls in TF32 (enabled in train()): the peak to compare with.
        self.peak = (
            peak_flops(torch.cuda.get_device_name(self.device), self.amp_dtype or "tf32")
            if self.device.type == "cuda"
            else None
        )

    def _resume_state(self) -> bool:
        """An empty logging window, then the newest good checkpoint's state over it."""
        self.interval_loss = torch.zeros((), device=self.device)  # the logging window's sum
        self.interval_count = 0
        return self._resume()

    def _wrap_model(self) -> None:
        """The module the loop runs: DDP's wrapper over several processes (FSDP shards in
        place), compiled with train.compile."""
        self.run_model: torch.nn.Module = self.model
        if self.dist.enabled and not self.sharded:
            self.run_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        if self.t.compile:  # compile the DDP module: DDPOptimizer overlaps all-reduce/backward
            self.run_model = torch.compile(self.run_model)

    def _build_logging(self, prepared: PreparedData, resumed: bool) -> None:
        """metrics.jsonl and W&B (cut back to the resumed step), the code version of a fresh
        run, the files a checkpoint is read with elsewhere, and the progress line."""
        spec, t = self.spec, self.t
        self.logger = MetricsLogger(
            self.run_dir,
            spec.wandb,
            run_id=run_id_for(self.run_dir),
            name=f"{spec.sweep_name}/{spec.size}/{spec.label}/seed{t.seed}",
            group=spec.sweep_name,
            tags=[spec.variant, spec.size, spec.label],
            config={**self.summary, "run": self.config},
            rank=self.dist.rank,
            resume=resumed,
        )
        self.loggers.append(self.logger)
        if resumed:
            self.logger.truncate_after(self.trunk_step)
        if self.is_main and not resumed:
            self.run_dir.write_code_version(self.plugins)
        if self.is_main:  # what the run's checkpoints need to be read elsewhere (andrea/eval/)
            write_model_files(self.run_dir, spec.model, prepared.tokenizer_path, spec.seq_len)
        self.progress = Progress(
            spec.steps,
            start=self.trunk_step,
            enabled=self.is_main and t.progress,
            label=f"{spec.size}/{spec.label}",
            # train.log keeps the progress and validation lines
            log_file=self.run_dir.log if self.is_main else None,
        )

    def _build_timers(self) -> None:
        """Evaluation and checkpoint intervals; the clocks start here (set-up is not
        training time)."""
        self.eval_every = steps_between(self.spec.steps, self.t.evals)
        self.ckpt_every = steps_between(self.spec.steps, self.t.checkpoints)
        self.session_start = self.clock.mark = time.time()
        self.interval_start = time.time()

    def _use_depth_backend(self, asked: str) -> dict:
        """Set the model's depth-op kernel (andrea/model/residuals/depth_backend.py) for this
        job's device; what was asked, what is used and, when `auto` fell back, why."""
        try:
            cuda = self.device.type == "cuda"
            used, note = depth_backend.resolve(asked, cuda, self.model.cfg.d_model)
        except depth_backend.BackendError as e:
            raise TrainingFailed(str(e)) from None
        depth_backend.use(self.model, used)
        if note:
            log.info("model.depth_backend=%s uses %s: %s", asked, used, note)
        return {"asked": asked, "used": used, "note": note}

    def _scorer(self, prepared) -> Scorer:
        """Bits per byte and the held-out domains (andrea/data/domains.py, docs/metrics.md)."""
        spec, ev = self.spec, self.spec.eval
        tok = load_training_tokenizer(spec.data, prepared)  # None: shards without data.tokenizer
        byte_lengths = (
            token_byte_lengths(tok, spec.model.vocab_size)
            if tok is not None and ev.bpb is not False
            else None
        )
        if byte_lengths is None and ev.bpb is None and self.is_main:
            log.info(
                "bits per byte not available: data=shards without data.tokenizer (the "
                "tokenizer.json that made the shards); val_bpb is null"
            )
        domains = prepare_domains(ev, spec.data, prepared, tokenizer=tok)
        cap = ev.domain_tokens or spec.val_tokens
        sets = {
            name: None if not d.shards else ValidationSet(d.shards, spec.seq_len, cap)
            for name, d in domains.items()
        }
        return Scorer(self.val, sets, byte_lengths)

    @property
    def trunk_step(self) -> int:
        """Steps the trunk has trained (inside a branch: its cooldown's start)."""
        return self.step if self.trunk is None else int(self.trunk["step"])

    def _resume(self) -> bool:
        """Load the newest good checkpoint, if any. A branch's checkpoint carries the trunk's
        state at its start: the branch resumes, or, when its point was already recorded (a kill
        between points.json and the clean-up), the trunk does."""
        resumed = load_latest_checkpoint(self.run_dir)
        if resumed is None:  # a fresh start owns points.json, like metrics.jsonl
            if self.is_main:
                self.run_dir.points.unlink(missing_ok=True)
            return False
        self.points = {float(p["budget"]): p for p in read_json(self.run_dir.points) or []}
        state, path = resumed
        if state.get("trunk") is None:
            self._load(state)
        else:
            budget = float(state["cooldown"])
            if budget in self.points:
                self._load(state["trunk"], clock=False)
                self.clock.load({**state, "trunk_s": state["trunk"]["trunk_s"], "branch_s": 0.0})
                # Its files would look newer than the trunk's next checkpoints. Every rank has
                # loaded its state before rank 0 deletes them.
                if self.dist.enabled:
                    torch.distributed.barrier()
                if self.is_main:
                    drop_checkpoints_after(self.run_dir, self.step)
            else:
                self._load(state)
                self.trunk = state["trunk"]
                self.branch = next(c for c in self.spec.cooldowns if c.budget == budget)
                self.clock.in_branch = True
        missing = [
            c.budget
            for c in self.spec.cooldowns[:-1]
            if c.start < self.trunk_step and c.budget not in self.points
        ]
        if missing:
            raise TrainingFailed(
                f"the trunk is at step {self.trunk_step}, past the cooldowns of budgets {missing}, "
                f"but {self.run_dir.points} does not hold their points; delete "
                f"{self.run_dir.checkpoints} to train the run again"
            )
        if self.is_main:
            where = "" if self.branch is None else f" (cooldown to budget {self.branch.budget})"
            log.info("resumed from %s at step %d/%d%s", path, self.step, self.spec.steps, where)
        return True

    # ---- training state (checkpoints and cooldown branches) -------------------------------
    def _state(self) -> dict[str, Any]:
        """The training state at this step (references to live tensors: save or copy it).
        A collective (every rank calls it): the logging window's mean, and under FSDP every
        rank gathers the whole model and optimizer state."""
        if self.sharded:
            model, optimizer = fsdp.state(self.model, self.optimizer)
        else:
            model, optimizer = self.model.state_dict(), self.optimizer.state_dict()
        return {
            "step": self.step,
            "model": model,
            "optimizer": optimizer,
            # FSDP's optimizer state is keyed by parameter name, DDP's by position: a run
            # resumes under the strategy and world size that wrote it (_load checks)
            "parallel": self._parallel(),
            "loader": self.loader.state_dict(),
            "rng": rng_state(),
            "tokens": self.step * self.spec.batch_tokens,
            "flops": self.step * self.spec.batch_tokens * self.flops_per_token,
            **self.clock.state(),
            "schedule": {"kind": self.t.schedule, "lr": self.spec.lr, "steps": self.spec.steps},
            # the logging window's running sum: a window that straddles a resume then logs the
            # same train/loss as without one. The ranks' mean (every rank resumes with it: the
            # mean of it plus each rank's later share is the window's mean).
            "interval": {
                "loss": float(all_reduce_mean(self.interval_loss, self.dist)),
                "count": self.interval_count,
            },
        }

    def _parallel(self) -> dict[str, Any]:
        return {"kind": self.t.parallel, "world_size": self.dist.world_size}

    def _load(self, state: dict[str, Any], clock: bool = True) -> None:
        saved = state.get("parallel") or {"kind": "ddp", "world_size": None}  # older: DDP
        now = self._parallel()
        if "fsdp" in (saved["kind"], now["kind"]) and saved != now:
            raise TrainingFailed(
                f"the checkpoint was written by {saved['kind']} with world_size="
                f"{saved['world_size']}; this run is {now['kind']} with world_size="
                f"{now['world_size']}: resume it with the same train.parallel and number of "
                f"processes, or delete {self.run_dir.checkpoints} to train it again"
            )
        if self.sharded:
            fsdp.load(self.model, self.optimizer, state["model"], state["optimizer"])
        else:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        self.loader.load_state_dict(state["loader"])
        set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.final_val_loss = state.get("final_val_loss")
        self.final_scores = state.get("final_scores")
        self.eval_due = bool(state.get("eval_due", False))
        interval = state.get("interval") or {"loss": 0.0, "count": 0}  # older checkpoints: none
        self.interval_loss.fill_(interval["loss"])
        self.interval_count = int(interval["count"])
        if clock:
            self.clock.load(state)

    # ---- step -----------------------------------------------------------------------------
    def _train_step(self, lr: float) -> torch.Tensor:
        """One optimizer step: `grad_accum` micro-batches, clip, step. Returns the grad norm."""
        spec = self.spec
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        for micro in range(spec.grad_accum):
            x, y = self.loader.next_batch()
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            sync = micro == spec.grad_accum - 1
            if self.sharded:  # FSDP: reduce-scatter the gradients at the last micro-batch only
                self.model.set_requires_gradient_sync(sync)
            no_sync = (
                self.run_model.no_sync()
                if self.dist.enabled and not sync and not self.sharded
                else contextlib.nullcontext()
            )
            with no_sync, autocast(self.device, self.amp_dtype):
                logits = self.run_model(x)
                loss = lm_loss(logits, y)
            (loss / spec.grad_accum).backward()
            self.interval_loss += loss.detach()
            self.interval_count += 1
        grad_norm = fsdp.plain(  # under FSDP a DTensor: the norm of all ranks' shards
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.grad_clip)
        )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        self.session_steps += 1
        return grad_norm

    def _after_step(self, lr: float, grad_norm: torch.Tensor, end: int) -> None:
        """Log, evaluate, honour a signal or a planned stop, checkpoint: what follows a step of
        the trunk or of a branch ending at `end`."""
        step, t = self.step, self.t
        at_log = step % t.log_every == 0 or step == end
        if at_log:
            self._log_train(lr, grad_norm)
        if self.branch is None and self.eval_every and step % self.eval_every == 0 and step < end:
            self._periodic_eval()
        # Ranks agree on a signal at logging steps only: a collective per step would stall.
        signum = agreed_max(self.flag.received or 0, self.dist, self.device) if at_log else 0
        planned = t.stop_after_steps is not None and self.session_steps >= t.stop_after_steps
        if signum or (planned and step < end):
            self._checkpoint()
            self.progress.close()
            if signum:
                self.flag.hand_over(signum)
            raise Interrupted(0)
        if self.ckpt_every and step % self.ckpt_every == 0 and step < end:
            self._checkpoint()

    def _log_train(self, lr: float, grad_norm: torch.Tensor) -> None:
        """The interval's mean training loss (checked finite); on the trunk also metrics.jsonl,
        W&B and the progress line. A branch's steps are not logged there: their step numbers
        repeat the trunk's, which W&B and the step-ordered metrics.jsonl cannot take."""
        spec, step = self.spec, self.step
        mean_loss = float(all_reduce_mean(self.interval_loss / self.interval_count, self.dist))
        if not math.isfinite(mean_loss):
            raise TrainingFailed(f"non-finite training loss ({mean_loss}) at step {step}")
        now = time.time()
        tok_s = (
            self.interval_count
            / spec.grad_accum
            * spec.batch_tokens
            / max(now - self.interval_start, 1e-9)
        )
        if self.branch is None:
            tokens = step * spec.batch_tokens
            metrics = {
                keys.TRAIN_LOSS: mean_loss,
                keys.LR: lr,
                keys.GRAD_NORM: float(grad_norm),
                keys.TOKENS: tokens,
                keys.FLOPS: tokens * self.flops_per_token,
                keys.PFLOPS_DAYS: to_pflops_days(tokens * self.flops_per_token),
                keys.TOKENS_PER_S: tok_s,
                keys.ELAPSED: self.clock.state()["elapsed_s"],
            }
            if self.peak:
                metrics[keys.MFU] = mfu(
                    tok_s * self.flops_per_token, self.peak, self.dist.world_size
                )
            self.logger.log(step, metrics)
            self.progress.update(step, loss=mean_loss, tokens_per_s=tok_s)
        self.interval_loss.zero_()
        self.interval_count, self.interval_start = 0, now

    # ---- evaluate -------------------------------------------------------------------------
    def _score(self, **extra: Any) -> dict[str, Any]:
        """val_loss, val_bpb and every domain's loss and bpb (the keys of a results.json point).

        An evaluation takes minutes on a CPU, longer than a scheduler waits between SIGTERM and
        SIGKILL (Slurm: 30 s). A signal during it stops it between two batches, checkpoints
        this step (with `extra`, what the resumed run must redo) and hands over, as after a step;
        the resumed run scores the same model again, so its results are the uninterrupted run's."""
        try:
            return self.scorer.score(
                self.model,
                self.eval_bs,
                self.device,
                self.amp_dtype,
                self.dist,
                stop=lambda: self.flag.received or 0,
            )
        except EvaluationStopped as e:
            self.progress.note(f"step {self.step}: evaluation stopped by a signal; checkpointing")
            self._checkpoint(**extra)
            self.progress.close()
            self.flag.hand_over(e.signum)
            raise Interrupted(128 + e.signum)  # hand_over raises; never reached

    def _periodic_eval(self) -> None:
        scores = self._evaluate(eval_due=True)
        self.progress.note(f"step {self.step}: val/loss {self._scores_note(scores)}")
        self.eval_due = False

    @staticmethod
    def _scores_note(scores: dict[str, Any]) -> str:
        """`val/loss 3.2100 (1.512 bpb); licenses 4.0132 (1.891 bpb)` for the progress lines."""

        def one(loss, bpb):
            return f"{loss:.4f}" + (f" ({bpb:.3f} bpb)" if bpb is not None else "")

        parts = [one(scores[results_file.VAL_LOSS], scores[results_file.VAL_BPB])]
        for key in scores:
            if key.startswith(keys.DOMAIN_PREFIX) and key.endswith("/loss"):
                name = key[len(keys.DOMAIN_PREFIX) : -len("/loss")]
                parts.append(f"{name} " + one(scores[key], scores[keys.domain_key(name, "bpb")]))
        return "; ".join(parts)

    def _evaluate(self, **extra: Any) -> dict[str, Any]:
        """Validation scores of the trunk at this step, logged with the layer dynamics."""
        scores = self._score(**extra)
        if self.is_main or self.sharded:  # a sharded model's forward needs every rank
            model, step = self.model, self.step
            x, _ = next(self.val.batches(self.eval_bs))
            model.eval()
            with torch.no_grad(), autocast(self.device, self.amp_dtype):
                _, stats = model(x.to(self.device), return_stats=True)
            model.train()
        if self.is_main:
            tokens = step * self.spec.batch_tokens
            logged = {
                k: v
                for k, v in scores.items()
                if k.startswith(keys.DOMAIN_PREFIX) and v is not None
            }
            if scores[results_file.VAL_BPB] is not None:
                logged[keys.VAL_BPB] = scores[results_file.VAL_BPB]
            self.logger.log(
                step,
                {
                    keys.VAL_LOSS: scores[results_file.VAL_LOSS],
                    **logged,
                    keys.TOKENS: tokens,
                    keys.FLOPS: tokens * self.flops_per_token,
                    keys.PFLOPS_DAYS: to_pflops_days(tokens * self.flops_per_token),
                },
            )
            self.logger.log_dynamics(
                step,
                stats,
                meta={
                    "variant": self.spec.variant,
                    "size": self.spec.size,
                    "block_size": self.summary["block_size"],
                },
            )
        return scores

    def _point(
        self, budget: float, step: int, scores: dict[str, Any], wall_s: float
    ) -> dict[str, Any]:
        """One budget's entry of results.json `points`: what its model saw and scored."""
        tokens = step * self.spec.batch_tokens
        return results_file.point(
            budget,
            step,
            tokens,
            tokens * self.flops_per_token,
            scores[results_file.VAL_LOSS],
            wall_s,
            self.dist.world_size,
            scores={k: v for k, v in scores.items() if k != results_file.VAL_LOSS},
        )

    def _record_point(self, point: dict[str, Any]) -> None:
        self.points[point["budget"]] = point
        if self.is_main:
            atomic_write_json(self.run_dir.points, self._sorted_points())

    def _sorted_points(self) -> list[dict[str, Any]]:
        return sorted(self.points.values(), key=lambda p: p["tokens"])

    # ---- checkpoint -----------------------------------------------------------------------
    def _checkpoint(self, **extra: Any) -> None:
        """Save the training state (rank 0). Inside a branch it carries the trunk's state at
        the branch's start, so a resumed branch can hand back to the trunk."""
        state = self._state()  # a collective: every rank
        if self.is_main:
            state = {**extra, **state}
            if self.branch is not None:
                state.update(cooldown=self.branch.budget, trunk=self.trunk)
            save_checkpoint(self.run_dir, self.step, state, keep=self.t.keep_checkpoints)
        if self.dist.enabled:
            torch.distributed.barrier()

    # ---- cooldown branches ----------------------------------------------------------------
    def _cooldown(self, c: Cooldown) -> None:
        """Train budget `c`'s cooldown as a branch from the trunk at step c.start, score its
        point, then put the trunk back exactly as it was (model, optimizer, data position, RNG),
        so the trunk continues as if the branch had never run."""
        if self.trunk is None:  # a fresh branch (a resumed one has its trunk from the checkpoint)
            self.trunk = fsdp.cpu_copy(self._state())  # with the trunk's logging window
            self.branch, self.clock.in_branch, self.clock.branch_s = c, True, 0.0
            self.interval_loss.zero_()
            self.interval_count = 0
        self.progress.note(f"cooldown to budget {c.budget:g}: steps {self.step}..{c.end}")
        while self.step < c.end:
            lr = learning_rate(self.step, self.schedule, end=c.end)
            grad_norm = self._train_step(lr)
            self._after_step(lr, grad_norm, end=c.end)
        scores = self._score()
        self.clock.tick()
        self._record_point(
            self._point(
                c.budget, c.end, scores, wall_s=float(self.trunk["trunk_s"]) + self.clock.branch_s
            )
        )
        self._load(self.trunk, clock=False)
        self.branch, self.trunk = None, None
        self.clock.in_branch, self.clock.branch_s = False, 0.0
        # The branch's checkpoints (steps after the trunk's) would shadow the trunk's; drop
        # them first, then save the trunk with the point recorded (keep may have pruned its own).
        if self.is_main:
            drop_checkpoints_after(self.run_dir, self.step)
        self._checkpoint()
        self.progress.note(
            f"budget {c.budget:g} ({c.end} steps): val/loss {self._scores_note(scores)}"
        )

    # ---- finish ---------------------------------------------------------------------------
    def _finish(self) -> dict[str, Any]:
        spec, t = self.spec, self.t
        budget = spec.cooldowns[-1].budget if spec.cooldowns else 1.0  # the trunk's own
        if self.final_val_loss is None:
            scores = self._evaluate()
            self.progress.note(f"step {spec.steps}: final val/loss {self._scores_note(scores)}")
            self._record_point(
                self._point(budget, spec.steps, scores, wall_s=self.clock.state()["trunk_s"])
            )
            self._checkpoint(final_val_loss=scores[results_file.VAL_LOSS], final_scores=scores)
        else:  # a crash came between the final checkpoint and results.json: its eval is logged
            # (a checkpoint from before bpb and domains existed holds the loss alone)
            scores = self.final_scores or {
                results_file.VAL_LOSS: self.final_val_loss,
                results_file.VAL_BPB: None,
            }
            if budget not in self.points:  # a final checkpoint written before points.json
                self._record_point(self._point(budget, spec.steps, scores, self.clock.trunk_s))
        val_loss = scores[results_file.VAL_LOSS]
        self.progress.close()
        self.clock.tick()
        session_s = time.time() - self.session_start
        wall_s = self.clock.total_s
        tokens = spec.steps * spec.batch_tokens
        flops = tokens * self.flops_per_token
        results = results_file.completed(
            self.summary,
            sweep=spec.sweep_name,
            tokens=tokens,
            steps=spec.steps,
            flops=flops,
            flops_6nd=six_n_d(spec.params_nonembedding, tokens),
            pflops_days=to_pflops_days(flops),
            val_loss=val_loss,
            val_tokens=self.val.n_tokens,
            # bits per byte and each domain's scores at the final point (docs/metrics.md)
            scores={k: v for k, v in scores.items() if k != results_file.VAL_LOSS},
            eval_sets=self.scorer.describe(),
            eval_domains={n: describe_domain(d) for n, d in spec.eval.domains.items()},
            # Several budgets: every point, and what the whole run spent (trunk + branches).
            points=self._sorted_points(),
            budgets=sorted(t.budgets) if t.budgets is not None else None,
            tokens_spent=spec.tokens_spent,
            flops_spent=spec.tokens_spent * self.flops_per_token,
            wall_s=wall_s,
            # This session's speed; a session that only finished a run (resumed from its final
            # checkpoint) reports the whole run's.
            tokens_per_s=(
                self.session_steps * spec.batch_tokens / max(session_s, 1e-9)
                if self.session_steps
                else spec.tokens_spent / max(wall_s, 1e-9)
            ),
            world_size=self.dist.world_size,
            torch_threads=torch.get_num_threads(),  # andrea.launch.threads: the job's CPUs
            device=str(self.device.type),
            device_name=device_name(self.device),
            code=code_version(),
            wandb_run_id=self.logger.run_id,
            parallel=t.parallel,
            plugins=self.plugins,
            # model.depth_backend, when not the default: asked, used, and why auto fell back
            **({"depth_backend": self.depth_backend} if spec.depth_backend != "eager" else {}),
        )
        if self.is_main:
            self.run_dir.write_results(results)
        self.logger.finish(results)
        return results


def _record_failure(
    spec: RunSpec, run_dir: RunDir, loggers: list[MetricsLogger], error: BaseException
) -> None:
    """results.json says "failed" with the reason, and the loggers finish. On a full disk the
    record may not fit either: the run stays as its last checkpoint left it (it resumes from
    there) and the disk's error is the one reported, not a second one chained to it."""
    results = failed_results(spec, error)
    try:
        run_dir.write_results(results)
        for lg in loggers:
            lg.finish(results)
    except OSError as e:
        log.warning("could not record the failure in %s: %s", run_dir.results, e)


def failed_results(spec: RunSpec, error: BaseException) -> dict[str, Any]:
    return results_file.failed(spec_summary(spec), spec.sweep_name, error)
