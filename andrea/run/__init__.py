"""One run on disk, torch-free: what training writes and the analysis reads.

rundir.py    RunDir (the one object that knows a run directory's layout, its lock), the
             atomic writers every file goes through, and find_run_dirs (the one walk that
             finds the runs below a sweep directory)
results.py   results.json's fields: the one owner of what a finished run records, its
             status values (COMPLETED, FAILED) and the Record the readers get
labels.py    a run's label (the variant, Block AttnRes' S or N, a scheme's suffix), built once
             for the config and the analysis
evaluations.py  the downstream task records (tasks/<settings-hash>.json): where, read, write
units.py     compute units (PFLOP/s-days), per-GPU peak FLOP/s and MFU
logkeys.py   every logged metric key, defined once
metrics.py   metrics.jsonl and Weights & Biases
"""
