"""bench/gpu_check.sh in its CPU smoke mode: the depth-op backends step (bench.depth_backends
--smoke) runs through the script's preflight and step machinery and passes its parity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a few seconds of CPU; its preflight imports the whole stack
def test_the_smoke_mode_runs_the_backends_step_and_its_parity(tmp_path):
    env = {**os.environ, "GPU_CHECK_SMOKE": "1", "GPU_CHECK_STEPS": "backends",
           "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(["bash", str(REPO / "bench" / "gpu_check.sh"), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=600)
    log = (tmp_path / "gpu_check.log").read_text()
    assert out.returncode == 0, log[-3000:]
    assert "gpu_check: all steps passed" in log
    assert "PASS  eager            block n=5" in log and "FAIL" not in log
    assert "bench.sdpa_check" not in log and "sweep.py" not in log  # only the step asked for
    line = json.loads((tmp_path / "gpu_check.jsonl").read_text().splitlines()[-1])
    assert line["bench"] == "depth_backends" and {r["sources"] for r in line["timings"]} == {3, 5}
