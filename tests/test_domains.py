"""Bits per byte and held-out domains (eval.domains): counting, bad input, and a run that scores
them."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, TINY_RUN, compose_run

from andrea.components.evaluate import bits_per_byte
from andrea.config.resolve import ConfigError, resolve_run, reuse_mismatches
from andrea.data import ValidationSet, prepare_data, write_shard
from andrea.data.corpora import stdlib_root
from andrea.data.tokenizer import (
    encode_documents,
    eot_id,
    load_tokenizer,
    token_byte_lengths,
    train_tokenizer,
)
from andrea.run import logkeys as keys
from andrea.run.rundir import RunDir
from andrea.train import train

PROSE = (
    "The licence grants permission to copy, modify and distribute — naïve café, 漢字, "
    "emoji 🎉 — provided this notice is kept.\n"
) * 40


def spec_for(*extra: str):
    return resolve_run(compose_run([*TINY_RUN, *extra]))


# --- counting bytes ----------------------------------------------------------------------------
def test_token_byte_lengths_count_the_utf8_bytes_each_text_encodes_to():
    tok = train_tokenizer([PROSE, "def f(x):\n    return x + 1\n" * 50], 300)
    lengths = token_byte_lengths(tok, 512)
    assert len(lengths) == 512 and lengths[eot_id(tok)] == 0 and lengths[300:].sum() == 0
    for text in (PROSE, "zz\x00\xff ñ 🎉🎉 \n\t", "x" * 1000):
        ids = encode_documents(tok, [text])[0]
        assert lengths[ids].sum() == len(text.encode("utf-8"))


def test_bits_per_byte_is_summed_nats_over_ln2_over_bytes():
    assert bits_per_byte(2.0, 300, 600) == pytest.approx(2.0 * 300 / (math.log(2) * 600))
    assert bits_per_byte(2.0, 300, None) is None


def test_validation_set_counts_the_bytes_of_its_scored_targets(tmp_path):
    ids = np.arange(1, 42, dtype=np.uint16)  # 41 tokens: windows of 10 + 1 -> 4 windows
    write_shard(tmp_path / "val.bin", ids)
    val = ValidationSet([tmp_path / "val.bin"], seq_len=10)
    lengths = np.zeros(64, dtype=np.int64)
    lengths[ids] = ids % 3  # any per-id table
    targets = np.concatenate([ids[1 + 10 * k : 11 + 10 * k] for k in range(4)])
    assert val.target_bytes(lengths) == int(lengths[targets].sum())


# --- bad input: one error before any job ------------------------------------------------------
@pytest.mark.parametrize(
    "domain, message",
    [
        (
            "{x:{source:text,paths:[/nonexistent/*.txt]}}",
            "eval.domains.x: paths: glob '/nonexistent/*.txt' matches no files",
        ),
        (
            "{x:{source:text,paths:[/nonexistent.txt]}}",
            "eval.domains.x: paths: file '/nonexistent.txt' does not exist",
        ),
        ("{x:{source:text}}", "source: text needs paths"),
        ("{x:{source:heldout,paths:[a.txt]}}", "takes no paths"),
        ("{x:{source:books}}", "source='books' is not one of heldout, text, hf, shards"),
        ("{" + "n" * 41 + ":{source:heldout}}", "a domain name is 1-40 letters"),
        (
            f"{{x:{{source:text,paths:[{stdlib_root()}/os.py]}}}}",
            "is a .py file of the standard library, which data=stdlib trains on",
        ),
    ],
)
def test_a_bad_domain_is_one_error_naming_it(domain, message):
    with pytest.raises(ConfigError, match="eval.domains") as e:
        spec_for(f"+eval.domains={domain}")
    assert message in str(e.value)


def test_a_domain_that_is_or_copies_a_training_file_is_refused(tmp_path):
    train_file, other = tmp_path / "train.txt", tmp_path / "other.txt"
    train_file.write_text(PROSE)
    copy = tmp_path / "copy.txt"
    shutil.copy(train_file, copy)
    other.write_text(PROSE + "held out\n")
    data = ["data=text", f"data.paths=[{train_file}]"]
    with pytest.raises(ConfigError, match=r"eval.domains.x: .*train.txt is a training file"):
        spec_for(*data, f"+eval.domains={{x:{{source:text,paths:[{other},{train_file}]}}}}")
    with pytest.raises(ConfigError, match=r"copy.txt has the same bytes as the training file"):
        spec_for(*data, f"+eval.domains={{x:{{source:text,paths:[{copy}]}}}}")
    spec = spec_for(*data, f"+eval.domains={{x:{{source:text,paths:[{other}]}}}}")
    assert list(spec.eval.domains) == ["x"]


def test_shards_without_a_tokenizer_refuse_bpb_and_text_domains(tmp_path):
    write_shard(tmp_path / "a_train.bin", np.arange(1, 3000, dtype=np.uint16) % 500)
    write_shard(tmp_path / "a_val.bin", np.arange(1, 3000, dtype=np.uint16) % 500)
    (tmp_path / "prose.txt").write_text(PROSE)
    shards = ["data=shards", f"data.paths=[{tmp_path}/a_*.bin]"]
    with pytest.raises(
        ConfigError,
        match="eval.bpb=true: bits per byte needs the tokenizer that "
        "made the shards.*data.tokenizer",
    ):
        spec_for(*shards, "eval.bpb=true")
    with pytest.raises(
        ConfigError,
        match="eval.domains.p: a text domain is tokenized with the "
        "training data's tokenizer; for data=shards set "
        "data.tokenizer",
    ):
        spec_for(*shards, f"+eval.domains={{p:{{source:text,paths:[{tmp_path}/prose.txt]}}}}")
    with pytest.raises(ConfigError, match="eval.domains.v: .*a_train.bin is a training file"):
        spec_for(*shards, f"+eval.domains={{v:{{source:shards,paths:[{tmp_path}/a_train.bin]}}}}")
    with pytest.raises(ConfigError, match="data.tokenizer=.* applies to data.source=shards only"):
        spec_for(f"data.tokenizer={tmp_path}/prose.txt")
    spec_for(*shards)  # bpb=null: allowed, the run notes that bpb is not available


def test_a_sweep_with_a_bad_domain_stops_before_any_job(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "sweep.py",
            "-m",
            *TINY_RUN,
            "train.seed=0,1",
            f"out_dir={tmp_path}",
            "+eval.domains={x:{source:text,paths:[/nonexistent/*.txt]}}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [l for l in out.stderr.splitlines() if l.startswith("error:")]
    assert len(errors) == 1 and out.stderr == errors[0] + "\n", out.stderr[-2000:]
    assert errors[0].startswith("error: 2 of 2 jobs are invalid; nothing was launched: ")
    assert "eval.domains.x: paths: glob '/nonexistent/*.txt' matches no files" in errors[0]
    assert not list(tmp_path.rglob("results.json")) and not list(tmp_path.rglob("metrics.jsonl"))


def test_a_completed_run_without_the_domains_asked_for_is_not_reused(tmp_path):
    spec = spec_for("+eval.domains={s:{source:heldout}}")
    summary = {"label": spec.label, "size": spec.size, "seed": 0}
    assert reuse_mismatches(summary, spec) == ["eval.domains.s=None (now 'heldout')"]
    assert (
        reuse_mismatches({**summary, "eval_domains": {"s": "heldout", "t": "text:x"}}, spec) == []
    )


def test_a_domain_too_small_for_one_window_is_refused_before_training(tmp_path, data_cache):
    from andrea.data.domains import check_domains

    (tmp_path / "tiny.txt").write_text("Too short.\n")
    spec = spec_for(f"+eval.domains={{t:{{source:text,paths:[{tmp_path}/tiny.txt]}}}}")
    prepared = prepare_data(spec.data, spec.model.vocab_size)
    with pytest.raises(
        ValueError,
        match=r"eval.domains.t: text:.*tiny.txt holds \d+ tokens, "
        r"fewer than one window of seq_len\+1=65",
    ):
        check_domains(spec.eval, spec.data, prepared, [spec.seq_len])


# --- a run that scores them --------------------------------------------------------------------
def test_a_run_reports_bpb_and_each_domain_at_every_point(tmp_path, data_cache):
    prose = tmp_path / "prose.txt"
    prose.write_text(PROSE * 5)
    spec = spec_for(
        "train.budgets=[0.5,1]",
        "train.evals=0",
        f"+eval.domains={{code:{{source:heldout}},prose:{{source:text,paths:[{prose}]}}}}",
    )
    results = train(spec, RunDir(tmp_path / "r"), {})
    on_disk = json.loads(RunDir(tmp_path / "r").results.read_text())
    assert on_disk["eval_domains"] == {"code": "heldout", "prose": f"text:{prose}"}
    assert len(on_disk["points"]) == 2
    for point in on_disk["points"]:
        assert point["domain:code/loss"] == point["val_loss"]  # heldout: the validation set
        assert point["domain:code/bpb"] == point["val_bpb"]
        assert point["domain:prose/loss"] > 0 and point["domain:prose/loss"] != point["val_loss"]
    final = on_disk["points"][-1]
    for key in (
        "val_bpb",
        "domain:code/loss",
        "domain:code/bpb",
        "domain:prose/loss",
        "domain:prose/bpb",
    ):
        assert on_disk[key] == final[key] == results[key]
    # bpb from the tokens and bytes each set scored, and those bytes by decoding its targets
    sets = on_disk["eval_sets"]
    assert on_disk["val_bpb"] == pytest.approx(
        on_disk["val_loss"] * sets["val"]["tokens"] / (math.log(2) * sets["val"]["bytes"])
    )
    assert on_disk["domain:prose/bpb"] == pytest.approx(
        final["domain:prose/loss"]
        * sets["domain:prose"]["tokens"]
        / (math.log(2) * sets["domain:prose"]["bytes"])
    )
    prepared = prepare_data(spec.data, spec.model.vocab_size)
    tok = load_tokenizer(prepared.tokenizer_path)
    val = ValidationSet(prepared.val_shards, spec.seq_len, spec.val_tokens)
    decoded = sum(
        len(tok.decode(y.tolist()).encode("utf-8")) for _, ys in val.batches(4) for y in ys
    )
    assert sets["val"]["bytes"] == decoded
    lines = [json.loads(l) for l in RunDir(tmp_path / "r").metrics.read_text().splitlines()]
    val_line = [l for l in lines if keys.VAL_LOSS in l][-1]
    assert val_line[keys.VAL_BPB] == on_disk["val_bpb"]
    assert val_line[keys.domain_key("prose", "loss")] == on_disk["domain:prose/loss"]


def test_scoring_domains_leaves_training_as_it_was(tmp_path, data_cache):
    """The domains are scored with the model in eval mode and no randomness: the run's weights
    and validation loss are those of the same run without them."""
    plain = train(spec_for("train.budgets=[0.5,1]"), RunDir(tmp_path / "a"), {})
    prose = tmp_path / "prose.txt"
    prose.write_text(PROSE * 5)
    scored = train(
        spec_for("train.budgets=[0.5,1]", f"+eval.domains={{p:{{source:text,paths:[{prose}]}}}}"),
        RunDir(tmp_path / "b"),
        {},
    )
    assert [p["val_loss"] for p in scored["points"]] == [p["val_loss"] for p in plain["points"]]
    assert "domain:p/loss" in scored["points"][0] and "domain:p/loss" not in plain["points"][0]


def test_shards_score_bpb_only_with_their_tokenizer(tmp_path, data_cache):
    base = spec_for()
    prepared = prepare_data(base.data, base.model.vocab_size)
    shards = [
        "data=shards",
        f"data.paths=[{prepared.train_shards[0]}]",
        f"data.val_paths=[{prepared.val_shards[0]}]",
    ]
    without = train(spec_for(*shards), RunDir(tmp_path / "a"), {})
    assert without["val_bpb"] is None and without["points"][-1]["val_bpb"] is None
    with_tok = train(
        spec_for(*shards, f"data.tokenizer={prepared.tokenizer_path}"), RunDir(tmp_path / "b"), {}
    )
    assert with_tok["val_loss"] == without["val_loss"]
    sets = with_tok["eval_sets"]["val"]
    assert with_tok["val_bpb"] == pytest.approx(
        with_tok["val_loss"] * sets["tokens"] / (math.log(2) * sets["bytes"])
    )
