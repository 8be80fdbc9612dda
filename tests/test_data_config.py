import pytest

from andrea.data import DataConfig, resolve_cache_dir, validate_data_config, write_shard

V = 8449


def check(cfg, match, vocab=V):
    with pytest.raises(ValueError, match=match):
        validate_data_config(cfg, vocab)


def test_defaults_are_valid():
    validate_data_config(DataConfig(), V)
    validate_data_config(DataConfig(vocab_size=2049), V)


def test_hydra_structured_config():
    from omegaconf import OmegaConf

    cfg = OmegaConf.structured(DataConfig)
    cfg.paths.append("a.txt")
    assert OmegaConf.to_object(cfg).paths == ["a.txt"]


def test_source_and_numbers():
    check(DataConfig(source="web"), r"data\.source='web' is not one of stdlib, text, hf, shards")
    check(DataConfig(vocab_size=256), r"data\.vocab_size=256 .* must lie in 257\.\.65535")
    check(DataConfig(vocab_size=70000), r"data\.vocab_size=70000", vocab=70000)
    check(DataConfig(vocab_size=9000), r"data\.vocab_size=9000 exceeds the model's vocab_size=8449")
    check(DataConfig(), r"data\.vocab_size=70000", vocab=70000)  # null → the model's
    check(
        DataConfig(val_fraction=0.0), r"data\.val_fraction=0\.0 must lie strictly between 0 and 1"
    )
    check(DataConfig(val_fraction=1.0), r"data\.val_fraction=1\.0")
    check(DataConfig(max_chars=0), r"data\.max_chars=0 must be a positive")
    check(DataConfig(shard_tokens=0), r"data\.shard_tokens=0")


def test_stdlib_takes_no_paths():
    check(DataConfig(paths=["x.txt"]), r"source='stdlib'.*data\.paths=\['x\.txt'\]")


def test_text_paths(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    validate_data_config(DataConfig(source="text", paths=[str(tmp_path / "*.txt")]), V)
    check(DataConfig(source="text"), r"data\.paths is empty: source 'text'")
    check(
        DataConfig(source="text", paths=[str(tmp_path / "missing.txt")]),
        r"data\.paths: file '.*missing\.txt' does not exist",
    )
    check(
        DataConfig(source="text", paths=[str(tmp_path / "*.md")]),
        r"data\.paths: glob '.*\*\.md' matches no files",
    )
    check(DataConfig(source="text", paths=[str(tmp_path)]), r"is a directory; give files or a glob")


def test_shards_paths(tmp_path):
    write_shard(tmp_path / "d_train_000000.bin", [1, 2, 3])
    write_shard(tmp_path / "d_val_000000.bin", [1, 2, 3])
    validate_data_config(DataConfig(source="shards", paths=[str(tmp_path / "*.bin")]), V)
    validate_data_config(
        DataConfig(
            source="shards",
            paths=[str(tmp_path / "*train*.bin")],
            val_paths=[str(tmp_path / "d_val_000000.bin")],
        ),
        V,
    )
    # a folder (nanoGPT's data/<name>/) for shards: the example glob is of .bin files, not .txt
    for field in ("paths", "val_paths"):
        bad = {"paths": [str(tmp_path / "*.bin")], field: [str(tmp_path)]}
        check(
            DataConfig(source="shards", **bad),
            rf"data\.{field}: '.*' is a directory; give files or a glob such as '.*/\*\.bin'",
        )
    check(DataConfig(source="shards"), r"data\.paths is empty: source 'shards'")
    check(
        DataConfig(source="shards", paths=[str(tmp_path / "*train*.bin")]),
        r"data\.val_paths is empty and no shard .* has 'val' in its name",
    )
    check(
        DataConfig(source="shards", paths=[str(tmp_path / "*val*.bin")]),
        r"holds only validation shards",
    )
    check(
        DataConfig(
            source="shards", paths=[str(tmp_path / "*train*.bin")], val_paths=["nope/*.bin"]
        ),
        r"data\.val_paths: glob 'nope/\*\.bin' matches no files",
    )


def test_hf_location(tmp_path):
    validate_data_config(DataConfig(source="hf", hf_name="roneneldan/TinyStories"), V)
    check(DataConfig(source="hf"), r"source 'hf' needs data\.hf_name")
    check(
        DataConfig(source="hf", hf_name=str(tmp_path / "gone.jsonl")),
        r"looks like a local path but does not exist",
    )
    check(DataConfig(source="hf", hf_name="x/y", hf_split=""), r"data\.hf_split is empty")
    check(DataConfig(source="hf", hf_name="x/y", hf_text_field=""), r"data\.hf_text_field is empty")


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("ANDREA_DATA", str(tmp_path / "env"))
    assert resolve_cache_dir(None) == tmp_path / "env"
    assert resolve_cache_dir(str(tmp_path / "cfg")) == tmp_path / "cfg"
    monkeypatch.delenv("ANDREA_DATA")
    assert str(resolve_cache_dir(None)).endswith(".cache/andrea")
