"""Beyond validation loss: andrea runs in EleutherAI's lm-evaluation-harness, and exported as
Hugging Face-style folders (docs/evaluation.md).

    python -m andrea.eval RUN_OR_SWEEP --tasks T1,T2 [--include-path DIR]   # tasks/<hash>.json
    python -m andrea.eval.harness run --model andrea --model_args run_dir=RUN --tasks ...
    python -m andrea.eval.export RUN_DIR OUT                                # safetensors + code

load.py (a run's checkpoint and tokenizer) and export.py need only torch; adapter.py (the
harness's `andrea` model), tasks.py and __main__.py need the optional `lm-eval` package
(`pip install -e '.[eval]'`). Importing `andrea` or this package imports neither.
"""
