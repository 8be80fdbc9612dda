"""Run lm-evaluation-harness tasks on a run's checkpoint and record the metrics in the run.

One evaluation writes `<run>/tasks/<settings-hash>.json` atomically:

    {"settings": {tasks, num_fewshot, limit, precision, max_length, task_files_sha256, harness},
     "settings_hash": "...", "step": 1234, "final": true, "checkpoint": ".../step_00001234.pt",
     "tokenizer_sha256": "...", "harness_version": "0.4.x", "evaluated_utc": "...",
     "tasks": {"<task>": {"output_type": "multiple_choice", "n": 100, "chance": 0.25,
                          "acc": 0.31, "acc_stderr": 0.046, "acc_norm": 0.29, ...,
                          "loss": 2.41, "bpb": 1.02,     # the correct continuation's
                          "harness": {every metric the harness reported}}}}

`loss` is the negative log-likelihood of the correct continuation in nats per token of the
run's tokenizer and `bpb` the same in bits per UTF-8 byte, each averaged over the task's
documents (for a rolling-loglikelihood task: the whole documents, pooled: total NLL over total
tokens or bytes). Multiple-choice accuracy of small models sits at chance, so the continuous
loss of the correct answer is the usable signal at these sizes (DataDecide, Magnusson et al.
2025, arXiv:2504.11393; OLMo's ladder, Bhagia et al. 2024, arXiv:2412.04403, predicts accuracy
from it); `chance` is the mean of 1 / (number of choices), the accuracy of a uniform guess.

The settings hash names what changes the numbers (not the batch size or the device), so the
same tasks and settings evaluated again are recognised and skipped, and other settings get a
file of their own. `andrea.run.evaluations` owns where they lie and reads them;
`analysis.inputs.collect` gives their metrics to a run's final point (`task:<task>/<metric>`).
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Optional

from andrea.eval.load import EvalError, load_run
from andrea.run import evaluations
from andrea.run.rundir import RunDir

log = logging.getLogger(__name__)

# File types of a task folder that can change a task's documents or prompts.
TASK_FILE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".py", ".txt", ".csv")


def harness_version() -> str:
    import lm_eval

    return str(lm_eval.__version__)


def task_files_digest(include_paths: list[Path]) -> Optional[str]:
    """SHA-256 over every task file (name and content) below the include paths: a task whose
    documents changed is evaluated again."""
    if not include_paths:
        return None
    h = hashlib.sha256()
    for root in include_paths:
        files = (
            [root]
            if root.is_file()
            else sorted(
                p for p in root.rglob("*") if p.is_file() and p.suffix in TASK_FILE_SUFFIXES
            )
        )
        for p in files:
            h.update(str(p.relative_to(root.parent if root.is_file() else root)).encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def settings_of(
    tasks: list[str],
    include_paths: list[Path],
    num_fewshot: Optional[int],
    limit: Optional[int],
    precision: str,
    max_length: Optional[int],
) -> dict:
    return {
        "tasks": sorted(tasks),
        "num_fewshot": num_fewshot,
        "limit": limit,
        "precision": precision,
        "max_length": max_length,
        "task_files_sha256": task_files_digest(include_paths),
        "harness": harness_version(),
    }


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Tasks: found in the include paths first, the harness's registry only when needed
# --------------------------------------------------------------------------------------------
def task_manager(tasks: list[str], include_paths: list[Path], registry: bool = True):
    """A TaskManager that knows every task in `tasks`; EvalError naming an unknown one. The
    registry (~15,000 tasks, tens of seconds to index) is read only when the include paths
    lack a task, and never with registry=False."""
    from lm_eval.tasks import TaskManager

    for p in include_paths:
        if not p.exists():
            raise EvalError(f"--include-path {p} does not exist")
    paths = [str(p) for p in include_paths] or None
    tm = None
    if paths:
        tm = TaskManager(include_path=paths, include_defaults=False)
        if all(t in tm.all_tasks for t in tasks):
            return tm
    if not registry:
        if not paths:
            raise EvalError("no tasks to choose from: --no-registry needs --include-path DIR")
        tm = TaskManager(include_path=paths, include_defaults=False)
    else:
        tm = TaskManager(include_path=paths, include_defaults=True)
    for t in tasks:
        if t not in tm.all_tasks:
            near = difflib.get_close_matches(t, tm.all_tasks, n=3, cutoff=0.6)
            where = " or ".join(
                (["the harness's registry"] if registry else []) + [str(p) for p in include_paths]
            )
            hint = (
                f"; did you mean {', '.join(near)}?"
                if near
                else ("; local task files: --include-path DIR" if not include_paths else "")
            )
            raise EvalError(f"unknown task {t!r}: not in {where}{hint}")
    return tm


def load_tasks(manager, tasks: list[str]) -> dict:
    """The harness's task objects (their documents loaded); EvalError when a task's data cannot
    be read, e.g. a registry task on a machine that cannot download it."""
    try:
        return manager.load(list(tasks))
    except Exception as e:  # datasets and the harness raise many kinds; all mean "no data"
        first = (str(e).strip().splitlines() or [""])[0]
        raise EvalError(
            f"the tasks {', '.join(tasks)} did not load their documents "
            f"({type(e).__name__}: {first}); a registry task downloads its data on "
            f"first use, which needs the network (or its cached copy), local task "
            f"files do not (--include-path)"
        ) from None


# --------------------------------------------------------------------------------------------
# Metrics from the harness's per-document samples
# --------------------------------------------------------------------------------------------
def _gold_indices(task, doc, n_choices: int) -> list[int]:
    """The correct choices' indices, as the harness's own multiple-choice scoring finds them."""
    gold = (
        task.doc_to_text(doc) if getattr(task, "multiple_input", False) else task.doc_to_target(doc)
    )
    if isinstance(gold, str):
        choices = task.doc_to_choice(doc)
        gold = choices.index(gold) if gold in choices else -1
    golds = gold if isinstance(gold, list) else [gold]
    return [int(g) for g in golds if isinstance(g, int) and 0 <= g < n_choices]


def task_metrics(task, samples: list[dict], harness_metrics: dict, lm) -> dict:
    """One task's entry: the harness's metrics and the correct continuation's loss and bpb."""
    out: dict[str, Any] = {"output_type": task.OUTPUT_TYPE, "n": len(samples)}
    harness = {}
    for key, value in harness_metrics.items():
        if "," not in key or not isinstance(value, (int, float)):
            continue
        name, filt = key.split(",", 1)
        harness[name if filt == "none" else f"{name}@{filt}"] = float(value)
    out["harness"] = harness
    n = len(samples)
    for name in ("acc", "acc_norm"):
        if name in harness:
            p = out[name] = harness[name]
            # the standard error of a mean of 0/1 scores (the harness's own, without bootstrap)
            out[f"{name}_stderr"] = math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else None
    ln2 = math.log(2.0)
    if task.OUTPUT_TYPE == "multiple_choice":
        losses, bpbs, chance = [], [], []
        for s in samples:
            args = s["arguments"]
            lls = [float(r[0][0]) for r in s["resps"]]
            golds = _gold_indices(task, s["doc"], len(args))
            if not golds:
                continue
            g = golds[0]
            ctx, cont = args[g][0], args[g][1]
            n_tok = max(1, lm.continuation_tokens(ctx, cont))
            n_bytes = max(1, len(cont.encode("utf-8")))
            losses.append(-lls[g] / n_tok)
            bpbs.append(-lls[g] / (n_bytes * ln2))
            chance.append(len(golds) / len(args))
        if losses:
            out["loss"] = sum(losses) / len(losses)
            out["bpb"] = sum(bpbs) / len(bpbs)
            out["chance"] = sum(chance) / len(chance)
    elif task.OUTPUT_TYPE == "loglikelihood_rolling":
        nll = toks = nbytes = 0.0
        for s in samples:
            (text,) = s["arguments"][0]
            nll -= float(s["resps"][0][0])
            toks += len(lm.tok_encode(text))
            nbytes += len(text.encode("utf-8"))
        if toks:
            out["loss"] = nll / toks
            out["bpb"] = nll / (nbytes * ln2)
    elif task.OUTPUT_TYPE == "loglikelihood":  # a single continuation per document
        losses, bpbs = [], []
        for s in samples:
            ctx, cont = s["arguments"][0]
            ll = float(s["resps"][0][0][0])
            losses.append(-ll / max(1, lm.continuation_tokens(ctx, cont)))
            bpbs.append(-ll / (max(1, len(cont.encode("utf-8"))) * ln2))
        if losses:
            out["loss"] = sum(losses) / len(losses)
            out["bpb"] = sum(bpbs) / len(bpbs)
    return out


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------
def evaluate_run(
    run_path: str | Path,
    tasks: list[str],
    include_paths: list[Path] = (),
    num_fewshot: Optional[int] = None,
    limit: Optional[int] = None,
    batch_size: int = 16,
    device: str = "auto",
    precision: str = "fp32",
    max_length: Optional[int] = None,
    tokenizer: Optional[str] = None,
    force: bool = False,
    manager=None,
) -> tuple[dict, bool]:
    """Evaluate one run directory's newest checkpoint on `tasks`; returns (the record, whether
    it was evaluated now: False when an identical evaluation of the same checkpoint exists)."""
    import lm_eval

    from andrea.eval.adapter import AndreaLM, resolve_device

    include_paths = [Path(p) for p in include_paths]
    if not tasks:
        raise EvalError("no tasks given (--tasks a,b,...)")
    settings = settings_of(tasks, include_paths, num_fewshot, limit, precision, max_length)
    digest = settings_hash(settings)
    rd = RunDir(Path(run_path))
    dev = resolve_device(device)
    run = load_run(rd.root, dev, tokenizer)
    old = evaluations.read(rd, digest)
    if old is not None and old.get("step") == run.step and not force:
        return old, False
    tm = manager if manager is not None else task_manager(tasks, include_paths)
    loaded = load_tasks(tm, tasks)
    lm = AndreaLM(
        loaded=run,
        device=str(dev),
        batch_size=batch_size,
        max_length=max_length,
        precision=precision,
    )
    t0 = time.time()
    res = lm_eval.simple_evaluate(
        model=lm,
        tasks=list(loaded["tasks"].values()),
        num_fewshot=num_fewshot,
        limit=limit,
        log_samples=True,
        bootstrap_iters=0,
        task_manager=tm,
    )
    wall = time.time() - t0
    metrics = {}
    for name, task in loaded["tasks"].items():
        metrics[name] = task_metrics(
            task, res["samples"].get(name, []), res["results"].get(name, {}), lm
        )
    record = {
        "settings": settings,
        "settings_hash": digest,
        "run": str(rd.root),
        "step": run.step,
        "final": run.final,
        "checkpoint": str(run.checkpoint),
        "tokenizer_sha256": run.tokenizer_sha256,
        "harness_version": settings["harness"],
        "evaluated_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "wall_s": wall,
        "device": dev.type,
        "tasks": metrics,
    }
    evaluations.write(rd, record)
    return record, True
