"""What the fits answer: estimate.py (a fit per variant), multiplier.py (the compute multiplier
with its interval), extra_fits.py (the cross-checks) and power.py (what a design will resolve)."""
