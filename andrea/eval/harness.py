"""The harness's own command line with andrea's model registered:

    python -m andrea.eval.harness run --model andrea --model_args run_dir=RUN_DIR --tasks ...

`lm_eval` finds models by name in its registry; importing andrea.eval.adapter registers
`andrea` there (lm_eval has no plugin discovery), then the harness's CLI runs unchanged, except
that `--model_args` is read by andrea's parser (adapter.parse_model_args) and handed on as the
JSON the harness also accepts: the harness splits it at every comma, and andrea's run
directories have commas in their names (`seed0,train.lr=0.001`). Its results go where the
harness puts them (--output_path), not into the run directory: that is `python -m andrea.eval`'s
job. Bad model arguments are one `error:` line (exit 2).
"""

from __future__ import annotations

import json
import sys

MODEL_ARGS_FLAGS = ("--model_args", "-a")


def model_args_as_json(argv: list[str]) -> list[str]:
    """`argv` with each `--model_args k=v,...` (one token or several) as one JSON object."""
    from andrea.eval.adapter import parse_model_args

    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in MODEL_ARGS_FLAGS and eq:
            out.append(f"{flag}={json.dumps(parse_model_args(inline))}")
            i += 1
            continue
        if arg not in MODEL_ARGS_FLAGS:
            out.append(arg)
            i += 1
            continue
        j = i + 1
        while j < len(argv) and not argv[j].startswith("-"):
            j += 1
        values = argv[i + 1 : j]
        if values and not values[0].lstrip().startswith("{"):  # JSON already: as it is
            values = [json.dumps(parse_model_args(",".join(values)))]
        out += [arg, *values]
        i = j
    return out


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    import andrea.eval.adapter  # noqa: F401  (registers --model andrea)
    from andrea.eval.load import EvalError

    try:
        sys.argv[1:] = model_args_as_json(sys.argv[1:])
        cli_evaluate()
    except EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
