"""Finished runs as records: collect.py (results.json or CSV -> runs and points), synthetic.py
(sweeps from known laws) and timing.py (device-seconds)."""
