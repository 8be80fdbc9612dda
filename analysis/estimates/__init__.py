"""What the fits answer: estimate.py (a law per variant, on the runs arranged once),
multiplier.py (the compute multiplier with its interval, under any law), law_fits.py (the chosen
law and --at-compute), law_choice.py (--law auto), rollouts.py (its expanding-window compute
rollouts, with each held-out run's residual), conformal.py and band_intervals.py (the prediction
intervals calibrated on those rollouts: a new run's loss, the multiplier), in_range.py (a fit
absurd inside its data), held_out.py (the held-out-size backtest), extra_fits.py (the
cross-checks), measured_speed.py (the device-seconds multiplier) and power.py (what a design will
resolve)."""
