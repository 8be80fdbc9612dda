"""A run's configuration: schema.py (the typed Hydra dataclasses), resolve.py (validation and
resolution into a RunSpec; the reuse keys) and overrides.py (command-line checks and typo hints)."""
