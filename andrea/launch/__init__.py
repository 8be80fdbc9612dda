"""Many runs: task.py (what runs in a job's process, and the plan the sweeper prints),
sufficiency.py (enough unique data for a grid), threads.py (a job's CPU threads),
interrupts.py (Ctrl-C and SIGTERM while a sweep submits or watches jobs), and the
scheduler seam: scheduler.py (the small interface) with slurm.py behind it."""
