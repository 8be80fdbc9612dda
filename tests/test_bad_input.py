"""Bad input, tabled: every user-facing input that can be wrong, and what the user is told.

Each case gives a wrong config key (type, range, combination), data source (missing, empty,
binary, too short, out of vocabulary) or analysis input (missing, failed, duplicated or garbage
results.json / CSV rows) and asserts that the message names the key or the file, the exit status
the command line gives it (2; None where the current code gives another, listed in the table as a
gap) and that nothing good is lost (the analysis still collects the good runs next to a bad one).
Fast: validation paths only (Hydra's compose API, resolve_run, prepare_data on tiny files,
analysis.inputs.collect), no training. Two command-line checks confirm the exit status 2 that
ConfigError and InputError become in `sweep.py -m` and `python -m analysis.fit`.

The table in docs/bad_input.md is written by this module:
    .venv/bin/python -m tests.test_bad_input docs/bad_input.md
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))


@dataclass(frozen=True)
class Case:
    id: str
    area: str  # config | data | analysis
    what: str  # the input, as the table shows it
    run: Callable[[Path], tuple[Optional[int], str]]  # -> (exit status it becomes, message)
    expect: tuple[str, ...]  # substrings the message must hold (the key or file named)
    exit: Optional[int] = 2  # None: an exit other than 2 (a gap, marked in the table)


# ---- config ------------------------------------------------------------------------------------


def config(*overrides: str, world_size: int = 1) -> Callable[[Path], tuple[Optional[int], str]]:
    """resolve_run on the composed config: a ConfigError is exit 2 in sweep.py (both modes);
    an unknown key is exit 2 with the nearest valid key, a value of the wrong type exit 2 with
    the type the key takes (sweep.py, andrea/config/overrides.py); any other Hydra composition error
    is Hydra's exit 1."""

    def run(tmp: Path) -> tuple[Optional[int], str]:
        from conftest import compose_run
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        from andrea.config.overrides import precheck
        from andrea.config.resolve import ConfigError, resolve_run

        hints = precheck(list(overrides))  # sweep.py's check before Hydra: exit 2
        if hints:
            return 2, " ".join(hints)
        try:
            resolve_run(compose_run(list(overrides)), world_size=world_size)
        except ConfigError as e:
            return 2, str(e)
        except (HydraException, OmegaConfBaseException) as e:
            from andrea.config.overrides import unknown_key_hints, wrong_type_hints

            # what sweep.py prints, exiting 2
            hints = unknown_key_hints(list(overrides)) + wrong_type_hints(list(overrides))
            if hints:
                return 2, " ".join(hints)
            return 1, " ".join(str(e).split())
        return 0, "(accepted)"

    return run


