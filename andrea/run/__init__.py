"""One run on disk, torch-free: what training writes and the analysis reads.

    rundir.py    RunDir (the one object that knows a run directory's layout, its lock) and the
                 atomic writers every file goes through
    results.py   results.json's fields: the one owner of what a finished run records
    units.py     compute units (PFLOP/s-days), per-GPU peak FLOP/s and MFU
    logkeys.py   every logged metric key, defined once
    metrics.py   metrics.jsonl and Weights & Biases
"""
