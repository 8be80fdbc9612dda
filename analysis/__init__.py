"""Scaling-law analysis: finished runs → compute-vs-loss fits, compute multipliers, tables, figures.

    collect.py     results.json / CSV → runs → seed-averaged points (and what is failed/running)
    powerlaw.py    Huber fits of L = A·C^-alpha (+ E), bootstrap CIs, least-squares cross-check
    bootstrap.py   resampling, batched refits (IRLS / Levenberg-Marquardt), percentile intervals
    multiplier.py  compute multiplier of each variant over the baseline, with CIs and a curve
    tables.py      fit table as terminal text, Markdown, CSV, LaTeX (booktabs)
    plots.py       scaling, multiplier, block-size ablation, training-dynamics figures
    synthetic.py   a fake sweep from known laws (tests, benchmark, demos)
    dashboard.py   the sweep's W&B workspace (`python -m analysis.dashboard`)
    fit.py         the CLI: `python -m analysis.fit <sweeps or CSVs> --out DIR` (`andrea-fit`)
"""
