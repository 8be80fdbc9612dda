"""The residual schemes, one module per scheme; registry.py maps each `model=<name>` to its
scheme (docs/residual_schemes.md says how to add one)."""
