"""Scaling-law analysis: finished runs -> compute-vs-loss fits, compute multipliers, tables,
figures.

Torch-free, in floors that each import only those below (docs/architecture.md):

    inputs/      finished runs as records: results.json or CSV -> points, metrics, timings
    fits/        the laws and their resampling (power laws, Chinchilla L(N, D), parabola, bootstrap)
    estimates/   the multiplier, the extra fits, the planner's power model, task metrics
    report/      tables (text, Markdown, CSV, LaTeX) and figures
    <command>.py the commands on top, each `python -m analysis.<command>`; none imports another
"""
