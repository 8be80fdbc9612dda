"""`python -m andrea.eval.export RUN_DIR OUT`: a run's checkpoint as a folder other tools load.

OUT gets what the Hugging Face ecosystem expects of a custom-code model:

    model.safetensors      the run's weights (andrea's parameter names; a tied head is stored once)
    config.json            the model config, model_type "andrea", auto_map -> modeling_andrea
    modeling_andrea.py     the transformer, self-contained (torch only; transformers when installed)
    residual_andrea.py     the run's residual scheme, from its export module (Scheme.export)
    tokenizer.json         the run's tokenizer, + tokenizer_config.json, special_tokens_map.json
    andrea_export.json     provenance: the run's name and label, checkpoint, step, val_loss,
                           andrea's code version (no path of the exporting machine)

and loads with

    AutoModelForCausalLM.from_pretrained(OUT, trust_remote_code=True)      # transformers
    AutoTokenizer.from_pretrained(OUT, trust_remote_code=False)  # a standard fast tokenizer
    modeling_andrea.load_exported(OUT)                                       # torch only

The model generates with transformers' `generate()` (greedy or sampled; no KV cache: each token
runs the window again). The tokenizer runs no custom code: tokenizer.json with a
tokenizer_config.json naming PreTrainedTokenizerFast. Only `trust_remote_code=False` (or
`PreTrainedTokenizerFast.from_pretrained(OUT)`) spares the question transformers >= 5 asks of
AutoTokenizer: it reads the folder's config.json first, whose AutoConfig is the modeling file's.

The modeling file is a copy of andrea/eval/hf_modeling.py and the residual file a copy of the
scheme's export module; neither imports anything from andrea: users of an exported model need
not install andrea (what a `trust_remote_code` model is expected to be), and the copies are
tested against andrea's own model, logits to fp32 precision, for every residual scheme
(tests/test_eval_export.py). A scheme without an export module (a plug-in's `Scheme.export` is
None) is refused with one line, before anything is written. OUT is written under a temporary
name and renamed when complete; an existing OUT is refused, never overwritten.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from andrea.eval.load import EvalError, load_run
from andrea.run.results import Record
from andrea.run.rundir import code_version

MODELING_SOURCE = Path(__file__).with_name("hf_modeling.py")
MODELING_NAME = "modeling_andrea.py"
RESIDUAL_NAME = "residual_andrea.py"  # modeling_andrea.py imports it by this name


def residual_source(cfg) -> Path:
    """The run's scheme's export module; EvalError when the scheme has none."""
    scheme = cfg.scheme
    if scheme.export is None:
        raise EvalError(
            f"model={scheme.name} cannot be exported: its residual scheme gives no "
            f"export module (Scheme.export is None; docs/residual_schemes.md)"
        )
    path = Path(scheme.export)
    if not path.is_file():
        raise EvalError(f"model={scheme.name}: its export module {path} does not exist")
    return path


def provenance(run) -> dict:
    """What andrea_export.json records: portable (the run's name, not the exporting machine's
    path to it; the checkpoint relative to the run directory)."""
    results = run.results or Record({})
    root = run.run_dir.root.resolve()
    ckpt = Path(run.checkpoint).resolve()
    return {
        "run": root.name,
        "checkpoint": str(ckpt.relative_to(root)) if ckpt.is_relative_to(root) else ckpt.name,
        "step": run.step,
        "final": run.final,
        "trained_seq_len": run.seq_len,
        "val_loss": results.val_loss,
        "variant": results.variant,
        "label": results.label,
        "size": results.size,
        "tokenizer_sha256": run.tokenizer_sha256,
        "andrea_code": code_version(),
    }


def hf_config(cfg, eot: int) -> dict:
    return {
        **asdict(cfg),
        "architectures": ["AndreaForCausalLM"],
        "model_type": "andrea",
        "auto_map": {
            "AutoConfig": "modeling_andrea.AndreaConfig",
            "AutoModelForCausalLM": "modeling_andrea.AndreaForCausalLM",
        },
        "tie_word_embeddings": bool(cfg.tie_embeddings),
        "bos_token_id": eot,
        "eos_token_id": eot,
        "max_position_embeddings": cfg.context_length,
        "torch_dtype": "float32",
    }


def export_run(run_dir: str | Path, out: str | Path, tokenizer: str | Path | None = None) -> Path:
    """Write the export of `run_dir`'s newest checkpoint to `out` (which must not exist)."""
    from safetensors.torch import save_file

    from andrea.data.tokenizer import EOT

    out = Path(out)
    if out.exists():
        raise EvalError(f"export folder {out} exists; pick a new folder (nothing is overwritten)")
    run = load_run(run_dir, "cpu", tokenizer)
    residual = residual_source(run.cfg)
    state = {k: v.detach().contiguous() for k, v in run.model.state_dict().items()}
    if run.cfg.tie_embeddings:
        state.pop("lm_head.weight", None)  # the same tensor as wte.weight
    eot = run.tokenizer.token_to_id(EOT)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(hf_config(run.cfg, eot), indent=2) + "\n")
        shutil.copyfile(MODELING_SOURCE, tmp / MODELING_NAME)
        shutil.copyfile(residual, tmp / RESIDUAL_NAME)
        shutil.copyfile(run.tokenizer_path, tmp / "tokenizer.json")
        special = {"bos_token": EOT, "eos_token": EOT, "unk_token": EOT}
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "PreTrainedTokenizerFast",
                    "model_max_length": run.seq_len,
                    "add_prefix_space": False,
                    "clean_up_tokenization_spaces": False,
                    **special,
                },
                indent=2,
            )
            + "\n"
        )
        (tmp / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
        (tmp / "andrea_export.json").write_text(json.dumps(provenance(run), indent=2) + "\n")
        for p in tmp.iterdir():
            os.chmod(p, 0o644)
        os.chmod(tmp, 0o755)
        os.rename(tmp, out)  # fails, leaving OUT alone, if OUT appeared meanwhile
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m andrea.eval.export",
        description="Export a run's newest checkpoint as safetensors + "
        "config.json + tokenizer.json + modeling_andrea.py",
    )
    p.add_argument("run_dir", type=Path)
    p.add_argument("out", type=Path, help="a folder that does not exist yet")
    p.add_argument(
        "--tokenizer",
        default=None,
        help="a tokenizer.json, for runs whose data had none; must be the run's own",
    )
    args = p.parse_args(argv)
    try:
        out = export_run(args.run_dir, args.out, args.tokenizer)
    except EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: {e.name or e} is not installed: pip install -e '.[export]'", file=sys.stderr)
        return 2
    print(
        f"exported {args.run_dir} -> {out}/ (model.safetensors, config.json, "
        f"{MODELING_NAME}, {RESIDUAL_NAME}, tokenizer.json)"
    )
    print(f"  load: AutoModelForCausalLM.from_pretrained({str(out)!r}, trust_remote_code=True)")
    print(f"        AutoTokenizer.from_pretrained({str(out)!r}, trust_remote_code=False)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
