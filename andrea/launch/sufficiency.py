"""Data sufficiency, checked by the sweeper before any job is submitted (docs/protocol.md).

Each distinct corpus of the grid is prepared (tokenized) once here, in the sweeper's process, so
a missing, empty, non-UTF-8 or too small corpus is one error (exit 2) instead of a failed run per
job, and the jobs find the prepared shards in the cache (andrea/data/prepare.py: fingerprinted,
flock'ed, so concurrent sweepers build a corpus once). Then every job's epochs = planned tokens /
unique training tokens of its corpus; a grid whose jobs exceed `max_epochs` is refused naming them
(Muennighoff et al. 2023, "Scaling Data-Constrained Language Models": up to ~4 epochs repeated
tokens are worth nearly as much as new ones, beyond that less and less), and so is a grid with
`require_real_corpus=true` on the built-in stdlib corpus.

`plan=true` tokenizes nothing: a corpus is prepared only to launch. The plan shows exact epochs
where counting is cheap (token shards: their headers) and estimates elsewhere, from the corpus's
characters at CHARS_PER_TOKEN (marked `~`); an HF hub dataset not yet downloaded shows `?`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from andrea.config.resolve import ConfigError
from andrea.data.config import DataConfig, effective_vocab_size, expand_paths, hf_location
from andrea.data.domains import check_domains
from andrea.data.prepare import PreparedData, check_split_sizes, find_prepared, prepare_data

# Characters per token of andrea's byte-level BPE, measured on the demo's corpus at its small
# vocabulary and rounded down (docs/protocol.md). A larger vocabulary or English prose usually
# packs more characters per token, so the estimate errs towards more tokens (fewer epochs): the
# plan may pass a grid that the launch, counting exactly after preparation, refuses -- rarely the
# other way round.
CHARS_PER_TOKEN = 3.25


@dataclass
class CorpusTokens:
    """Unique training tokens of one corpus: exact (prepared, or shard headers), or estimated."""

    what: str  # e.g. "stdlib", "text /data/a.txt (+2 files)"
    train_tokens: Optional[int]  # None: unknown before preparation
    exact: bool
    prepared: Optional[PreparedData] = None


def corpus_key(data: DataConfig, vocab_size: int) -> str:
    """Identity of a corpus as prepare_data sees it (cache_dir only says where it is kept)."""
    fields = {k: v for k, v in dataclasses.asdict(data).items() if k != "cache_dir"}
    return json.dumps({**fields, "vocab": effective_vocab_size(data, vocab_size)}, sort_keys=True)


def describe(data: DataConfig) -> str:
    if data.source == "stdlib":
        where = "the interpreter's standard library (built-in)"
    elif data.source == "hf":
        where = str(hf_location(data))
    else:
        where = ", ".join(map(str, data.paths[:2])) + (
            f" (+{len(data.paths) - 2})" if len(data.paths) > 2 else ""
        )
    cap = f", max_chars={data.max_chars:,}" if data.max_chars else ""
    return f"data={data.source} {where}{cap}"


def _distinct(jobs) -> dict[str, tuple[DataConfig, int, list]]:
    out: dict[str, tuple[DataConfig, int, list]] = {}
    for j in jobs:
        key = corpus_key(j.spec.data, j.spec.model.vocab_size)
        out.setdefault(key, (j.spec.data, j.spec.model.vocab_size, []))[2].append(j)
    return out


def _distinct_eval(jobs) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for j in jobs:
        key = json.dumps(dataclasses.asdict(j.spec.eval), sort_keys=True)
        out.setdefault(key, (j.spec.eval, []))[1].append(j)
    return out


def prepare_corpora(jobs, stream=None) -> dict[str, CorpusTokens]:
    """Prepare each distinct corpus of `jobs` once (progress on stderr). Raises ConfigError
    naming the corpus and its jobs when one cannot be used."""
    stream = stream or sys.stdout
    out: dict[str, CorpusTokens] = {}
    errors: list[str] = []
    corpora = _distinct(jobs)
    for i, (key, (data, vocab, users)) in enumerate(corpora.items(), 1):
        print(
            f"[data] corpus {i}/{len(corpora)}: {describe(data)} at vocab "
            f"{effective_vocab_size(data, vocab)} ({len(users)} job(s))",
            file=stream,
            flush=True,
        )
        try:
            prepared = prepare_data(data, vocab)
        except KeyboardInterrupt:
            raise
        except Exception as e:  # a corpus problem, whatever raised it: one message, exit 2
            errors.append(
                f"{describe(data)} (used by {len(users)} job(s), e.g. "
                f"{_job(users[0])}): {type(e).__name__}: {e}"
            )
            continue
        out[key] = CorpusTokens(describe(data), prepared.n_train_tokens, True, prepared)
        for ev_key, (ev, ev_users) in _distinct_eval(users).items():  # eval.domains
            try:
                check_domains(ev, data, prepared, [j.spec.seq_len for j in ev_users])
            except KeyboardInterrupt:
                raise
            except Exception as e:
                errors.append(
                    f"{describe(data)}, eval.domains (used by {len(ev_users)} job(s), "
                    f"e.g. {_job(ev_users[0])}): {type(e).__name__}: {e}"
                )
        for j in users:  # the corpus must hold one micro-batch of windows for every process
            try:
                check_split_sizes(
                    prepared, j.spec.micro_batch_size, j.spec.seq_len, j.spec.world_size
                )
            except ValueError as e:
                errors.append(f"{_job(j)}: {describe(data)}: {e}")
    if errors:  # one line (bad input is one `error:` line), each problem in it
        raise ConfigError(
            f"{len(errors)} corpus problem(s); nothing was launched: "
            + "; ".join(" ".join(e.split()) for e in errors)
        )
    return out


def estimate_corpora(jobs) -> dict[str, CorpusTokens]:
    """Unique training tokens of each corpus without tokenizing (for plan=true)."""
    return {key: estimate(data, vocab) for key, (data, vocab, _) in _distinct(jobs).items()}


def estimate(data: DataConfig, vocab: int) -> CorpusTokens:
    what = describe(data)
    if (cached := find_prepared(data, vocab)) is not None:  # in the cache: its exact count
        return CorpusTokens(what, cached.n_train_tokens, True)
    try:
        if data.source == "shards":
            from andrea.data.config import split_shard_paths
            from andrea.data.shards import read_header

            train, _ = split_shard_paths(data)
            return CorpusTokens(what, sum(read_header(f) for f in train), True)
        chars = _corpus_chars(data)
    except (OSError, ValueError):
        return CorpusTokens(what, None, False)  # the launch's preparation says what is wrong
    if chars is None:
        return CorpusTokens(what, None, False)
    if data.max_chars is not None:
        chars = min(chars, data.max_chars)
    return CorpusTokens(what, int(chars * (1 - data.val_fraction) / CHARS_PER_TOKEN), False)


def _corpus_chars(data: DataConfig) -> Optional[int]:
    """Size of the corpus in bytes (~ characters), without reading it; None when unknown."""
    if data.source == "stdlib":
        from andrea.data.corpora import stdlib_root

        return _stdlib_chars(stdlib_root(), data.max_chars)
    if data.source == "text":
        return sum(p.stat().st_size for p in expand_paths(data.paths, "paths"))
    loc = os.path.expanduser(str(hf_location(data)))
    if os.path.isfile(loc):
        return os.path.getsize(loc)
    if os.path.isdir(loc):
        return sum(p.stat().st_size for p in Path(loc).rglob("*") if p.is_file())
    return None  # a hub dataset: known after download


def _stdlib_chars(root: Path, limit: Optional[int]) -> int:
    """Bytes of the standard library's .py files, stopping once past `limit` (data.max_chars)."""
    from andrea.data.corpora import stdlib_files

    total = 0
    for path in stdlib_files(root):
        total += path.stat().st_size
        if limit is not None and total >= limit:
            break
    return total


