"""The Hugging Face-style export: the shipped modeling file computes andrea's logits, for every
residual scheme, loaded standalone (torch only) and, when installed, through transformers."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

pytest.importorskip("safetensors")

from andrea.eval.export import export_run, main  # noqa: E402
from andrea.eval.load import load_run  # noqa: E402
from andrea.model.transformer import ModelConfig  # noqa: E402
from andrea.run.rundir import RunDir, atomic_write_json  # noqa: E402
from andrea.testing.export import (  # noqa: E402
    VOCAB,
    fake_run,
    import_modeling,
    save_small_tokenizer,
)

# transformers copies trust_remote_code modules into this cache; keep it out of the user's
os.environ.setdefault("HF_MODULES_CACHE", os.path.join(os.environ["TMPDIR"], "hf_modules"))

SCHEMES = [  # every residual scheme, and the ablation switches that change its formula
    dict(residual="baseline"),
    dict(residual="attnres_full"),
    dict(residual="attnres_block", block_size=2),
    dict(residual="attnres_block", block_size=3),
    dict(residual="denseformer"),
    dict(residual="mhc"),
    dict(residual="mhc_lite"),
    dict(residual="attnres_full", attnres_gate="sigmoid", attnres_heads=2, attnres_scale_eps=True),
    dict(
        residual="attnres_block",
        block_size=2,
        attnres_input_query=True,
        attnres_window=2,
        attnres_key_norm=False,
    ),
    dict(residual="attnres_full", attnres_static_mix=True),
    dict(residual="mhc", mhc_streams=2),
    dict(residual="baseline", tie_embeddings=False),
]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    return save_small_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: "-".join(f"{v}" for v in s.values()))
def test_export_loads_back_standalone_with_the_same_logits(scheme, tmp_path, tokenizer_file):
    run, model = fake_run(tmp_path / "run", scheme, tokenizer_file)
    out = export_run(run, tmp_path / "export")
    assert sorted(p.name for p in out.iterdir()) == [
        "andrea_export.json",
        "config.json",
        "model.safetensors",
        "modeling_andrea.py",
        "residual_andrea.py",
        "special_tokens_map.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (out / "tokenizer.json").read_bytes() == tokenizer_file.read_bytes()
    meta = json.loads((out / "andrea_export.json").read_text())
    assert meta["step"] == 7 and meta["trained_seq_len"] == 24
    # portable: the run's name and the checkpoint within it, no path of this machine
    assert meta["run"] == "run" and not Path(meta["checkpoint"]).is_absolute()
    assert str(tmp_path) not in (out / "andrea_export.json").read_text()
    mod = import_modeling(out, hide_transformers=True)
    assert not mod.HAVE_TRANSFORMERS
    exported = mod.load_exported(str(out))
    idx = torch.randint(0, VOCAB, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, got = model(idx), exported(idx)
    # fp32 precision: the plain depth-attention formula vs andrea's fused/two-phase paths
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5), (got - want).abs().max()


def test_export_loads_where_andrea_is_not_installed(tmp_path, tokenizer_file):
    """In a fresh process where `import andrea` fails, from the folder on sys.path (the
    docstring's `import modeling_andrea`), the residual file found beside it."""
    import subprocess

    run, model = fake_run(
        tmp_path / "run", dict(residual="attnres_block", block_size=2), tokenizer_file
    )
    out = export_run(run, tmp_path / "export")
    idx = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        torch.save({"idx": idx, "want": model(idx)}, tmp_path / "want.pt")
    code = (
        "import sys, torch; sys.modules['andrea'] = None; sys.modules['transformers'] = None\n"
        f"sys.path.insert(0, {str(out)!r}); import modeling_andrea\n"
        f"d = torch.load({str(tmp_path / 'want.pt')!r})\n"
        f"m = modeling_andrea.load_exported({str(out)!r})\n"
        "print(float((m(d['idx']).detach() - d['want']).abs().max()))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert float(res.stdout) < 1e-5


def test_export_through_transformers_auto_classes(tmp_path, tokenizer_file):
    transformers = pytest.importorskip("transformers")
    run, model = fake_run(
        tmp_path / "run", dict(residual="attnres_block", block_size=2), tokenizer_file
    )
    out = export_run(run, tmp_path / "export")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), trust_remote_code=True)
    hf.eval()
    assert hf.dtype == torch.float32
    idx = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, res = model(idx), hf(input_ids=idx, labels=idx)
    assert torch.allclose(res.logits, want, rtol=1e-5, atol=1e-5)
    ref = torch.nn.functional.cross_entropy(want[:, :-1].flatten(0, 1), idx[:, 1:].flatten())
    assert float(res.loss) == pytest.approx(float(ref), rel=1e-5)
    tok = transformers.AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)
    ours = load_run(run).tokenizer
    text = "def f(x):\n    return x + 1\n"
    assert tok(text)["input_ids"] == ours.encode(text).ids
    assert tok.eos_token_id == VOCAB - 1


