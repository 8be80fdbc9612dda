"""Write the demo's local tasks (JSON lines beside this file) from text the demo never trains on:
andrea's own Python source and its Markdown docs (the demo trains on the Python standard
library). Run once; the files are committed, so the tasks stay fixed while the code changes:

    python eval_tasks/make_tasks.py

- code_next_line (multiple choice, 4 choices, chance 0.25): four lines of an andrea module, then
  the next line against three lines from other modules re-indented like it.
- code_bpb (rolling loglikelihood): 40 chunks of about 1,500 characters of analysis/ modules.
- docs_next_words (multiple choice, 4 choices): the start of a sentence of docs/*.md, then its
  next three words against the next three words of three other sentences. English, which the
  demo's models have seen only in comments and docstrings: expected to sit at chance.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
N_MC = 200
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[,;]?")  # a plain English word, maybe with a comma


def _write(name: str, rows: list[dict]) -> None:
    (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{name}: {len(rows)} documents")


def _code_lines(files: list[Path]) -> list[tuple[Path, list[str], int]]:
    out = []
    for f in files:
        lines = f.read_text().splitlines()
        for i in range(4, len(lines)):
            s = lines[i].strip()
            if (
                12 <= len(s) <= 70
                and not s.startswith(("#", '"""', "'''"))
                and all(l.strip() for l in lines[i - 4 : i])
            ):
                out.append((f, lines, i))
    return out


def code_next_line(rng: random.Random) -> list[dict]:
    files = sorted((REPO / "andrea").rglob("*.py"))
    cands = _code_lines(files)
    rng.shuffle(cands)
    rows = []
    for f, lines, i in cands:
        if len(rows) == N_MC:
            break
        gold = lines[i]
        indent = gold[: len(gold) - len(gold.lstrip())]
        others = [c for c in rng.sample(cands, 12) if c[0] != f]
        wrong = list(dict.fromkeys(indent + c[1][c[2]].strip() for c in others))
        wrong = [w for w in wrong if w.strip() != gold.strip()][:3]
        if len(wrong) < 3:
            continue
        choices = wrong + [gold]
        rng.shuffle(choices)
        rows.append(
            {
                "context": "\n".join(lines[i - 4 : i]) + "\n",
                "choices": choices,
                "label": choices.index(gold),
                "source": str(f.relative_to(REPO)),
            }
        )
    return rows


def code_bpb(rng: random.Random) -> list[dict]:
    rows = []
    for f in sorted((REPO / "analysis").glob("*.py")):
        text = f.read_text()
        for start in range(0, len(text) - 1500, 6000):
            rows.append({"text": text[start : start + 1500], "source": str(f.relative_to(REPO))})
    rng.shuffle(rows)
    return rows[:40]


def docs_next_words(rng: random.Random) -> list[dict]:
    sentences = []
    for f in sorted((REPO / "docs").glob("*.md")):
        text = re.sub(r"`[^`]*`|\[[^\]]*\]\([^)]*\)|[*_|#>]", " ", f.read_text())
        for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
            words = s.split()
            if 10 <= len(words) <= 40 and all(WORD.fullmatch(w) for w in words[4:7]):
                sentences.append(words)
    rng.shuffle(sentences)
    rows = []
    for words in sentences:
        if len(rows) == N_MC:
            break
        cuts = [
            c
            for c in range(4, min(len(words) - 4, 12) + 1)
            if all(WORD.fullmatch(w) for w in words[c : c + 3])
        ]
        if not cuts:
            continue
        cut = rng.choice(cuts)
        gold = " " + " ".join(words[cut : cut + 3])
        wrong = []
        for other in rng.sample(sentences, 8):
            w = " " + " ".join(other[4:7])
            if other is not words and w != gold and w not in wrong:
                wrong.append(w)
        choices = wrong[:3] + [gold]
        rng.shuffle(choices)
        rows.append(
            {"context": " ".join(words[:cut]), "choices": choices, "label": choices.index(gold)}
        )
    return rows


if __name__ == "__main__":
    _write("code_next_line.jsonl", code_next_line(random.Random(0)))
    _write("code_bpb.jsonl", code_bpb(random.Random(1)))
    _write("docs_next_words.jsonl", docs_next_words(random.Random(2)))