def annotate_epochs(jobs, corpora: dict[str, CorpusTokens]) -> None:
    """Set each job's `epochs` (planned tokens / unique training tokens; None when unknown)."""
    for j in jobs:
        c = corpora[corpus_key(j.spec.data, j.spec.model.vocab_size)]
        j.corpus = c
        j.epochs = j.spec.tokens / c.train_tokens if c.train_tokens else None


def format_epochs(job) -> str:
    if getattr(job, "epochs", None) is None:
        return "?"
    e = job.epochs
    return ("" if job.corpus.exact else "~") + (f"{e:.3g}" if e < 1000 else f"{e:.0f}")


def _job(j) -> str:
    """A job by its overrides (without plan=, which does not change the run)."""
    return " ".join(o for o in j.overrides if not o.startswith("plan="))


def sufficiency_problems(jobs, epochs: bool = True) -> list[str]:
    """Why the grid may not run as planned: built-in corpus where a real one is required, and
    (with `epochs`) jobs beyond max_epochs. Empty when the grid passes."""
    problems: list[str] = []
    stdlib = [j for j in jobs if j.run.require_real_corpus and j.spec.data.source == "stdlib"]
    if stdlib:
        problems.append(
            f"{len(stdlib)} job(s) need a real corpus (require_real_corpus=true: this sweep's "
            "numbers are meant to be the report's) but train on the built-in stdlib corpus "
            "(Python source, ~10 M tokens); use data=shards data.paths='[...]' or data=hf "
            "data.hf_name=... (docs/protocol.md: python -m andrea.data prepares one)"
        )
    over = [
        j for j in jobs if epochs and j.epochs is not None and j.epochs > float(j.run.max_epochs)
    ]
    if over:
        limit = float(over[0].run.max_epochs)
        each = [
            f"{_job(j)}: {format_epochs(j)} epochs = "
            f"{j.spec.tokens:,} tokens / {j.corpus.train_tokens:,} unique training tokens"
            + ("" if j.corpus.exact else " (estimated)")
            for j in over
        ]
        problems.append(  # one line (one `error:` line per problem), the jobs in it
            f"{len(over)} of {len(jobs)} job(s) would see their training data more than "
            f"max_epochs={limit:g} times (Muennighoff et al. 2023: repeated tokens lose value past "
            "~4 epochs): " + "; ".join(each) + "; use a larger corpus, fewer tokens "
            "(train.tokens_per_param), or raise max_epochs=... knowingly"
        )
    return problems
