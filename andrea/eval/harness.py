"""The harness's own command line with andrea's model registered:

    python -m andrea.eval.harness run --model andrea --model_args run_dir=RUN_DIR --tasks ...

`lm_eval` finds models by name in its registry; importing andrea.eval.adapter registers
`andrea` there (lm_eval has no plugin discovery), then the harness's CLI runs unchanged. Its
results go where the harness puts them (--output_path), not into the run directory: that is
`python -m andrea.eval`'s job.
"""

from __future__ import annotations


def main() -> None:
    import andrea.eval.adapter  # noqa: F401  (registers --model andrea)
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
