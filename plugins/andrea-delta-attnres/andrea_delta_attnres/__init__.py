"""Delta AttnRes as an andrea residual scheme: `model=delta_attnres` (see delta_attnres.py)."""

from andrea_delta_attnres.delta_attnres import SCHEME

__all__ = ["SCHEME"]
