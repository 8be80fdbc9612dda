import json
import multiprocessing
import time

import numpy as np
import pytest

from andrea.data import (
    DataConfig,
    check_split_sizes,
    corpora,
    load_tokenizer,
    prepare,
    prepare_data,
    read_shard,
    val_batches,
    write_shard,
)

V = 8449


def fake_module(i: int) -> str:
    body = "\n".join(
        f"    def method_{j}(self, value_{j}):\n"
        f"        return value_{j} * {i} + {j}  # note {i}.{j}\n"
        for j in range(12)
    )
    return f'"""Module {i}: fake standard library source."""\n\nclass Thing{i}:\n{body}\n'


@pytest.fixture
def fake_stdlib(tmp_path, monkeypatch):
    root = tmp_path / "stdlib"
    for i in range(60):
        path = root / ("test" if i % 3 == 0 else "") / f"mod_{i:02d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fake_module(i))
    (root / "site-packages").mkdir()
    (root / "site-packages" / "thirdparty.py").write_text("NOT STDLIB = 1\n")
    monkeypatch.setattr(corpora, "stdlib_root", lambda: root)
    return root


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDREA_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tokens_of(shards):
    return np.concatenate([np.asarray(read_shard(s)) for s in shards])


def test_stdlib_prepare_layout_and_cache(fake_stdlib, cache, monkeypatch):
    cfg = DataConfig(vocab_size=300, val_fraction=0.1)
    p = prepare_data(cfg, V)
    d = cache / f"stdlib-{p.fingerprint[:16]}"
    assert (
        p.directory == d and (d / "COMPLETE").exists() and p.tokenizer_path == d / "tokenizer.json"
    )
    assert p.vocab_size == 300 and p.eot_id == 299
    assert p.train_shards == [d / "train_000000.bin"] and p.val_shards == [d / "val_000000.bin"]
    train, val = tokens_of(p.train_shards), tokens_of(p.val_shards)
    assert (p.n_train_tokens, p.n_val_tokens) == (train.size, val.size)
    assert train.max() == 299 and val.max() == 299  # documents are separated by end-of-text
    assert train[0] == 299 and val[0] == 299
    tok = load_tokenizer(p.tokenizer_path)
    assert tok.get_vocab_size() == 300
    meta = json.loads((d / "meta.json").read_text())
    assert meta["n_train_docs"] + meta["n_val_docs"] == 60  # site-packages excluded
    assert (train == 299).sum() == meta["n_train_docs"]
    assert "NOT STDLIB" not in tok.decode(train.tolist())
    # same config again: no rebuild, same fingerprint
    monkeypatch.setattr(prepare, "_build", lambda *a, **k: pytest.fail("rebuilt a cached corpus"))
    assert prepare_data(cfg, V) == p  # (a wall-clock bound here failed on a busy machine)


def test_split_is_by_document_and_deterministic(fake_stdlib, cache):
    p = prepare_data(DataConfig(vocab_size=300, val_fraction=0.2), V)
    tok = load_tokenizer(p.tokenizer_path)
    val_text = tok.decode(tokens_of(p.val_shards).tolist())
    train_text = tok.decode(tokens_of(p.train_shards).tolist())
    expected_val = sorted(
        f"mod_{i:02d}.py"
        for i in range(60)
        if corpora.key_fraction(("test/" if i % 3 == 0 else "") + f"mod_{i:02d}.py") < 0.2
    )
    assert expected_val
    for name in expected_val:
        i = int(name[4:6])
        assert f"class Thing{i}:" in val_text and f"class Thing{i}:" not in train_text


def test_fingerprint_tracks_content_and_settings(fake_stdlib, cache):
    base = prepare_data(DataConfig(vocab_size=300), V)
    other_vocab = prepare_data(DataConfig(vocab_size=301), V)
    capped = prepare_data(DataConfig(vocab_size=300, max_chars=20_000), V)
    (fake_stdlib / "mod_05.py").write_text(fake_module(5) + "\nEXTRA = 1\n")
    changed = prepare_data(DataConfig(vocab_size=300), V)
    fps = {base.fingerprint, other_vocab.fingerprint, capped.fingerprint, changed.fingerprint}
    assert len(fps) == 4
    assert (base.directory / "COMPLETE").exists()  # the old corpus is kept, never overwritten
    assert capped.n_train_tokens < base.n_train_tokens


def test_real_stdlib_capped(cache):
    p = prepare_data(DataConfig(vocab_size=400, max_chars=300_000), V)
    meta = json.loads((p.directory / "meta.json").read_text())
    assert 300_000 <= meta["n_chars"] < 600_000
    assert meta["inputs"]["python"] and p.n_val_tokens > 0
    assert tokens_of(p.train_shards).max() == 399


