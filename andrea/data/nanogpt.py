"""`python -m andrea.data.nanogpt train.bin val.bin --out DIR`: nanoGPT's token files as shards.

nanoGPT's `prepare.py` writes flat uint16 token ids with no header; `data=shards` reads the llm.c
layout (a 1,024-byte header first, andrea/data/shards.py). This copies each file into that layout
under DIR, keeping its name (so val.bin is the validation shard), and prints the overrides.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from andrea.data.shards import wrap_headerless


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m andrea.data.nanogpt",
        description="Copy headerless uint16 token files (nanoGPT's train.bin / val.bin) into "
        "token shards (the llm.c layout data=shards reads), keeping their names.",
    )
    p.add_argument("files", nargs="+", type=Path, help="headerless uint16 token files")
    p.add_argument("--out", required=True, type=Path, help="folder for the shards")
    args = p.parse_args(argv)
    names = [f.name for f in args.files]
    if len(set(names)) != len(names):
        print(
            f"error: two files share a name ({', '.join(names)}); --out keeps names",
            file=sys.stderr,
        )
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    top = -1
    for f in args.files:
        dst = args.out / f.name
        if dst.resolve() == f.resolve():
            print(f"error: {f}: --out would overwrite the file itself", file=sys.stderr)
            return 2
        try:
            n, t = wrap_headerless(f, dst)
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        top = max(top, t)
        print(f"{f} -> {dst}: {n:,} tokens, largest id {t}")
    print(
        f"train on them with data=shards 'data.paths=[{args.out}/*.bin]' (names containing "
        f"'val' are the validation shards) and a model vocabulary above the largest id: "
        f"size.vocab_size={max(top + 1, 1)} or more (GPT-2's ids: 50257)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
