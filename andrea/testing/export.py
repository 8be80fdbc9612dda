"""A scheme's Hugging Face export under test: a small run directory with a checkpoint of a model
moved off its init, and the exported modeling file loaded as its users load it (torch only)."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

import torch

VOCAB = 300  # the small tokenizer's vocabulary


def save_small_tokenizer(path: Path) -> Path:
    """A VOCAB-token tokenizer trained on 60k characters of torch's own source, saved to path."""
    from andrea.data.tokenizer import save_tokenizer, train_tokenizer

    text = open(Path(torch.__file__).with_name("functional.py")).read()[:60000]
    save_tokenizer(train_tokenizer([text], VOCAB), path)
    return path


def fake_run(root: Path, scheme: dict, tokenizer: Path):
    """A run directory at `root` with a checkpoint of a small model (2 layers, d 16, `scheme`:
    the `ModelConfig` fields of the scheme and its options) whose weights are perturbed away from
    the init (zero queries, identity mixes), so every mixing weight matters; (root, the model)."""
    from andrea.components.checkpoint import encode_checkpoint
    from andrea.model.transformer import ANDREA, ModelConfig
    from andrea.run.rundir import RunDir, atomic_write_bytes, atomic_write_json

    cfg = ModelConfig(
        n_layer=2, n_head=2, d_model=16, vocab_size=VOCAB, context_length=32, **scheme
    )
    torch.manual_seed(0)
    model = ANDREA(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    rd = RunDir(root)
    atomic_write_json(rd.model_config, {"model": asdict(cfg), "seq_len": 24})
    atomic_write_bytes(rd.tokenizer, tokenizer.read_bytes())
    atomic_write_bytes(
        rd.checkpoint_path(7), encode_checkpoint({"step": 7, "model": model.state_dict()})
    )
    return root, model


def import_modeling(folder: Path, hide_transformers: bool):
    """The export's modeling_andrea.py as a module, optionally as if transformers were absent."""
    saved = {
        k: v for k, v in sys.modules.items() if k == "transformers" or k.startswith("transformers.")
    }
    try:
        if hide_transformers:
            for k in saved:
                del sys.modules[k]
            sys.modules["transformers"] = None  # `import transformers` raises ImportError
        name = f"modeling_andrea_{folder.name}_{int(hide_transformers)}"
        spec = importlib.util.spec_from_file_location(name, folder / "modeling_andrea.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        if hide_transformers:
            sys.modules.pop("transformers", None)
            sys.modules.update(saved)
