"""Many runs: task.py (what runs in a job's own process), plan.py (the sweep's plan of its jobs and
its summary), sufficiency.py (enough unique data for a grid), threads.py (a job's CPU threads),
interrupts.py (Ctrl-C and SIGTERM while a sweep submits or watches jobs), packing.py and calls.py
(several runs per job), and the scheduler seam: engine.py (what an engine is), scheduler.py (the
engines' table) with local.py, slurm.py and ray.py behind it (docs/engines.md)."""