BASE = ["size=tiny-1"]
CONFIG_CASES = [
    Case(
        "block_size_zero",
        "config",
        "model=attnres_block model.block_size=0",
        config(*BASE, "model=attnres_block", "model.block_size=0"),
        ("model.block_size=0",),
    ),
    Case(
        "block_size_too_big",
        "config",
        "model=attnres_block model.block_size=9 (tiny-1: L=4)",
        config(*BASE, "model=attnres_block", "model.block_size=9"),
        ("model.block_size=9", "1..4"),
    ),
    Case(
        "block_size_on_baseline",
        "config",
        "model=baseline +model.block_size=4",
        config(*BASE, "model=baseline", "model.block_size=4"),
        ("model.block_size=4", "attnres_block"),
    ),
    Case(
        "block_size_wrong_type",
        "config",
        "model.block_size=four",
        config(*BASE, "model=attnres_block", "model.block_size=four"),
        ("model.block_size=four", "an integer"),
    ),
    Case(
        "lr_wrong_type",
        "config",
        "train.lr=fast",
        config(*BASE, "train.lr=fast"),
        ("train.lr=fast", "a number"),
    ),
    Case("lr_negative", "config", "train.lr=-1", config(*BASE, "train.lr=-1"), ("train.lr=-1",)),
    Case(
        "unknown_key",
        "config",
        "trian.lr=1 (typo)",
        config(*BASE, "trian.lr=1"),
        ("trian", "train.lr"),
    ),
    Case(
        "unknown_appended_key",
        "config",
        "+trian.lr=1 (Hydra's advice on a typo)",
        config(*BASE, "+trian.lr=1"),
        ("trian.lr", "did you mean train.lr"),
    ),
    Case(
        "unknown_size",
        "config",
        "size=tiny2 (typo)",
        config("size=tiny2"),
        ("size=tiny2", "did you mean size=tiny-2"),
    ),
    Case(
        "seq_len_over_context",
        "config",
        "train.seq_len=4096 (tiny-1: context 128)",
        config(*BASE, "train.seq_len=4096"),
        ("train.seq_len=4096", "context_length"),
    ),
    Case(
        "impossible_batch",
        "config",
        "train.batch_tokens=1000 train.seq_len=64",
        config(*BASE, "train.batch_tokens=1000", "train.seq_len=64"),
        ("batch_tokens=1000",),
    ),
    Case(
        "tokens_below_one_step",
        "config",
        "train.tokens=5",
        config(*BASE, "train.tokens=5"),
        ("train.tokens=5",),
    ),
    Case(
        "tokens_negative",
        "config",
        "train.tokens=-5",
        config(*BASE, "train.tokens=-5"),
        ("train.tokens=-5",),
    ),
    Case(
        "fused_depth_backend_on_cpu",
        "config",
        "model.depth_backend=fla train.device=cpu",
        config(*BASE, "model=attnres_full", "model.depth_backend=fla", "train.device=cpu"),
        ("model.depth_backend=fla", "no CUDA device", "auto"),
    ),
    Case(
        "depth_backend_that_cannot_run_this_width",
        "config",
        "model.depth_backend=flash_attn_res size=tiny-2 (d_model 48)",
        config("size=tiny-2", "model=attnres_full", "model.depth_backend=flash_attn_res"),
        ("model.depth_backend=flash_attn_res", "power of 2", "d_model=48", "fla, liger"),
    ),
    Case(
        "unknown_depth_backend",
        "config",
        "model.depth_backend=triton (no such backend)",
        config(*BASE, "model=attnres_full", "model.depth_backend=triton"),
        ("model.depth_backend='triton'", "flash_attn_res"),
    ),
    Case(
        "fsdp_world_size_not_dividing_the_model",
        "config",
        "train.parallel=fsdp on 3 processes (tiny-1: d_model 32)",
        config(*BASE, "train.parallel=fsdp", world_size=3),
        ("train.parallel=fsdp", "d_model=32", "multiple of 3"),
    ),
    Case(
        "fsdp_with_muon",
        "config",
        "train.parallel=fsdp train.optimizer=muon",
        config(*BASE, "train.parallel=fsdp", "train.optimizer=muon"),
        ("train.parallel=fsdp", "train.optimizer=adamw only"),
    ),
    Case(
        "parallel_unknown",
        "config",
        "train.parallel=zero3",
        config(*BASE, "train.parallel=zero3"),
        ("train.parallel='zero3'", "ddp, fsdp"),
    ),
    Case(
        "sweep_option_typo",
        "config",
        "sweep.througput=true (typo)",
        config(*BASE, "sweep.througput=true"),
        ("sweep.througput", "sweep.throughput"),
    ),
    Case(
        "aspect_no_shape",
        "config",
        "size=tiny-3 size.aspect=30 (n_layer 2 gives 39, 3 gives 21)",
        config("size=tiny-3", "size.aspect=30"),
        ("size.aspect=30", "yields no valid shape", "21.3 (n_layer=3)"),
    ),
    Case(
        "head_ratio_too_many_heads",
        "config",
        "size=tiny-3 size.aspect=16 size.head_ratio=5",
        config("size=tiny-3", "size.aspect=16", "size.head_ratio=5"),
        ("size.head_ratio=5 does not fit size.aspect=16", "below the smallest head_dim"),
    ),
    Case(
        "head_ratio_below_one_head",
        "config",
        "size=tiny-3 size.aspect=16 size.head_ratio=0.01",
        config("size=tiny-3", "size.aspect=16", "size.head_ratio=0.01"),
        ("size.head_ratio=0.01 does not fit", "n_head is at least 1"),
    ),
    Case(
        "shape_target_too_small",
        "config",
        "size.aspect=20 size.target_params=100",
        config(*BASE, "size.aspect=20", "size.target_params=100"),
        ("size.target_params=100", "too small for one layer"),
    ),
    Case(
        "schedule_unknown",
        "config",
        "train.schedule=linear",
        config(*BASE, "train.schedule=linear"),
        ("train.schedule='linear'", "cosine"),
    ),
    Case(
        "precision_unknown",
        "config",
        "train.precision=fp8",
        config(*BASE, "train.precision=fp8"),
        ("train.precision='fp8'",),
    ),
    Case(
        "device_unknown",
        "config",
        "train.device=tpu",
        config(*BASE, "train.device=tpu"),
        ("train.device='tpu'",),
    ),
    Case(
        "threads_zero",
        "config",
        "train.threads=0",
        config(*BASE, "train.threads=0"),
        ("train.threads=0", ">= 1"),
    ),
    Case(
        "warmup_out_of_range",
        "config",
        "train.warmup_frac=1.5",
        config(*BASE, "train.warmup_frac=1.5"),
        ("train.warmup_frac=1.5",),
    ),
    Case(
        "log_every_zero",
        "config",
        "train.log_every=0",
        config(*BASE, "train.log_every=0"),
        ("train.log_every=0",),
    ),
    Case(
        "keep_checkpoints_zero",
        "config",
        "train.keep_checkpoints=0",
        config(*BASE, "train.keep_checkpoints=0"),
        ("train.keep_checkpoints=0",),
    ),
    Case(
        "grad_clip_zero",
        "config",
        "train.grad_clip=0",
        config(*BASE, "train.grad_clip=0"),
        ("train.grad_clip=0",),
    ),
    Case(
        "optimizer_unknown",
        "config",
        "train.optimizer=sgd",
        config(*BASE, "train.optimizer=sgd"),
        ("train.optimizer='sgd'", "adamw, muon"),
    ),
    Case(
        "muon_adjust_lr_unknown",
        "config",
        "train.optimizer=muon train.muon.adjust_lr=spectral",
        config(*BASE, "train.optimizer=muon", "train.muon.adjust_lr=spectral"),
        ("train.muon.adjust_lr='spectral'", "match_rms_adamw"),
    ),
    Case(
        "muon_momentum_one",
        "config",
        "train.optimizer=muon train.muon.momentum=1",
        config(*BASE, "train.optimizer=muon", "train.muon.momentum=1"),
        ("train.muon.momentum=1",),
    ),
    Case(
        "muon_setting_under_adamw",
        "config",
        "train.muon.ns_steps=3 (optimizer adamw)",
        config(*BASE, "train.muon.ns_steps=3"),
        ("train.muon.ns_steps=3", "train.optimizer=muon"),
    ),
    Case(
        "muon_typo",
        "config",
        "train.muon.nesterow=false (typo)",
        config(*BASE, "train.muon.nesterow=false"),
        ("train.muon.nesterov",),
    ),
    Case(
        "wandb_mode_unknown",
        "config",
        "wandb.mode=sometimes",
        config(*BASE, "wandb.mode=sometimes"),
        ("wandb.mode", "sometimes"),
    ),
    Case(
        "wandb_timeout_zero",
        "config",
        "wandb.init_timeout_s=0",
        config(*BASE, "wandb.init_timeout_s=0"),
        ("wandb.init_timeout_s",),
    ),
    Case(
        "data_source_unknown",
        "config",
        "data.source=web",
        config(*BASE, "data.source=web"),
        ("data.source='web'",),
    ),
    Case(
        "data_vocab_over_model",
        "config",
        "data.vocab_size=100000 (model 2049)",
        config(*BASE, "data.vocab_size=100000"),
        ("data.vocab_size=100000",),
    ),
    Case(
        "data_val_fraction_zero",
        "config",
        "data.val_fraction=0",
        config(*BASE, "data.val_fraction=0"),
        ("data.val_fraction=0",),
    ),
    Case(
        "data_max_chars_zero",
        "config",
        "data.max_chars=0",
        config(*BASE, "data.max_chars=0"),
        ("data.max_chars=0",),
    ),
    Case(
        "stdlib_with_paths",
        "config",
        "data.source=stdlib data.paths=[a.txt]",
        config(*BASE, "data.paths=[a.txt]"),
        ("data.paths",),
    ),
    Case(
        "text_without_paths",
        "config",
        "data.source=text (no data.paths)",
        config(*BASE, "data.source=text"),
        ("data.paths is empty",),
    ),
    Case(
        "text_missing_file",
        "config",
        "data.source=text data.paths=[/nonexistent.txt]",
        config(*BASE, "data.source=text", "data.paths=[/nonexistent/corpus.txt]"),
        ("data.paths", "/nonexistent/corpus.txt", "does not exist"),
    ),
    Case(
        "text_empty_glob",
        "config",
        "data.source=text data.paths=['/nonexistent/*.txt']",
        config(*BASE, "data.source=text", "data.paths=[/nonexistent/*.txt]"),
        ("data.paths", "matches no files"),
    ),
    Case(
        "shards_without_val",
        "config",
        "data.source=shards data.paths=[train.bin] (no val)",
        lambda tmp: config(*BASE, "data.source=shards", f"data.paths=[{_shard(tmp, 'train.bin')}]")(
            tmp
        ),
        ("data.val_paths is empty",),
    ),
    Case(
        "plan_mfu_over_one",
        "config",
        "plan_mfu=1.5",
        config(*BASE, "plan_mfu=1.5"),
        ("plan_mfu=1.5", "(0, 1]"),
    ),
    Case(
        "plan_gpu_unknown",
        "config",
        "plan_gpu=H200x",
        config(*BASE, "plan_gpu=H200x"),
        ("plan_gpu='H200x' is not a GPU andrea knows", "H100 SXM"),
    ),
    Case(
        "seed_sweep_empty_value",
        "config",
        "train.seed=0,,1",
        config(*BASE, "train.seed=0,,1"),
        ("train.seed=0,,1", "single commas"),
    ),
    Case(
        "out_dir_non_ascii",
        "config",
        "out_dir=/tmp/résumé (unquoted)",
        config(*BASE, "out_dir=/tmp/résumé"),
        ("out_dir=/tmp/résumé", "ASCII", "\"out_dir='/tmp/résumé'\""),
    ),
    Case(
        "out_dir_comma",
        "config",
        "out_dir=/tmp/a,b (unquoted)",
        config(*BASE, "out_dir=/tmp/a,b"),
        ("out_dir=/tmp/a,b", "a sweep over out_dir", "\"out_dir='/tmp/a,b'\""),
    ),
    Case(
        "text_path_split_at_a_comma",
        "config",
        "data.source=text data.paths=[<tmp>/a,b.txt] (unquoted: two paths)",
        lambda tmp: config(*BASE, "data.source=text", f"data.paths=[{_comma_file(tmp)}]")(tmp),
        ("does not exist", "a,b.txt' exists", "quote the path"),
    ),
]


