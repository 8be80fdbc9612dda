"""What the analysis writes besides tables and figures."""

from __future__ import annotations

import math

import numpy as np


def jsonable(x):
    """Plain JSON: numpy scalars → Python, NaN/inf → null (fits.json must parse everywhere)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x