def _prepare_in_child(cache_dir, root, log):
    corpora.stdlib_root = lambda: root
    real_build = prepare._build

    def counting_build(*a, **k):
        with open(log, "a") as f:
            f.write("build\n")
        time.sleep(0.5)  # widen the race window
        return real_build(*a, **k)

    prepare._build = counting_build
    p = prepare_data(DataConfig(vocab_size=300), V, cache_dir=cache_dir)
    with open(log, "a") as f:
        f.write(p.fingerprint + "\n")


def test_concurrent_prepare_builds_once(fake_stdlib, tmp_path):
    ctx = multiprocessing.get_context("fork")
    log = tmp_path / "log"
    procs = [
        ctx.Process(target=_prepare_in_child, args=(str(tmp_path / "c"), fake_stdlib, log))
        for _ in range(3)
    ]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(600)  # a hang guard; each child takes a second or two
        assert pr.exitcode == 0
    lines = log.read_text().split()
    assert lines.count("build") == 1
    assert len(set(lines) - {"build"}) == 1
    dirs = [d.name for d in (tmp_path / "c").iterdir() if d.is_dir() and d.name != "corpus-index"]
    assert len(dirs) == 1 and dirs[0].startswith("stdlib-")  # no temp dirs left behind
    assert len(list((tmp_path / "c" / "corpus-index").iterdir())) == 1  # the plan's entry


def test_text_source(tmp_path, cache):
    for i in range(3):
        (tmp_path / f"part{i}.txt").write_text("".join(fake_module(10 * i + j) for j in range(8)))
    cfg = DataConfig(
        source="text", paths=[str(tmp_path / "part*.txt")], vocab_size=280, val_fraction=0.1
    )
    p = prepare_data(cfg, V)
    assert p.directory.name.startswith("text-") and p.n_val_tokens > 0
    tok = load_tokenizer(p.tokenizer_path)
    text = tok.decode(tokens_of(p.train_shards).tolist()) + tok.decode(
        tokens_of(p.val_shards).tolist()
    )
    assert "class Thing27:" in text
    check_split_sizes(p, batch_size=2, seq_len=16)
    with pytest.raises(
        ValueError,
        match=r"the validation split has \d+ tokens = \d+ windows .* batch_size\*world_size=64",
    ):
        check_split_sizes(p, batch_size=64, seq_len=128)
    assert len(val_batches(p.val_shards, 2, 16, 2)) == 2


def test_text_source_errors(tmp_path, cache):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="the corpus is empty"):
        prepare_data(
            DataConfig(source="text", paths=[str(tmp_path / "empty.txt")], vocab_size=260), V
        )
    (tmp_path / "one.txt").write_text("a single short document\n" * 10)
    with pytest.raises(ValueError, match="fell into the validation split"):
        prepare_data(
            DataConfig(source="text", paths=[str(tmp_path / "one.txt")], vocab_size=260), V
        )
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1\.txt is not UTF-8"):
        prepare_data(
            DataConfig(source="text", paths=[str(tmp_path / "latin1.txt")], vocab_size=260), V
        )
    (tmp_path / "big.txt").write_text(fake_module(1) * 40)
    with pytest.raises(ValueError, match="vocab_size=8000 needs 7743 BPE merges"):
        prepare_data(
            DataConfig(source="text", paths=[str(tmp_path / "big.txt")], vocab_size=8000), V
        )


@pytest.fixture
def offline_hf(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache", raising=False)


def test_hf_source_jsonl_and_saved(tmp_path, cache, offline_hf):
    import datasets

    rows = [{"body": fake_module(i), "id": i} for i in range(40)]
    jl = tmp_path / "docs.jsonl"
    jl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = prepare_data(
        DataConfig(
            source="hf", hf_name=str(jl), hf_text_field="body", vocab_size=280, val_fraction=0.1
        ),
        V,
    )
    assert p.directory.name.startswith("hf-") and p.n_val_tokens > 0
    assert (tokens_of(p.train_shards) == 279).sum() + (tokens_of(p.val_shards) == 279).sum() == 40

    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(saved))
    q = prepare_data(
        DataConfig(
            source="hf", paths=[str(saved)], hf_text_field="body", vocab_size=280, val_fraction=0.1
        ),
        V,
    )
    assert q.fingerprint == p.fingerprint  # same documents → same prepared corpus

    with pytest.raises(
        ValueError, match=r"data\.hf_text_field='text' is not a column .* \['body', 'id'\]"
    ):
        prepare_data(DataConfig(source="hf", hf_name=str(saved), vocab_size=280), V)
    with pytest.raises(ValueError, match=r"data\.hf_split='test' not in .* splits: \['train'\]"):
        prepare_data(
            DataConfig(source="hf", hf_name=str(saved), hf_split="test", vocab_size=280), V
        )


