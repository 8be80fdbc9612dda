"""Speed of the whole scaling analysis on a synthetic 25-run sweep (5 variants x 5 sizes) with
1000 bootstrap resamples: collect → fits + CIs → multipliers → tables → all figures.

    python bench/analysis_speed.py [--bootstrap 1000] [--budget 10]

Prints the in-process time of `analysis.fit.main` (with and without figures), the end-to-end
time of a fresh `python -m analysis.fit` process (imports included), and how reading runs scales
(25 vs 1,500 runs: `analysis.inputs.collect`, what a plan=true re-run does). Exits 1 over budget.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.fit import main  # noqa: E402
from analysis.inputs.synthetic import make_sweep  # noqa: E402


def _timed(argv) -> float:
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    dt = time.perf_counter() - t
    if rc != 0:
        raise SystemExit(f"analysis failed (exit {rc}) for {argv}")
    return dt


def read_scaling(tmp: Path) -> list[tuple[int, float]]:
    """(runs, seconds) of analysis.inputs.collect over the 25-run sweep and over 60 seeds of it
    (1,500 runs), so a read that grew worse than linearly shows as a ratio."""
    from analysis.inputs.collect import collect

    out = []
    for seeds in (1, 60):
        root = tmp / f"read{seeds}"
        n = len(make_sweep(root, seeds=tuple(range(seeds)), dynamics=False))
        t = time.perf_counter()
        runs = collect([root]).runs
        out.append((n, time.perf_counter() - t))
        assert len({r.run_id for r in runs}) == n, (len(runs), n)
    return out


def run(n_boot: int, budget: float) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        sweep, out = Path(tmp) / "sweep", Path(tmp) / "out"
        runs = make_sweep(sweep)
        assert len(runs) == 25, len(runs)
        boot = ["--bootstrap", str(n_boot)]
        fits_only = _timed([str(sweep), "--out", str(out / "a"), "--no-plots", *boot])
        whole = _timed([str(sweep), "--out", str(out / "b"), *boot])
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "analysis.fit", str(sweep), "--out", str(out / "c"), *boot],
            check=True,
            capture_output=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        fresh = time.perf_counter() - t
        reading = read_scaling(Path(tmp))
    print(f"synthetic sweep: 25 runs (5 variants x 5 sizes), {n_boot} bootstrap resamples")
    print(f"  fits + CIs + multipliers + tables : {fits_only:6.2f} s")
    print(f"  whole analysis incl. 5 figures    : {whole:6.2f} s")
    print(f"  fresh process (imports included)  : {fresh:6.2f} s")
    (n_small, t_small), (n_large, t_large) = reading
    print(f"  reading {n_small:,} runs (collect)      : {t_small:6.2f} s")
    print(
        f"  reading {n_large:,} runs (collect)   : {t_large:6.2f} s  ({t_large / t_small:.0f}x for "
        f"{n_large / n_small:.0f}x the runs; a plan=true re-run reads its finished runs so)"
    )
    ok = max(whole, fresh) < budget
    print(f"{'PASS' if ok else 'FAIL'}: budget {budget:g} s")
    return 0 if ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--budget", type=float, default=10.0)
    a = p.parse_args()
    sys.exit(run(a.bootstrap, a.budget))
