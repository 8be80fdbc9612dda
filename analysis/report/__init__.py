"""Tables (tables.py) and figures (plots.py and its house style, plots_scaling.py,
plots_multiplier.py, plots_extra.py, backtest_report.py)."""