def _comma_file(tmp: Path) -> Path:
    (tmp / "a,b.txt").write_text("some text\n")
    return tmp / "a,b.txt"


# ---- data (shows in prepare_data: in the job, in the sweeper) --------------------------


def data(source: str, files: dict[str, bytes], vocab: int = 300, **cfg) -> Callable:
    def run(tmp: Path) -> tuple[Optional[int], str]:
        from andrea.data import DataConfig, prepare_data

        paths = []
        for name, content in files.items():
            (tmp / name).write_bytes(content)
            paths.append(str(tmp / name))
        c = DataConfig(
            source=source,
            cache_dir=str(tmp / "cache"),
            **cfg,
            **(
                {
                    "paths": [p for p in paths if "val" not in Path(p).name],
                    "val_paths": [p for p in paths if "val" in Path(p).name],
                }
                if source == "shards"
                else {"paths": paths}
            ),
        )
        try:
            prepare_data(c, vocab)
        except ValueError as e:
            return 2, str(e)
        return 0, "(accepted)"

    return run


def _shard(tmp: Path, name: str, tokens=(1, 2, 3)) -> Path:
    from andrea.data import write_shard

    path = tmp / name
    write_shard(path, __import__("numpy").asarray(tokens, dtype="uint16"))
    return path


def shards(train_tokens, val_tokens, vocab: int = 300) -> Callable:
    def run(tmp: Path) -> tuple[Optional[int], str]:
        from andrea.data import DataConfig, prepare_data

        t, v = _shard(tmp, "train.bin", train_tokens), _shard(tmp, "val.bin", val_tokens)
        try:
            prepare_data(
                DataConfig(
                    source="shards",
                    paths=[str(t)],
                    val_paths=[str(v)],
                    cache_dir=str(tmp / "cache"),
                ),
                vocab,
            )
        except ValueError as e:
            return 2, str(e)
        return 0, "(accepted)"

    return run


def too_short(tmp: Path) -> tuple[Optional[int], str]:
    from andrea.data import DataConfig, check_split_sizes, prepare_data

    # ~50k characters: a few 16k-character documents, far fewer tokens than one batch of 512 x 128
    (tmp / "small.txt").write_text(
        "".join(f"line {i}: the quick brown fox {i * 7919 % 1000}\n" for i in range(1500))
    )
    p = prepare_data(
        DataConfig(
            source="text",
            paths=[str(tmp / "small.txt")],
            val_fraction=0.3,
            cache_dir=str(tmp / "cache"),
        ),
        300,
    )
    try:
        check_split_sizes(p, 512, 128, 1)
    except ValueError as e:
        return 2, str(e)
    return 0, "(accepted)"


DATA_CASES = [
    Case(
        "text_empty_file",
        "data",
        "data.source=text, an empty file",
        data("text", {"empty.txt": b""}),
        ("data.source='text'", "empty.txt", "empty"),
    ),
    Case(
        "text_binary_file",
        "data",
        "data.source=text, a binary (non-UTF-8) file",
        data("text", {"blob.txt": bytes(range(256)) * 8}),
        ("blob.txt", "not UTF-8"),
    ),
    Case(
        "text_one_line",
        "data",
        "data.source=text, one short line",
        data("text", {"one.txt": b"hi\n"}),
        ("data.val_fraction",),
    ),
    Case(
        "text_too_short_for_a_batch",
        "data",
        "a corpus smaller than one batch (512 x 128 tokens)",
        too_short,
        ("batch",),
    ),
    Case(
        "shards_out_of_vocabulary",
        "data",
        "data.source=shards with token id 5000 >= vocab 300",
        shards((1, 2, 5000), (1, 2, 3)),
        ("train.bin", "5000", "vocab_size=300", "size.vocab_size=5001 or more"),
    ),
    Case(
        "shards_empty",
        "data",
        "data.source=shards, an empty train shard",
        shards((), (1, 2, 3)),
        ("train.bin", "empty"),
    ),
    Case(
        "shards_garbage",
        "data",
        "data.source=shards, a file that is not a shard",
        lambda tmp: _garbage_shard(tmp),
        ("train.bin",),
    ),
]


