"""Tables (tables.py) and figures (plots.py, plots_extra.py)."""
