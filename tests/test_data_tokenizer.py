import json
import os

import pytest

from andrea.data.tokenizer import (
    EOT,
    _byte_to_unicode,
    encode_documents,
    eot_id,
    load_tokenizer,
    save_tokenizer,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def texts():
    import inspect
    import json as j

    mods = [os, json, j.decoder, pytest, inspect]
    return [open(m.__file__, encoding="utf-8").read() for m in mods]


@pytest.mark.parametrize("vocab", [257, 300, 1000])
def test_vocab_size_exact_and_layout(texts, vocab):
    tok = train_tokenizer(texts, vocab)
    assert tok.get_vocab_size() == vocab
    assert eot_id(tok) == vocab - 1 and tok.id_to_token(vocab - 1) == EOT
    byte_chars = _byte_to_unicode()
    assert [tok.id_to_token(b) for b in range(256)] == [byte_chars[b] for b in range(256)]
    assert sorted(tok.get_vocab().values()) == list(range(vocab))
    # single bytes decode to themselves (ASCII shown; all 256 are byte tokens by the check above)
    assert tok.decode([ord("a"), ord("\n"), 0]) == "a\n\0"


def test_round_trip(texts, tmp_path):
    tok = train_tokenizer(texts, 600)
    samples = [
        texts[0][:5000],
        "héllo wörld — 日本語 🙂\n\ttabs  and   spaces\r\n",
        "\x00\x01\x7f literal <|endoftext|> stays text",
        " leading space",
        "",
    ]
    ids = encode_documents(tok, samples)
    for s, i in zip(samples, ids):
        assert tok.decode(i) == s
        assert all(0 <= t < 599 for t in i)  # the separator is never produced by text
    assert len(ids[0]) < len(samples[0].encode()) / 1.5  # merges actually compress
    path = tmp_path / "tokenizer.json"
    save_tokenizer(tok, path)
    tok2 = load_tokenizer(path)
    assert tok2.get_vocab_size() == 600
    assert encode_documents(tok2, samples) == ids


def test_too_few_merges():
    with pytest.raises(ValueError, match=r"vocab_size=5000 needs 4743 BPE merges"):
        train_tokenizer(["tiny text, tiny text"], 5000)


def test_vocab_below_minimum():
    with pytest.raises(ValueError, match="vocab_size=256"):
        train_tokenizer(["abc"], 256)