def _garbage_shard(tmp: Path) -> tuple[Optional[int], str]:
    from andrea.data import DataConfig, prepare_data

    (tmp / "train.bin").write_bytes(b"this is not a token shard at all" * 4)
    v = _shard(tmp, "val.bin")
    try:
        prepare_data(
            DataConfig(
                source="shards",
                paths=[str(tmp / "train.bin")],
                val_paths=[str(v)],
                cache_dir=str(tmp / "cache"),
            ),
            300,
        )
    except ValueError as e:
        return 2, str(e)
    return 0, "(accepted)"


# ---- analysis (python -m analysis.fit) -----------------------------------------------------------

GOOD = {
    "status": "completed",
    "variant": "baseline",
    "label": "baseline",
    "size": "tiny-1",
    "seed": 0,
    "flops": 1e12,
    "val_loss": 3.0,
    "params": 1000,
    "tokens": 1000,
}


def run_dir(root: Path, name: str, results=None, raw: Optional[str] = None) -> Path:
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    if raw is not None:
        (d / "results.json").write_text(raw)
    elif results is not None:
        (d / "results.json").write_text(json.dumps(results))
    return d


def analysis(make: Callable[[Path], list[Path]], section: str) -> Callable:
    """The analysis's collection over `make`'s inputs plus one good run: the bad one must be
    listed (in `section`) with its file, the good one still collected."""

    def run(tmp: Path) -> tuple[Optional[int], str]:
        from analysis.inputs.collect import InputError, collect

        good = run_dir(tmp / "sweep", "good", GOOD)
        try:
            coll = collect([*make(tmp), good])
        except InputError as e:
            return 2, str(e)
        assert len(coll.runs) >= 1, "the good run was lost"
        listed = getattr(coll, section)
        return 0, "; ".join(f"{src}: {why}" for src, why in listed) or "(nothing listed)"

    return run


def csv_file(text: str) -> Callable[[Path], list[Path]]:
    def make(tmp: Path) -> list[Path]:
        (tmp / "runs.csv").write_text(text)
        return [tmp / "runs.csv"]

    return make


