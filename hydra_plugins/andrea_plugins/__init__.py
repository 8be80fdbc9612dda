"""Hydra plugins of andrea: the search path for sweeps/ and slurm/, the validating sweeper, and
submitit launchers that group jobs by resources and report job states while they wait."""