def test_shards_source(tmp_path, cache, monkeypatch):
    rng = np.random.default_rng(0)
    for name in ("c_train_000000.bin", "c_train_000001.bin", "c_val_000000.bin"):
        write_shard(tmp_path / name, rng.integers(0, 1000, 500))
    p = prepare_data(DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")]), 1000)
    assert [s.name for s in p.train_shards] == ["c_train_000000.bin", "c_train_000001.bin"]
    assert [s.name for s in p.val_shards] == ["c_val_000000.bin"]
    assert (p.n_train_tokens, p.n_val_tokens, p.vocab_size, p.tokenizer_path) == (
        1000,
        500,
        1000,
        None,
    )
    check_split_sizes(p, batch_size=4, seq_len=64)
    assert len(list((cache / "shard-index").glob("*.json"))) == 3
    real_max = prepare.max_token
    monkeypatch.setattr(prepare, "max_token", lambda f: pytest.fail(f"rescanned {f}"))
    assert prepare_data(DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")]), 1000) == p
    monkeypatch.setattr(prepare, "max_token", real_max)
    with pytest.raises(
        ValueError, match=r"c_train_00000\d\.bin holds token id 99\d >= vocab_size=900"
    ):
        prepare_data(DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")]), 900)
    with pytest.raises(
        ValueError, match=r"c_train_000000\.bin holds token id 99\d >= vocab_size=500"
    ):
        prepare_data(
            DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")], vocab_size=500), 1000
        )
    write_shard(tmp_path / "c_val_000000.bin", [5, 1200, 7])  # changed file: index refreshed
    with pytest.raises(
        ValueError, match=r"c_val_000000\.bin holds token id 1200 >= vocab_size=1000"
    ):
        prepare_data(DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")]), 1000)
    (tmp_path / "c_val_000000.bin").write_bytes(b"\1" * 2000)
    with pytest.raises(ValueError, match=r"c_val_000000\.bin has bad magic"):
        prepare_data(DataConfig(source="shards", paths=[str(tmp_path / "c_*.bin")]), 1000)


def test_interrupted_prepare_is_never_used(fake_stdlib, cache, monkeypatch):
    cfg = DataConfig(vocab_size=300)
    real_write = prepare.write_shard

    def dying_write(path, tokens):
        real_write(path, tokens)
        raise KeyboardInterrupt  # killed after the first shard

    monkeypatch.setattr(prepare, "write_shard", dying_write)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(cfg, V)
    assert [p.name for p in cache.iterdir() if p.is_dir()] == []  # work dir removed
    monkeypatch.setattr(prepare, "write_shard", real_write)
    p = prepare_data(cfg, V)
    # leftovers of a hard kill (SIGKILL: no cleanup) are swept on the next build
    (p.directory / "COMPLETE").unlink()
    stale = cache / f".tmp-{p.directory.name}-999-x"
    stale.mkdir()
    q = prepare_data(cfg, V)
    assert q == p and (q.directory / "COMPLETE").exists() and not stale.exists()


def test_the_stdlib_walk_prunes_installed_packages_and_the_estimate_stops_at_max_chars():
    """stdlib_files walks without entering site-packages; it must find exactly the files that
    filtering every .py under the lib folder finds (the definition it replaced), and the plan's
    size estimate may stop once data.max_chars is reached, never before."""
    from andrea.data.corpora import stdlib_files, stdlib_root
    from andrea.launch.sufficiency import _stdlib_chars

    root = stdlib_root()
    every = {
        p
        for p in root.rglob("*.py")
        if not {"site-packages", "dist-packages"} & set(p.relative_to(root).parts)
    }
    walked = list(stdlib_files(root))
    assert len(walked) == len(set(walked)) and set(walked) == every
    total = sum(p.stat().st_size for p in every)
    assert _stdlib_chars(root, None) == total
    biggest = max(p.stat().st_size for p in every)
    assert 400_000 <= _stdlib_chars(root, 400_000) < 400_000 + biggest


def test_the_plan_finds_a_prepared_corpus_in_the_cache_without_reading_it(
    tmp_path, cache, monkeypatch
):
    """plan=true said "estimated from its size; not tokenized yet" of a corpus already in the
    cache: it now finds it (andrea/data/cache_index.py) and gives its exact count, and an edited
    file makes it an estimate again."""
    from andrea.data import find_prepared
    from andrea.launch.sufficiency import estimate

    part = tmp_path / "part.txt"
    part.write_text("".join(fake_module(j) for j in range(24)))  # several 16k-char documents
    cfg = DataConfig(source="text", paths=[str(part)], vocab_size=280, val_fraction=0.3)
    assert find_prepared(cfg, V) is None
    assert estimate(cfg, V).exact is False  # never tokenized: an estimate
    p = prepare_data(cfg, V)
    monkeypatch.setattr(corpora, "documents", lambda *a: pytest.fail("read the corpus"))
    assert find_prepared(cfg, V) == p
    found = estimate(cfg, V)
    assert found.exact and found.train_tokens == p.n_train_tokens
    other = DataConfig(source="text", paths=[str(part)], vocab_size=290, val_fraction=0.3)
    assert find_prepared(other, V) is None  # another recipe: another corpus
    part.write_text(part.read_text() + "# one more line\n")
    assert find_prepared(cfg, V) is None and estimate(cfg, V).exact is False
