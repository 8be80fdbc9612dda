"""Byte-level BPE: 256 byte tokens + merges + one end-of-text token (ANDREA: 256 + 8192 + 1).

Id layout, fixed so shards are meaningful without the tokenizer file:
    0..255                 byte b is id b (every byte sequence is encodable, no unknown token)
    256..vocab_size-2      merges, in the order BPE learned them
    vocab_size-1           <|endoftext|>, the document separator

`tokenizers` trains the merges (ByteLevel pre-tokenizer, GPT-2 split regex); we then rebuild
the vocabulary in the layout above, because the trainer orders its initial alphabet by
character, not by byte value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers.pre_tokenizers import ByteLevel

from andrea.run.rundir import atomic_write_bytes

if TYPE_CHECKING:
    import numpy as np

EOT = "<|endoftext|>"
N_BYTES = 256
MIN_VOCAB = N_BYTES + 1  # bytes + end-of-text, zero merges
# Part of the corpus fingerprint: change it when the tokenizer recipe changes.
TOKENIZER_SETTINGS = "bytelevel-bpe/gpt2-regex/no-prefix-space/bytes=ids0-255/eot=last/v1"


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (what ByteLevel puts in the vocab)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _assemble(merges: list[tuple[str, str]]) -> Tokenizer:
    byte_chars = _byte_to_unicode()
    vocab = {byte_chars[b]: b for b in range(N_BYTES)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab[EOT] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([EOT])  # already in the vocab: keeps its id, decode skips it
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Learn vocab_size - 257 merges on `texts`; the result has exactly `vocab_size` ids."""
    if vocab_size < MIN_VOCAB:
        raise ValueError(f"vocab_size={vocab_size} is below {MIN_VOCAB} (256 bytes + end-of-text)")
    n_merges = vocab_size - MIN_VOCAB
    probe = Tokenizer(models.BPE())
    probe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=N_BYTES + n_merges,
        min_frequency=2,  # a merge seen once is memorisation, not compression
        show_progress=False,
        initial_alphabet=ByteLevel.alphabet(),
        special_tokens=[],
    )
    probe.train_from_iterator(texts, trainer=trainer)
    merges = [
        tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
        for m in json.loads(probe.to_str())["model"]["merges"]
    ]
    if len(merges) < n_merges:
        raise ValueError(
            f"vocab_size={vocab_size} needs {n_merges} BPE merges but the training text only "
            f"supports {len(merges)} (pairs seen at least twice); use a larger corpus "
            f"(max_chars) or a vocab_size of at most {MIN_VOCAB + len(merges)}"
        )
    tok = _assemble(merges[:n_merges])
    if tok.get_vocab_size() != vocab_size:  # duplicate merge results would shrink the vocab
        raise RuntimeError(
            f"tokenizer has {tok.get_vocab_size()} ids after assembly, expected {vocab_size}"
        )
    return tok


def save_tokenizer(tok: Tokenizer, path: Path) -> None:
    atomic_write_bytes(Path(path), tok.to_str(pretty=True).encode())


def load_tokenizer(path: Path) -> Tokenizer:
    return Tokenizer.from_file(str(path))


def eot_id(tok: Tokenizer) -> int:
    return tok.token_to_id(EOT)


def encode_documents(tok: Tokenizer, docs: list[str]) -> list[list[int]]:
    """Token ids of each document; a literal "<|endoftext|>" in the text stays plain text."""
    tok.encode_special_tokens = True
    try:
        return [e.ids for e in tok.encode_batch(docs, add_special_tokens=False)]
    finally:
        tok.encode_special_tokens = False


def token_byte_lengths(tok: Tokenizer, vocab_size: int | None = None) -> "np.ndarray":
    """UTF-8 bytes each token id decodes to, for bits per byte (Gao et al. 2020, The Pile).

    Exact for byte-level BPE (andrea's tokenizer, GPT-2's, Llama-3's): every vocabulary entry is
    a string of GPT-2's byte stand-in characters, so its length in bytes is its length in
    characters. For SentencePiece-style vocabularies ('▁' for a space, '<0xNN>' byte fallback) it
    counts '▁' as one byte; the decoder drops a document's leading space, so the count is high by
    at most one byte per document. Other tokenizers fall back to decoding each id alone. Special
    tokens (<|endoftext|>) decode to nothing: 0 bytes — their loss still counts, as it does in
    the Pile's bits per byte, where the document boundary is part of what the model predicts.
    Ids beyond the tokenizer's vocabulary (unused embedding rows) get 0.
    """
    import numpy as np

    n = max(tok.get_vocab_size(with_added_tokens=True), vocab_size or 0)
    out = np.zeros(n, dtype=np.int64)
    spec = json.loads(tok.to_str())
    special = {t["id"] for t in spec.get("added_tokens") or [] if t.get("special")}

    def kinds(node) -> set:
        if not node:
            return set()
        found = {node.get("type")}
        for child in node.get("decoders") or node.get("pretokenizers") or []:
            found |= kinds(child)
        return found

    decoder = kinds(spec.get("decoder")) | kinds(spec.get("pre_tokenizer"))
    from_char = {c: b for b, c in _byte_to_unicode().items()}
    for text, i in tok.get_vocab(with_added_tokens=True).items():
        if i in special or i >= n:
            continue
        if "ByteLevel" in decoder and all(c in from_char for c in text):
            out[i] = len(text)
        elif "Metaspace" in decoder or "ByteFallback" in decoder:
            is_byte = len(text) == 6 and text.startswith("<0x") and text.endswith(">")
            out[i] = 1 if is_byte else len(text.replace("\u2581", " ").encode("utf-8"))
        else:
            out[i] = len(tok.decode([i], skip_special_tokens=True).encode("utf-8"))
    return out