def test_generate_is_andreas_own_greedy_decode(tmp_path, tokenizer_file):
    """transformers >= 4.50 gives generate() only to a GenerationMixin: the export had none.
    Greedy, past the context window (32: the last 32 tokens each step), it gives the tokens of
    andrea's own greedy decode (the harness adapter's generate_until)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from andrea.eval.adapter import AndreaLM

    run, _ = fake_run(
        tmp_path / "run", dict(residual="attnres_block", block_size=2), tokenizer_file
    )
    out = export_run(run, tmp_path / "export")
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), trust_remote_code=True)
    tok = transformers.AutoTokenizer.from_pretrained(str(out), trust_remote_code=False)
    prompt = "def f(x):"
    ids = tok(prompt, return_tensors="pt").input_ids
    new = hf.generate(ids, max_new_tokens=40, do_sample=False)[0, ids.shape[1] :].tolist()
    loaded = load_run(run)
    lm = AndreaLM(loaded=loaded, device="cpu", max_length=loaded.cfg.context_length)
    asked = Instance("generate_until", doc={}, arguments=(prompt, {"max_gen_toks": 40}), idx=0)
    (want,) = lm.generate_until([asked])
    eot = loaded.tokenizer.token_to_id("<|endoftext|>")
    ours = new[: new.index(eot)] if eot in new else new
    assert ids.shape[1] + len(ours) > 32  # the window slid
    assert tok.decode(ours) == want


def test_the_tokenizer_loads_without_remote_code_or_a_prompt(tmp_path, tokenizer_file):
    """The tokenizer is a standard one (tokenizer.json; tokenizer_config.json names
    PreTrainedTokenizerFast): it loads with trust_remote_code=False, or by its class, in a
    process whose stdin is closed, with no `[y/N]` question and andrea's own ids."""
    import subprocess

    pytest.importorskip("transformers")
    run, _ = fake_run(tmp_path / "run", dict(residual="baseline"), tokenizer_file)
    out = export_run(run, tmp_path / "export")
    text = "def f(x):\n    return x + 1\n"
    code = (
        "import transformers\n"
        f"a = transformers.AutoTokenizer.from_pretrained({str(out)!r}, trust_remote_code=False)\n"
        f"b = transformers.PreTrainedTokenizerFast.from_pretrained({str(out)!r})\n"
        f"print(a({text!r})['input_ids'] == b({text!r})['input_ids'], a({text!r})['input_ids'])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert "[y/N]" not in res.stdout + res.stderr
    same, ids = res.stdout.strip().split(" ", 1)
    assert same == "True" and json.loads(ids) == load_run(run).tokenizer.encode(text).ids


def test_an_existing_export_folder_is_refused(tmp_path, tokenizer_file, capsys):
    run, _ = fake_run(tmp_path / "run", dict(residual="baseline"), tokenizer_file)
    out = tmp_path / "export"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    assert main([str(run), str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: export folder") and "exists" in err[0]
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    assert not list(tmp_path.glob(".export.*"))  # no temporary folder left behind


def test_a_run_without_checkpoint_is_refused(tmp_path, tokenizer_file, capsys):
    run, _ = fake_run(tmp_path / "run", dict(residual="baseline"), tokenizer_file)
    for p in RunDir(run).list_checkpoints():
        p.unlink()
    assert main([str(run), str(tmp_path / "export")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no checkpoint" in err[0]
    assert not (tmp_path / "export").exists()


def test_weights_do_not_fit_the_config(tmp_path, tokenizer_file, capsys):
    run, _ = fake_run(tmp_path / "run", dict(residual="baseline"), tokenizer_file)
    rd = RunDir(run)
    cfg = json.loads(rd.model_config.read_text())
    atomic_write_json(rd.model_config, {**cfg, "model": {**cfg["model"], "d_model": 32}})
    assert main([str(run), str(tmp_path / "export")]) == 2
    assert "does not fit the run's model config" in capsys.readouterr().err


def test_the_modeling_files_config_has_the_transformers_fields_and_defaults():
    """A field of the transformer added to ModelConfig must reach the self-contained copy (else
    the export drops it silently); a scheme's options travel in config.json, read by its own
    export module."""
    import ast

    from andrea.eval.export import MODELING_SOURCE
    from andrea.model.residuals import registry

    # read, not imported: the file imports its residual_andrea.py sibling, only in an export
    tree = ast.parse(MODELING_SOURCE.read_text())
    (literal,) = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and any(getattr(t, "id", "") == "CONFIG_FIELDS" for t in n.targets)
    ]
    options = {o for s in registry.SCHEMES.values() for o in s.option_names()}
    fields = {k: v for k, v in asdict(ModelConfig(2, 2, 64)).items() if k not in options}
    assert ast.literal_eval(literal) == fields


@pytest.mark.parametrize(
    "name",
    sorted(
        s.name
        for s in __import__("andrea.model.residuals.registry", fromlist=["BUILT_IN"]).BUILT_IN
    ),
)
def test_every_built_in_scheme_has_an_export_module_that_imports_torch_only(name):
    import ast

    from andrea.model.residuals import registry

    path = Path(registry.get(name).export)
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            tops.add((node.module or "").split(".")[0])
    assert tops <= {"torch", "math", "itertools", "__future__"}, (name, tops)


def test_a_scheme_without_an_export_module_is_refused_in_one_line(
    tmp_path, tokenizer_file, capsys, monkeypatch
):
    """A plug-in whose Scheme gives no export: one `error:` line, no folder (it wrote a folder
    whose modeling file failed to load: `residual='scaled'; valid: ...`)."""
    import dataclasses

    from andrea.model.residuals import registry

    run, _ = fake_run(tmp_path / "run", dict(residual="baseline"), tokenizer_file)
    monkeypatch.setitem(
        registry.SCHEMES, "baseline", dataclasses.replace(registry.SCHEMES["baseline"], export=None)
    )
    assert main([str(run), str(tmp_path / "export")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: model=baseline cannot be exported: its residual scheme gives no export "
        "module (Scheme.export is None; docs/residual_schemes.md)"
    ]
    assert not (tmp_path / "export").exists() and not list(tmp_path.glob(".export.*"))
