"""One BLAS thread for the small fits: scipy's L-BFGS-B on a handful of points spends most of its
time waking BLAS threads for tiny vectors, so every fit of `analysis.fits` runs inside
`single_blas_thread()`."""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os


def _scipy_openblas():
    """(get, set) of the OpenBLAS that scipy's L-BFGS-B links, or None where it is not found."""
    import scipy

    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*.so*")):
        try:
            lib = ctypes.CDLL(path)  # already loaded by scipy: same handle
        except OSError:
            continue
        for prefix in ("scipy_openblas", "scipy_openblas64_", "openblas"):
            get = getattr(lib, f"{prefix}_get_num_threads", None)
            set_ = getattr(lib, f"{prefix}_set_num_threads", None)
            if get is not None and set_ is not None:
                return get, set_
    return None


@contextlib.contextmanager
def single_blas_thread():
    """L-BFGS-B on a handful of points spends most of its time waking BLAS threads for tiny
    vectors (~10x slower with 2 threads on a busy machine). Pin scipy's OpenBLAS to one thread
    for the fits and restore the caller's setting afterwards."""
    try:
        handles = _scipy_openblas()
    except Exception:  # any platform quirk: just run multi-threaded
        handles = None
    if handles is None:
        yield
        return
    get, set_ = handles
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)
