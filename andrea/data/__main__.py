"""Prepare a corpus into token shards ahead of a sweep (docs/protocol.md):

    python -m andrea.data --source hf --hf-name roneneldan/TinyStories          # a hub dataset
    python -m andrea.data --source text --paths '/data/books/*.txt' --workers 16  # local text

Tokenizes at the vocabulary of the size you will train (--size tiny-2: 2,049 ids; without it
ANDREA's 8,449; or --vocab-size) into the shared cache
(andrea/data/prepare.py: fingerprinted, flock'ed, reused by every run), with a progress bar, and
prints the unique training tokens, the largest size each budget can train within max_epochs, and
the overrides that use it: the same `data=` settings (the sweep finds the prepared corpus in the
cache), or `data=shards` on the written shard files. A sweep prepares its corpora itself
before submitting; this command does it ahead of time, e.g. on a node with many cores.

Parallelism: BPE training and encoding run in the `tokenizers` library's Rust thread pool, which
uses every core without the GIL (--workers caps it); encoding goes in ~1 M-character batches.
"""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m andrea.data", description=__doc__.split("\n\n")[0])
    p.add_argument("--source", choices=("stdlib", "text", "hf", "shards"), default="text")
    p.add_argument(
        "--paths",
        nargs="*",
        default=[],
        help="text files or globs (source text), "
        "a local dataset path (source hf), or shard files (source shards: checked only)",
    )
    p.add_argument("--hf-name", help="Hugging Face dataset (hub name or local path)")
    p.add_argument("--hf-split", default="train")
    p.add_argument("--text-field", default="text", help="the dataset column holding the text")
    p.add_argument(
        "--size",
        help="the size you will train (tiny-1 ... andrea-480m): prepare at "
        "its vocabulary (tiny sizes: 2049), as its runs will look the corpus up",
    )
    p.add_argument("--vocab-size", type=int, help="default: the --size's, else 8449 (ANDREA's)")
    p.add_argument("--val-fraction", type=float, default=0.01)
    p.add_argument("--max-chars", type=int, help="cap on the corpus's characters")
    p.add_argument("--cache-dir", help="default: $ANDREA_DATA, else ~/.cache/andrea (the sweep's)")
    p.add_argument("--workers", type=int, help="tokenizer threads (default: every core)")
    p.add_argument(
        "--max-epochs",
        type=float,
        default=4.0,
        help="for the printed size guide (default: %(default)s)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers is not None:
        if args.workers < 1:
            print(f"error: --workers={args.workers} must be >= 1", file=sys.stderr)
            return 2
        os.environ["RAYON_NUM_THREADS"] = str(args.workers)  # read when the pool first starts

    from andrea.data.config import DataConfig
    from andrea.data.prepare import prepare_data

    vocab = _vocab_of(args.size, args.vocab_size)
    if isinstance(vocab, str):
        print(vocab, file=sys.stderr)
        return 2
    args.vocab_size = vocab

    cfg = DataConfig(
        source=args.source,
        paths=list(args.paths),
        hf_name=args.hf_name,
        hf_split=args.hf_split,
        hf_text_field=args.text_field,
        val_fraction=args.val_fraction,
        vocab_size=args.vocab_size,
        cache_dir=args.cache_dir,
        max_chars=args.max_chars,
    )
    try:
        prepared = prepare_data(cfg, args.vocab_size)
    except KeyboardInterrupt:
        raise
    except Exception as e:  # a corpus problem: one line, exit 2 (as the sweeper does)
        hint = ""
        if "BPE merges" in str(e) and args.size is None and args.vocab_size != 2049:
            # a small corpus is for the CPU sizes, whose runs look it up at their vocabulary
            hint = (
                "; for the CPU sizes add --size tiny-1 (vocabulary 2049, what "
                "size=tiny-1..4 trains with)"
            )
        print(f"error: {type(e).__name__}: {e}{hint}", file=sys.stderr)
        return 2
    _report(prepared, cfg, args.max_epochs)
    return 0


def _report(prepared, cfg, max_epochs: float) -> None:
    """What was prepared, the sizes it can train, and the overrides that use it."""
    print(
        f"prepared: {prepared.n_train_tokens:,} unique training tokens, "
        f"{prepared.n_val_tokens:,} validation tokens, vocab {prepared.vocab_size}"
    )
    if prepared.directory is not None:
        print(f"in: {prepared.directory}")
    print(_size_guide(prepared.n_train_tokens, max_epochs))
    print("use it with the same data settings, e.g.\n  " + " ".join(_overrides(cfg)))
    if prepared.directory is not None:
        d = prepared.directory
        print(
            f"or as shards:\n  data=shards data.paths='[{d}/train_*.bin]' "
            f"data.val_paths='[{d}/val_*.bin]' data.vocab_size={prepared.vocab_size}"
        )


def _vocab_of(size: str | None, vocab_size: int | None) -> int | str:
    """The vocabulary to prepare at: --vocab-size, else the --size's, else ANDREA's 8449; an
    `error:` line for an unknown size (with the nearest)."""
    if size is None:
        return vocab_size or 8449
    import difflib

    from andrea.ladder.sizes import SHAPES

    shapes = {s.name: s for s in SHAPES}
    if size not in shapes:
        near = difflib.get_close_matches(size, shapes, n=1, cutoff=0.5)
        return (
            f"error: --size={size}: no such size"
            + (f" (did you mean {near[0]}?)" if near else "")
            + f"; sizes: {', '.join(shapes)}"
        )
    if vocab_size is not None and vocab_size != shapes[size].vocab_size:
        return (
            f"error: --vocab-size={vocab_size} and --size={size} (vocabulary "
            f"{shapes[size].vocab_size}) disagree; give one"
        )
    return shapes[size].vocab_size


def _overrides(cfg) -> list[str]:
    out = [f"data={cfg.source}"]
    if cfg.paths:
        out.append("data.paths='[" + ",".join(cfg.paths) + "]'")
    for key, default in (
        ("hf_name", None),
        ("hf_split", "train"),
        ("hf_text_field", "text"),
        ("val_fraction", {"stdlib": 0.03}.get(cfg.source, 0.01)),
        ("max_chars", None),
        ("cache_dir", None),
    ):
        value = getattr(cfg, key)
        if value != default and not (cfg.source != "hf" and key.startswith("hf_")):
            out.append(f"data.{key}={value}")
    if cfg.vocab_size != 8449:
        out.append(f"data.vocab_size={cfg.vocab_size}")
    return out


def _size_guide(train_tokens: int, max_epochs: float) -> str:
    """Epochs each GPU ladder size would spend at its budget (as sweeps=scaling_law trains it)."""
    from andrea.ladder.sizes import SHAPES, size_defaults
    from andrea.model.transformer import ModelConfig, count_parameters

    fits = []
    for shape in (s for s in SHAPES if not s.cpu):
        n = count_parameters(
            ModelConfig(
                n_layer=shape.n_layer,
                n_head=shape.n_head,
                d_model=shape.d_model,
                vocab_size=shape.vocab_size,
                context_length=shape.context_length,
            )
        ).non_embedding
        epochs = size_defaults(shape)["tokens_per_param"] * n / max(train_tokens, 1)
        fits.append(f"{shape.name} {epochs:.2g}{'' if epochs <= max_epochs else ' (too many)'}")
    return f"epochs at 20 tokens/parameter (limit max_epochs={max_epochs:g}): " + ", ".join(fits)


if __name__ == "__main__":
    sys.exit(main())