ANALYSIS_CASES = [
    Case(
        "analysis_missing_path",
        "analysis",
        "a sweep folder that does not exist",
        analysis(lambda tmp: [tmp / "no_such_sweep"], "invalid"),
        ("no_such_sweep", "no such file"),
    ),
    Case(
        "analysis_failed_run",
        "analysis",
        "a run whose results.json says failed",
        analysis(
            lambda tmp: [
                run_dir(
                    tmp / "s", "bad", {**GOOD, "status": "failed", "error": "TrainingFailed: nan"}
                )
            ],
            "failed",
        ),
        ("bad", "TrainingFailed: nan"),
        0,
    ),
    Case(
        "analysis_truncated_json",
        "analysis",
        "a half-written results.json",
        analysis(lambda tmp: [run_dir(tmp / "s", "torn", raw='{"status": "compl')], "invalid"),
        ("torn", "not valid JSON"),
        0,
    ),
    Case(
        "analysis_json_not_an_object",
        "analysis",
        "a results.json holding [1, 2, 3]",
        analysis(lambda tmp: [run_dir(tmp / "s", "list", raw="[1, 2, 3]")], "invalid"),
        ("list",),
        0,
    ),
    Case(
        "analysis_missing_val_loss",
        "analysis",
        "a completed results.json without val_loss",
        analysis(
            lambda tmp: [
                run_dir(tmp / "s", "noloss", {k: v for k, v in GOOD.items() if k != "val_loss"})
            ],
            "invalid",
        ),
        ("noloss", "val_loss"),
        0,
    ),
    Case(
        "analysis_nan_loss",
        "analysis",
        "a results.json with val_loss NaN",
        analysis(
            lambda tmp: [run_dir(tmp / "s", "nan", raw=json.dumps({**GOOD, "val_loss": "NaN"}))],
            "invalid",
        ),
        ("nan", "val_loss"),
        0,
    ),
    Case(
        "analysis_no_results_yet",
        "analysis",
        "a run folder without results.json",
        analysis(lambda tmp: [run_dir(tmp / "s", "unfinished")], "running"),
        ("unfinished",),
        0,
    ),
    Case(
        "analysis_duplicated_run",
        "analysis",
        "the same run given twice (folder and its results.json)",
        lambda tmp: _duplicated(tmp),
        ("dup", "found twice, each counted once"),
        0,
    ),
    Case(
        "analysis_run_twice_with_other_results",
        "analysis",
        "the same run in a sweep and its copy, with another val_loss",
        analysis(
            lambda tmp: [
                run_dir(tmp / "s", "r", GOOD).parent,
                run_dir(tmp / "copy", "r", {**GOOD, "val_loss": 3.5}).parent,
            ],
            "invalid",
        ),
        ("s/r and ", "copy/r are one run", "val_loss 3.0 vs 3.5"),
    ),
    Case(
        "analysis_csv_missing_columns",
        "analysis",
        "a CSV without the val_loss column",
        analysis(csv_file("variant,size,flops\nbaseline,tiny-1,1e12\n"), "invalid"),
        ("runs.csv", "val_loss"),
    ),
    Case(
        "analysis_csv_garbage_row",
        "analysis",
        "a CSV row with flops=abc",
        analysis(csv_file("variant,size,flops,val_loss\nbaseline,tiny-1,abc,3.0\n"), "invalid"),
        ("runs.csv line 2", "flops='abc'"),
        0,
    ),
    Case(
        "analysis_csv_failed_row",
        "analysis",
        "a CSV row with status=failed",
        analysis(
            csv_file("variant,size,flops,val_loss,status\nbaseline,tiny-1,1e12,3.0,failed\n"),
            "failed",
        ),
        ("runs.csv line 2", "failed"),
        0,
    ),
    Case(
        "analysis_csv_binary",
        "analysis",
        "a binary file named .csv",
        analysis(lambda tmp: [_write(tmp / "blob.csv", bytes(range(256)) * 4)], "invalid"),
        ("blob.csv",),
    ),
    Case(
        "analysis_not_results_json",
        "analysis",
        "a .json input that is not results.json",
        analysis(lambda tmp: [_write(tmp / "other.json", b"{}")], "invalid"),
        ("other.json", "results.json"),
    ),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _duplicated(tmp: Path) -> tuple[Optional[int], str]:
    from analysis.inputs.collect import aggregate, collect

    d = run_dir(tmp / "s", "dup", GOOD)
    coll = collect([tmp / "s", d / "results.json"])
    _, warnings = aggregate(coll.runs)
    assert len(coll.runs) == 1 and not warnings, "the run was counted twice"
    return 0, coll.duplicate_note() or "(no note)"


def next_runs_pool(pool: str, *argv: str) -> Callable[[Path], tuple[Optional[int], str]]:
    """`python -m analysis.next_runs --pool POOL --target TARGET ...`: (exit status, stderr)."""

    def run(tmp: Path) -> tuple[Optional[int], str]:
        import contextlib
        import io

        from analysis.next_runs import main

        (tmp / "pool.csv").write_text(pool)
        (tmp / "target.csv").write_text("params,tokens\n1e9,2e10\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(
                ["--pool", str(tmp / "pool.csv"), "--target", str(tmp / "target.csv"), *argv]
            )
        return code, err.getvalue().strip()

    return run


# a Chinchilla world measured at 3 sizes x 3 token budgets (with 1 % of run noise), and 3
# candidates at a 4th size
_POOL = "params,tokens,cost,loss\n" + "".join(
    f"{n:g},{n * t:g},{6 * n * n * t / 3.6e18:g},"
    + (
        f"{(1.7 + 400 * n**-0.34 + 410 * (n * t) ** -0.28) * (1 + 0.01 * math.sin(7 * n * t)):.5f}"
        if n < 3e8
        else ""
    )
    + "\n"
    for n in (1e7, 3e7, 1e8, 3e8)
    for t in (5, 20, 80)
)
POOL_CASES = [
    Case(
        "next_runs_pool_no_cost",
        "analysis",
        "next_runs --pool: a pool without a cost column",
        next_runs_pool("params,tokens,loss\n1e7,1e8,3.0\n", "--gpu-hours", "1"),
        ("pool.csv", "missing cost"),
    ),
    Case(
        "next_runs_pool_garbage",
        "analysis",
        "next_runs --pool: a pool row with params=abc",
        next_runs_pool("params,tokens,cost\nabc,1e8,1\n", "--gpu-hours", "1"),
        ("pool.csv", "row 2", "params"),
    ),
    *[
        Case(
            f"next_runs_pool_{kind}_loss",
            "analysis",
            f"next_runs --pool: a pool row with loss={v}",
            next_runs_pool(f"params,tokens,cost,loss\n1e7,1e8,1,{v}\n", "--gpu-hours", "1"),
            ("pool.csv", "row 2", "column loss", f"'{v}'"),
        )
        for kind, v in (("bad", "abc"), ("negative", "-3"))
    ],
    Case(
        "next_runs_pool_law_inputs",
        "analysis",
        "next_runs --pool --law data_constrained: a pool without unique_tokens",
        next_runs_pool(_POOL, "--gpu-hours", "1", "--law", "data_constrained"),
        ("pool.csv", "law data_constrained needs", "missing unique_tokens"),
    ),
    Case(
        "next_runs_pool_zero_budget",
        "analysis",
        "next_runs --pool with --gpu-hours 0",
        next_runs_pool(_POOL, "--gpu-hours", "0"),
        ("--gpu-hours > 0",),
    ),
    Case(
        "next_runs_pool_unreachable",
        "analysis",
        "next_runs --pool: a --target-half-width the budget cannot reach",
        next_runs_pool(_POOL, "--gpu-hours", "1", "--target-half-width", "1e-5"),
        ("reaches ±", "at best"),
    ),
]

CASES = CONFIG_CASES + DATA_CASES + ANALYSIS_CASES + POOL_CASES


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_is_named_in_a_clear_message(case, tmp_path, data_cache):
    code, message = case.run(tmp_path)
    assert code != 0 or case.exit == 0, f"{case.what}: accepted without a message"
    for part in case.expect:
        assert part in message, f"{case.what}: {part!r} not in {message!r}"
    assert "Traceback" not in message
    if case.exit is not None:
        assert code == case.exit, f"{case.what}: exit {code}, expected {case.exit}: {message}"


# ---- the command line turns these into exit 2 (one subprocess each) ------------------------------


def _plan_sweep(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    """`python sweep.py -m out_dir=<tmp>/runs size=tiny-1 OVERRIDES plan=true`."""
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            "-m",
            f"out_dir={tmp_path / 'runs'}",
            "size=tiny-1",
            *overrides,
            "plan=true",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_bad_key_in_a_sweep_exits_2_before_anything_runs(tmp_path, data_cache):
    out = _plan_sweep(tmp_path, "model=attnres_block", "model.block_size=0,2")
    assert out.returncode == 2, out.stderr[-2000:]
    assert "model.block_size=0" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("results.json"))


def test_an_unknown_plan_gpu_is_one_error_line_as_next_runs_gpu_is(tmp_path, capsys):
    """plan_gpu=H200x printed a note, then 0 GPU-hours, and exited 0, where analysis.next_runs
    --gpu H100x was an error: both ask andrea.run.units.gpu_problem now."""
    from analysis.inputs.synthetic import power_law, simulate_runs, write_runs
    from analysis.next_runs import main

    out = _plan_sweep(tmp_path, "model=baseline", "plan_gpu=H200x")
    err = [x for x in out.stderr.splitlines() if x.strip()]
    assert out.returncode == 2 and len(err) == 1, out.stderr[-2000:]
    assert err[0].startswith("error: plan_gpu='H200x' is not a GPU andrea knows; known: H100 SXM")
    assert "T4" in err[0]  # a known GPU without a bf16 peak plans (the plan notes its hours)
    runs = simulate_runs(
        {"baseline": power_law(3.0, 0.07), "v": power_law(3.0, 0.07)}, (1, 2), (0,)
    )
    write_runs(tmp_path / "s", runs)
    assert main([str(tmp_path / "s"), "--gpu-hours", "1", "--gpu", "H100x"]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: --gpu 'H100x' is not a GPU andrea knows the bf16 peak of")


def test_an_appended_typo_in_a_single_run_exits_2_with_one_line_first(tmp_path, data_cache):
    """Hydra's advice `+trian.lr=1` trained a run (rc 0) that ignored the typo."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            f"out_dir={tmp_path / 'runs'}",
            "size=tiny-1",
            "+trian.lr=1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr == "error: unknown key 'trian.lr' (did you mean train.lr?)\n", out.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "mode,bad,kind",
    [
        (["-m"], "train.lr=fast", "a number"),
        ([], "plan=ture", "true or false"),
        (["-m"], "model.mhc_streams=two", "an integer"),
        ([], "size.aspect=abc", "a number"),
        (["-m"], "train.seed=0,x", "an integer"),
    ],
)
def test_a_value_of_the_wrong_type_exits_2_with_one_line(tmp_path, data_cache, mode, bad, kind):
    """One `error:` line, as for every other bad input: Hydra's own block (the message, the
    full key, the object type, the HYDRA_FULL_ERROR advice) came first."""
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            *mode,
            f"out_dir={tmp_path / 'runs'}",
            "size=tiny-1",
            bad,
            "model=mhc",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    key, _, value = bad.partition("=")
    value = value.split(",")[-1]
    assert out.stderr == f"error: {key}={value}: {key} takes {kind}\n", out.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


# ---- sweep.py in this process: what is refused before any corpus is prepared ----------------


def sweep_here(tmp: Path, monkeypatch, capsys, *argv: str) -> tuple[int, list[str]]:
    """`python sweep.py ARGV` run in this process (a subprocess costs ~8 s of imports): its exit
    status and its stderr's lines. Preparing a corpus or training fails the test: each input
    here must be refused before either."""
    import logging
    import runpy

    import andrea.launch.sufficiency
    import andrea.train

    def heavy(*args, **kwargs):
        raise AssertionError("heavy work began before the bad input was refused")

    monkeypatch.setattr(andrea.launch.sufficiency, "prepare_corpora", heavy)
    monkeypatch.setattr(andrea.train, "train", heavy)
    monkeypatch.setattr(sys, "argv", ["sweep.py", *argv, f"out_dir={tmp / 'runs'}"])
    monkeypatch.setenv("ANDREA_DATA", str(tmp / "data"))
    handlers, level = logging.root.handlers[:], logging.root.level  # Hydra configures logging
    try:
        with pytest.raises(SystemExit) as ended:
            runpy.run_path(str(REPO / "sweep.py"), run_name="__main__")
    finally:
        from hydra.core.global_hydra import GlobalHydra

        logging.root.handlers[:], logging.root.level = handlers, level
        GlobalHydra.instance().clear()  # as an in-process compose leaves it for the next test
    assert not list(tmp.rglob("results.json")) and not (tmp / "data").exists()
    return ended.value.code, capsys.readouterr().err.splitlines()


UNREACHABLE_RAY = ["hydra/launcher=ray", "hydra.launcher.address=http://127.0.0.1:9"]


@pytest.mark.parametrize(
    "argv,expect",
    [
        # the engine's check came after the corpus was prepared (minutes on a real corpus)
        (
            ["-m", "model=baseline", "size=tiny-1", *UNREACHABLE_RAY],
            "hydra.launcher.address=http://127.0.0.1:9: no Ray cluster answers there",
        ),
        # without -m, Hydra's run mode trained here and ignored the launcher and the pack: they
        # go to the sweeper, as with -m (as plan=true does)
        (
            ["model=baseline", "size=tiny-1", *UNREACHABLE_RAY],
            "hydra.launcher.address=http://127.0.0.1:9: no Ray cluster answers there",
        ),
        (
            ["model=baseline", "size=tiny-1", "launch.pack=2"],
            "launch.pack=2: the in-process launcher runs one run per job",
        ),
        # refused before the address is asked (nothing listens there)
        (
            [
                "-m",
                "model=baseline",
                "size=tiny-1",
                *UNREACHABLE_RAY,
                "hydra.launcher.max_in_flight=0",
            ],
            "hydra.launcher.max_in_flight=0: give an integer >= 1",
        ),
        # an invalid job of a sweep: it printed the error line, then two more lines (its
        # overrides, its reason)
        (
            ["-m", "model=attnres_block", "size=tiny-1", "model.block_size=9", "plan=true"],
            "jobs are invalid; nothing was launched: [size=tiny-1 model=attnres_block_s9] "
            "model.block_size=9 does not fit",
        ),
    ],
    ids=[
        "ray_unreachable",
        "ray_without_-m",
        "pack_without_-m",
        "ray_max_in_flight_0",
        "invalid_job_in_a_sweep",
    ],
)
def test_a_bad_sweep_is_one_error_line_before_any_corpus_is_prepared(
    tmp_path, monkeypatch, capsys, argv, expect
):
    code, err = sweep_here(tmp_path, monkeypatch, capsys, *argv)
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("error: ") and expect in err[0], err


def test_a_ray_address_where_nothing_listens_is_refused_in_a_bounded_time(monkeypatch):
    """The engine's check probes the address with one TCP connect (CONNECT_TIMEOUT_S) before
    Ray's client is asked: Ray's client waited ~30 s at a ray:// address nobody answered. The
    refusal must come from the probe, Ray's client never asked (no wall-clock limit here: a
    busy machine would fail one)."""
    import importlib.util
    import socket

    from andrea.config.resolve import ConfigError
    from andrea.launch import ray

    def asked(*args, **kwargs):
        raise AssertionError("Ray's client was asked: the TCP probe did not refuse first")

    monkeypatch.setattr(ray, "_ask", asked)
    monkeypatch.setattr(ray, "_statuses", asked)

    assert ray.endpoint("http://10.0.0.5:8265") == ("10.0.0.5", 8265)
    assert ray.endpoint("ray://head") == ("head", 10001) and ray.endpoint("head:1") == ("head", 1)
    assert ray.endpoint("auto") is None and ray.endpoint("anyscale://cluster") is None
    assert ray.effective_address("auto", {"RAY_ADDRESS": "ray://h:1"}) == "ray://h:1"
    assert ray.effective_address("ray://a:1", {}) == "ray://a:1"
    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        for address in (f"ray://127.0.0.1:{port}", f"http://127.0.0.1:{port}"):
            with pytest.raises(ConfigError) as refused:
                ray.check({"address": address}, env={})
            message = str(refused.value)
            if importlib.util.find_spec("ray") is None:
                assert "pip install -e '.[ray]'" in message
            else:
                assert message.startswith(f"hydra.launcher.address={address}: no Ray cluster")
                assert f"127.0.0.1:{port}: " in message and "\n" not in message
        # a recorded job at a cluster that is gone holds nothing, known from the probe alone
        assert ray.live_jobs([f"andrea-0123@ray://127.0.0.1:{port}"]) == {}


def _read_only(folder: Path) -> Optional[Callable[[], None]]:
    """Make `folder` unwritable for this process (chmod, or for root the immutable flag);
    returns how to undo it, None when this machine cannot."""
    import os

    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        undo = lambda: folder.chmod(0o755)  # noqa: E731
    elif subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0:
        undo = lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)  # noqa: E731
    else:
        return None
    try:
        (folder / "probe").mkdir()
    except OSError:
        return undo
    (folder / "probe").rmdir()
    undo()
    return None


@pytest.mark.parametrize("multirun", [[], ["-m"]], ids=["one_run", "sweep"])
def test_an_out_dir_that_cannot_be_written_is_one_line_before_anything_starts(
    tmp_path, monkeypatch, capsys, multirun
):
    """A read-only out_dir ended in Hydra's traceback (exit 1) as it created the run folder; a
    file in its place likewise. Now one `error:` line, exit 2, before any folder is made."""
    (tmp_path / "afile").write_text("")  # sweep_here's out_dir is <its folder>/runs
    code, err = sweep_here(tmp_path / "afile", monkeypatch, capsys, *multirun, "size=tiny-1")
    assert (code, err) == (
        2,
        [f"error: out_dir={tmp_path}/afile/runs: {tmp_path}/afile is a file, not a folder"],
    )
    undo = _read_only(tmp_path / "ro")
    if undo is None:
        pytest.skip("no way to make a folder read-only for this user here")
    try:
        code, err = sweep_here(tmp_path / "ro", monkeypatch, capsys, *multirun, "size=tiny-1")
    finally:
        undo()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: out_dir={tmp_path}/ro/runs: {tmp_path}/ro is not writable")
    assert not (tmp_path / "ro" / "runs").exists()


def test_a_full_disk_is_one_line_naming_the_file_and_nothing_is_half_written(tmp_path, data_cache):
    """A full disk printed Hydra's traceback and, when results.json could not be written either,
    a second one chained to it. Every write here fails as a full disk fails (fsync: ENOSPC)."""
    import os

    from conftest import TINY_RUN, compose_run

    from andrea.config.resolve import resolve_run
    from andrea.data import prepare_data

    spec = resolve_run(compose_run(TINY_RUN))
    prepare_data(spec.data, spec.model.vocab_size)  # the corpus is in the cache: no write there
    code = (
        "import errno, os, runpy, sys\n"
        "def full(fd): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "os.fsync = full\n"
        f"sys.argv = ['sweep.py', *{TINY_RUN!r}, 'out_dir={tmp_path}/runs']\n"
        f"runpy.run_path({str(REPO / 'sweep.py')!r}, run_name='__main__')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "ANDREA_DATA": str(data_cache)},
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert lines[0].startswith("error: No space left on device writing " + str(tmp_path / "runs"))
    assert "run the same command again to resume" in lines[0]
    written = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()]
    assert not [p for p in written if p.name.endswith(".tmp")]  # nothing half-written
    assert not [p for p in written if p.name == "results.json"]  # it could not be written


def test_ray_jobs_in_flight_are_capped_by_what_the_cluster_can_start(tmp_path, monkeypatch):
    """hydra.launcher.max_in_flight: as given (an integer >= 1, else one ConfigError line),
    else derived from the cluster's resources (GPUs // gpus_per_task for GPU jobs, CPUs //
    cpus_per_task otherwise, at least 1), else the stated fallback; a job held back by a live
    sweep process is held (a later launch must not submit it), one whose sweep ended is not."""
    import os

    from andrea.config.resolve import ConfigError
    from andrea.launch import ray

    two_cpus = {"CPU": 2.0, "GPU": 0.0}
    assert ray.in_flight_cap(None, 1, 0, two_cpus) == (2, "the cluster's 2 CPUs // cpus_per_task=1")
    assert ray.in_flight_cap(None, None, 0, {"CPU": 16.0, "GPU": 0.0})[0] == 16
    assert ray.in_flight_cap(None, 3, 0, {"CPU": 16.0, "GPU": 0.0})[0] == 5
    assert ray.in_flight_cap(None, 4, 0, two_cpus)[0] == 1  # a job bigger than the cluster
    assert ray.in_flight_cap(None, 8, 2, {"CPU": 64.0, "GPU": 8.0}) == (
        4,
        "the cluster's 8 GPUs // gpus_per_task=2",
    )
    assert ray.in_flight_cap(3, 1, 0, two_cpus) == (3, "hydra.launcher.max_in_flight=3")
    cap, why = ray.in_flight_cap(None, 1, 0, None, "no answer within 20 s")
    assert cap == ray.FALLBACK_IN_FLIGHT and "no answer within 20 s" in why
    for bad in (0, -1, "2", 1.5, True):
        with pytest.raises(ConfigError) as refused:
            ray.check({"address": "http://127.0.0.1:9", "max_in_flight": bad}, env={})
        message = str(refused.value)
        assert message.startswith(f"hydra.launcher.max_in_flight={bad}: give an integer >= 1")
        assert "\n" not in message
    ray.check_max_in_flight(None)
    ray.check_max_in_flight(1)

    # held back by this (live) process: held; by a process that ended: free (nothing in Ray)
    job = ray.RayJob("http://127.0.0.1:9", "andrea-0123abcd", Path("x.call"), request={})
    assert job.held and ray.state(job) == "HELD" and "+held-by-" in job.job_id
    assert ray.live_jobs([job.job_id]) == {job.job_id: "HELD"}
    dead = job.job_id.replace(f"-by-{os.getpid()}-", "-by-999999999-")
    assert ray.live_jobs([dead]) == {}
    text = ray.detached_text([job.job_id, "andrea-00ff@http://127.0.0.1:9"], "runs")
    assert "ray job stop andrea-00ff --address" in text and "held-by" not in text
    assert "1 more job(s) were held back by this sweep" in text and "NOT in Ray" in text

    # the throttle, against a stand-in for Ray's job client: 3 jobs, cap 1; each poll submits a
    # held job once the one in Ray has ended, and its id becomes Ray's
    in_ray: dict[str, str] = {}

    class Client:
        def submit_job(self, submission_id, **request):
            in_ray[submission_id] = "PENDING"

    def statuses(address):
        return dict(in_ray)

    monkeypatch.setattr(ray, "client", lambda address: Client())
    monkeypatch.setattr(ray, "_statuses", statuses)
    monkeypatch.setattr(ray, "_THROTTLES", {})
    jobs = ray.submit(
        print, [()] * 3, {"address": "a", "max_in_flight": 1, "submitit_folder": tmp_path}
    )
    assert [j.held for j in jobs] == [False, True, True] and len(in_ray) == 1
    for n in (2, 3):
        ray.refresh(jobs)  # the one in Ray still pending: nothing more submitted
        assert len(in_ray) == n - 1
        in_ray[jobs[n - 2].submission_id] = "SUCCEEDED"
        ray.refresh(jobs)
        assert len(in_ray) == n and not jobs[n - 1].held
        assert jobs[n - 1].job_id == f"{jobs[n - 1].submission_id}@a"
        assert sum(s in ray.LIVE for s in in_ray.values()) == 1


def test_a_single_run_refuses_a_launcher_its_config_file_asks_for(tmp_path, capsys):
    """A launcher or pack that a config file (not the command line, which sweep.py sends to the
    sweeper) gives a single run: one line saying to add -m, not a run trained here."""
    from conftest import compose_run

    from hydra_plugins.andrea_plugins.callbacks import SingleRunCheck

    cfg = compose_run(
        ["hydra/launcher=submitit_local", "launch.pack=2", f"out_dir={tmp_path}"],
        return_hydra_config=True,
    )
    with pytest.raises(SystemExit) as ended:
        SingleRunCheck().on_run_start(cfg)
    assert ended.value.code == 2
    assert capsys.readouterr().err == (
        "error: hydra.launcher.engine=local and launch.pack=2: only a sweep submits jobs; "
        "this single run would train here without them: run it with -m\n"
    )
    assert not (tmp_path / "default").exists()


def test_the_invalid_jobs_of_a_grid_are_one_line_each_reason_once():
    """The sweep's refusal of its invalid jobs (andrea.launch.plan.invalid_jobs): one line; a
    reason shared by several runs once, after them; a reason that does not name its run after
    the overrides that set its job apart."""
    from andrea.launch.plan import invalid_jobs

    grid = [["size=tiny-1", f"train.seed={s}", f"train.lr={lr}"] for s in (0, 1) for lr in (1, 2)]
    errors = [
        (grid[0], "[size=tiny-1 model=baseline] train.lr=-1.0 must be > 0"),
        (grid[2], "[size=tiny-1 model=baseline] train.lr=-1.0 must be > 0"),
        (grid[3], "ConfigCompositionException: a reason\n  on two lines"),
    ]
    assert invalid_jobs(errors, grid) == (
        "3 of 4 jobs are invalid; nothing was launched: (1) [size=tiny-1 model=baseline] "
        "train.lr=-1.0 must be > 0 (2) [train.seed=1 train.lr=2] ConfigCompositionException: "
        "a reason on two lines"
    )
    assert invalid_jobs([(grid[0], "why")], grid[:1]) == (
        "1 of 1 jobs are invalid; nothing was launched: why"
    )


def test_only_a_launcher_that_submits_or_a_pack_needs_the_sweeper():
    from andrea.config.overrides import submits_jobs

    assert submits_jobs(["hydra/launcher=ray", "slurm=localhost", "launch.pack=auto"]) == [
        "hydra/launcher=ray",
        "slurm=localhost",
        "launch.pack=auto",
    ]
    assert submits_jobs(["hydra/launcher=basic", "launch.pack=1", "slurm=null", "model=x"]) == []


def test_the_type_precheck_passes_every_value_hydra_accepts():
    """precheck runs before Hydra: a valid value it refused would block a valid run."""
    from andrea.config.overrides import precheck

    good = [
        "train.lr=1e-3",
        "train.lr=null",
        "train.lr=${size.lr}",
        "size.aspect=16",
        "size.aspect=13.3,8.25",
        "train.seed=range(0,3)",
        "train.seed=choice(1,2)",
        "plan=true",
        "plan=false",
        "train.budgets=[0.25,0.5,1]",
        "model.mhc_streams=4",
        "train.muon.momentum=0.9",
        "model.block_size=null",
        "wandb.mode=offline",
        "train.lr=interval(0.001,0.01)",
        "out_dir=/tmp/x",
        "size=tiny-1,tiny-2",
        "hydra.launcher.cpus_per_task=1",
        "train.lr_scale=2",
        "~train.lr",
    ]
    assert precheck(good) == []


def test_an_unusable_analysis_input_exits_2(tmp_path, capsys):
    from analysis.fit import main

    (tmp_path / "runs.csv").write_text("variant,size\nbaseline,tiny-1\n")
    assert main([str(tmp_path / "runs.csv"), "--no-plots", "--out", str(tmp_path / "a")]) == 2
    assert "runs.csv: missing required column(s) flops, val_loss" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", ["fit", "backtest", "domains", "ablations", "architecture", "lr_select", "tuning"]
)
def test_an_out_that_is_a_file_is_one_line_before_any_run_is_read(tmp_path, capsys, command):
    """`analysis.fit --out <a file>` ended in a FileExistsError traceback after collecting every
    run. The inputs here do not exist: the --out line comes first, so it is checked first."""
    import importlib

    main = importlib.import_module(f"analysis.{command}").main
    (tmp_path / "afile").write_text("")
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        assert main([str(tmp_path / "no_such_sweep"), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: --out {out}: {tmp_path / 'afile'} is a file, not a directory"]


# ---- docs/bad_input.md ---------------------------------------------------------------------------


def write_table(path: Path) -> None:
    import os
    import tempfile

    os.environ.setdefault("ANDREA_DATA", tempfile.mkdtemp(prefix="andrea_data_"))
    lines = [
        "# Bad input, and what andrea says",
        "",
        "Generated by `.venv/bin/python -m tests.test_bad_input docs/bad_input.md` from the cases",
        "of `tests/test_bad_input.py` (each asserts the key or file named, "
        "the exit status and that",
        "the good runs next to a bad one are still analysed). *exit*: what the command line",
        "returns (`sweep.py` for config, a job's failed results.json for data today, `python -m",
        "analysis.fit` for analysis; 0 = the analysis goes on and lists the bad run). "
        "**gap** marks an exit other than 2 or a message that does not name the file.",
        "",
    ]
    for area in ("config", "data", "analysis"):
        lines += [f"## {area}", "", "| input | exit | message |", "|---|---|---|"]
        for case in (c for c in CASES if c.area == area):
            with tempfile.TemporaryDirectory() as tmp:
                code, message = case.run(Path(tmp))
            message = message.replace(tmp, "<tmp>").replace("|", "\\|").replace("\n", " ")
            gap = " **gap**" if case.exit is None else ""
            lines.append(f"| `{case.what}` | {code}{gap} | {message[:300]} |")
        lines.append("")
    path = Path(path)
    old = path.read_text() if path.exists() else ""
    kept = old[old.index(BY_HAND) :] if BY_HAND in old else ""  # written by hand: kept as it is
    path.write_text("\n".join(lines) + ("\n" + kept if kept else ""))


# the heading of docs/bad_input.md's last section, which lists by hand the commands checked in
# other tests (a Ray cluster, a sweep or a fit to run: not fast cases); write_table keeps it
BY_HAND = "## Commands checked in their own tests"


if __name__ == "__main__":
    write_table(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/bad_input.md"))
