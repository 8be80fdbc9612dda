"""What the analysis writes besides tables and figures."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np


def out_dir_refused(out) -> bool:
    """True, after one `error:` line, when the output directory `out` (a command's --out; None:
    its default) cannot be made because a file is in the way; checked before any run is read."""
    if out is None:
        return False
    for p in (Path(out), *Path(out).parents):
        if p.exists():
            if p.is_dir():
                return False
            print(f"error: --out {out}: {p} is a file, not a directory", file=sys.stderr)
            return True
    return False


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
