"""KromHC as an andrea residual scheme: `model=kromhc` (see kromhc.py, docs/residual_schemes.md)."""

from andrea_kromhc.kromhc import SCHEME

__all__ = ["SCHEME"]
