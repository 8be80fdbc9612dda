"""analysis.inputs.timing: the device-seconds multiplier is withheld when the machine's load moved
the times (tokens/s across seeds of one variant and size spread beyond SPREAD_LIMIT)."""

import json

import numpy as np
import pytest

from analysis.fit import main
from analysis.inputs.synthetic import power_law, simulate_runs, write_runs
from analysis.inputs.timing import SPREAD_LIMIT, throughput_spread


def _sweep(root, slow_factor=1.0):
    """3 sizes x 2 seeds, one point per run, timed at 1e-12 s/FLOP; baseline seed 1's run is
    `slow_factor` times slower (another job shared the machine while it trained)."""
    laws = {"baseline": power_law(2.0, 0.06), "attnres_full": power_law(1.97, 0.06)}
    runs = simulate_runs(laws, (1e-4, 1e-3, 1e-2), (0, 1), rng=np.random.default_rng(0))
    dirs = write_runs(root, runs, {"baseline": 1e-12, "attnres_full": 1.05e-12})
    for d in dirs:
        p = d / "results.json"
        res = json.loads(p.read_text())
        if res["label"] == "baseline" and res["seed"] == 1:
            res["device_s"] *= slow_factor
            for pt in res["points"]:
                pt["device_s"] *= slow_factor
            p.write_text(json.dumps(res))
    return runs


def test_spread_is_measured_per_variant_and_size(tmp_path):
    from analysis.inputs.collect import collect

    _sweep(tmp_path / "s", slow_factor=3.0)
    check = throughput_spread(collect([tmp_path / "s"]).runs)
    assert check["comparable"] is False
    assert check["max_spread"] == pytest.approx(2.0, rel=1e-6)  # 3x slower: 200 % apart
    assert check["worst"]["label"] == "baseline"
    full = [c for c in check["cells"] if c["label"] == "attnres_full"]
    assert len(full) == 3 and all(c["spread"] < 1e-9 for c in full)
    assert throughput_spread([])["comparable"] is None


@pytest.mark.parametrize("slow, shown", [(1.0, True), (1 + SPREAD_LIMIT / 2, True), (1.5, False)])
def test_fit_withholds_the_device_seconds_multiplier(tmp_path, capsys, slow, shown):
    _sweep(tmp_path / "s", slow_factor=slow)
    assert (
        main([str(tmp_path / "s"), "--out", str(tmp_path / "o"), "--bootstrap", "50", "--no-plots"])
        == 0
    )
    text = capsys.readouterr().out
    dev = json.loads((tmp_path / "o" / "fits.json").read_text())["device_seconds"]
    assert dev["comparable"] is shown
    assert bool(dev["multipliers"]) is shown
    assert ("timings are not comparable" in text) is not shown
    if not shown:
        assert "baseline s" in text and "limit 10 %" in text
