"""The benchmark scripts run and judge their targets right (they time nothing here: benchmarks are
scripts that print ratios, never timed tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.throughput import TARGETS, allow_recompiles, check_targets
from bench.throughput import main as throughput_main
from tests.conftest import REPO

# bench.throughput at its smallest, on the CPU: the tiny size, one sequence of 32 tokens, one step
TINY_CPU = ["--device", "cpu", "--size", "tiny", "--batch", "1", "--seq", "32", "--steps", "1"]


def test_cpu_targets_pass_and_fail_on_their_bounds(capsys):
    results = {
        "train": {"attnres_block:4": 0.90, "attnres_full": 0.79},
        "memory": {"attnres_block:4": 1.10, "attnres_full": 1.36},
        "infer": {},
    }
    assert check_targets(results, "cpu") == 2
    out = capsys.readouterr().out
    assert "PASS  train  attnres_block:4" in out and "FAIL  train  attnres_full" in out
    assert "PASS  memory attnres_block:4" in out and "FAIL  memory attnres_full" in out


def test_cuda_targets_include_inference_and_the_baseline_mfu(capsys):
    results = {
        "train": {"attnres_block:4": 0.975, "attnres_full": 0.91},
        "infer": {"attnres_block:4": 0.97},
        "mfu": {"baseline": 0.41},
    }
    assert check_targets(results, "cuda") == 1  # only inference misses (0.97 < 0.98)
    out = capsys.readouterr().out
    assert "FAIL  infer  attnres_block:4" in out and "PASS  mfu    baseline" in out
    assert {kind for kind, _ in TARGETS["cuda"]} == {"train", "infer", "mfu"}


def test_targets_not_measured_are_not_judged(capsys):
    assert check_targets({"train": {"attnres_block:4": 0.95}}, "cpu") == 0
    assert capsys.readouterr().out.count("PASS") == 1


def test_compiled_runs_raise_dynamo_recompile_limit():
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
    old = getattr(dynamo_config, name)
    try:
        allow_recompiles(old + 10)  # more graphs than the default limit allows
        assert getattr(dynamo_config, name) >= old + 10
    finally:
        setattr(dynamo_config, name, old)


def test_throughput_reports_ratios_to_the_baseline(tmp_path, one_thread, capsys):
    out = tmp_path / "bench.jsonl"
    throughput_main(
        [
            *TINY_CPU,
            "--trials",
            "2",
            "--variants",
            "baseline,attnres_full,attnres_block:4",
            "--json",
            str(out),
        ]
    )
    record = json.loads(out.read_text())
    for kind in ("train", "infer", "memory"):
        assert set(record["ratios"][kind]) == {"baseline", "attnres_full", "attnres_block:4"}
        assert record["ratios"][kind]["baseline"] == 1.0
        assert all(r > 0 for r in record["ratios"][kind].values())
    # AttnRes adds (L+1) * 2d parameters and their AdamW state: it cannot use less memory
    assert record["ratios"]["memory"]["attnres_full"] > 1.0
    text = capsys.readouterr().out
    assert "targets (ours, set for andrea-12m, CPU fp32" in text
    assert text.count("PASS") + text.count("FAIL") == 4


def test_gpu_scripts_parse():
    for script in ("bench/gpu_check.sh", "bench/gpu_wheels.sh", "bench/heldout.sh"):
        subprocess.run(["bash", "-n", str(REPO / script)], check=True)


@pytest.mark.slow
def test_gpu_check_smoke_runs_every_step_on_cpu(tmp_path, data_cache):
    """The one-call GPU script, at toy sizes on the CPU: preflight, SDPA check (a no-op without
    CUDA), both benchmark steps, the depth-op backends (eager), a real 9-run sweep with its
    throughput measurement, and its fit -- so the script a GPU session
    spends its minutes on cannot rot unseen. ~1 minute on 2 cores alone. No speed check: the
    script sets no step limits in smoke mode, and this test's limit (30x the time alone) only
    stops a hang."""
    out = tmp_path / "out"
    env = {
        **os.environ,
        "GPU_CHECK_SMOKE": "1",
        "GPU_CHECK_WORK": str(tmp_path / "work"),
        "PYTHON": sys.executable,
        "ANDREA_DATA": str(data_cache),
    }
    proc = subprocess.run(
        ["bash", "bench/gpu_check.sh", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "preflight: ok" in proc.stdout and "gpu_check: all steps passed" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu_check.jsonl",
        "gpu_check.log",
        "gpu_small_fit_table.md",
        "gpu_small_fits.json",
        "gpu_small_multiplier.png",
        "gpu_small_scaling.png",
        "gpu_small_throughput.json",
    ]
    # the depth-op backends step (bench.depth_backends --smoke): timed, and its parity passed
    assert "PASS  eager            block n=5" in proc.stdout
    # the sweep's throughput job (sweep.throughput=true) fed the fit's device-seconds multiplier
    assert "Multiplier in device-seconds (measured by throughput.json" in proc.stdout
    lines = [json.loads(x) for x in out.joinpath("gpu_check.jsonl").read_text().splitlines()]
    # two bench.throughput runs, then bench.depth_backends
    assert len(lines) == 3 and lines[2]["bench"] == "depth_backends"
    fits = json.loads(out.joinpath("gpu_small_fits.json").read_text())
    assert set(fits["fits"]) == {"baseline", "attnres_full", "attnres_block_s4"}


def test_sdpa_check_tells_fused_kernels_from_the_math_fallback():
    from bench.sdpa_check import fused_attention_kernels

    names = {
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
        "false, cutlass::bfloat16_t>, false, true>(pytorch_flash::Flash_fwd_params)": "flash",
        "cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x64_4x1x1_kernel0_0": "cudnn",
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel"
        "<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>"
        "::Params)": "efficient",
    }
    math_fallback = [
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor>",
    ]
    assert fused_attention_kernels([*names, *math_fallback]) == names


def test_a_warm_up_budget_skips_later_variants_but_still_reports(tmp_path, one_thread, capsys):
    out = tmp_path / "bench.jsonl"
    rc = throughput_main(
        [
            *TINY_CPU,
            "--trials",
            "1",
            "--variants",
            "baseline,attnres_full",
            "--budget-s",
            "0",
            "--no-memory",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    assert (
        "attnres_full: skipped, its warm-up would not fit in the 0 s budget"
        in capsys.readouterr().out
    )
    assert set(json.loads(out.read_text())["ratios"]["train"]) == {"baseline"}


def test_the_memory_measurement_prints_no_profiler_noise(tmp_path):
    """Kineto's `USDT: ... profiler_start` lines, once per measured step, went to stderr."""
    args = [*TINY_CPU, "--trials", "1", "--variants", "baseline"]
    code = f"from bench.throughput import main; main({args!r})"
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "peak MiB" in proc.stdout  # the memory was measured, with the profiler
    assert "USDT" not in proc.stderr and "profiler_start" not in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_pack_measures_the_aggregate_of_k_processes_and_writes_the_plans_file(tmp_path, capsys):
    """bench.throughput --pack K: K processes side by side; the aggregates land under the key
    `packing` of the throughput file (other keys kept), where the plan reads them."""
    import json

    from andrea.launch.packing import packing_factor, read_packing

    out = tmp_path / "throughput.json"
    out.write_text(json.dumps({"other": 1}))
    rc = throughput_main(
        [
            *TINY_CPU,
            "--trials",
            "2",
            "--pack",
            "1,2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "K=1:" in text and "K=2:" in text and "packing factor" in text
    data = json.loads(out.read_text())
    assert data["other"] == 1 and set(data["packing"]) == {"1", "2"}
    assert packing_factor(read_packing(tmp_path), 2) > 0


def test_the_benchmark_times_cuda_matmuls_as_training_runs_them():
    """Training turns TF32 on for a CUDA run's fp32 matmuls; the first H200 benchmark ran
    without it (inductor warned). Both now ask one function; on a CPU it changes nothing."""
    import torch

    import andrea.launch.throughput as runner_module
    import andrea.train as train_module
    from andrea.components.runtime import use_cuda_matmul_settings

    assert runner_module.use_cuda_matmul_settings is use_cuda_matmul_settings
    assert train_module.use_cuda_matmul_settings is use_cuda_matmul_settings
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = matmul.allow_tf32, cudnn.allow_tf32  # torch's flags (not plain attributes)
    try:
        matmul.allow_tf32 = cudnn.allow_tf32 = False
        use_cuda_matmul_settings(torch.device("cpu"))
        assert not matmul.allow_tf32 and not cudnn.allow_tf32
        use_cuda_matmul_settings(torch.device("cuda"))
        assert matmul.allow_tf32 and cudnn.allow_tf32
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved


def test_a_variant_whose_warm_up_fails_is_left_out_and_the_rest_reported(
    tmp_path, one_thread, capsys, monkeypatch
):
    """On the H200, one fused kernel raising inside Triton stopped the whole fused step and its
    other kernels were never timed. Now that variant is left out with the reason; a failing
    baseline still fails the run (every ratio is to it)."""
    from andrea.launch.throughput import Runner

    real, failing = Runner.warm_up, {"attnres_full"}

    def warm_up(self, steps):
        if self.v.name in failing:
            raise ValueError("arange's range must be a power of 2")
        return real(self, steps)

    monkeypatch.setattr(Runner, "warm_up", warm_up)
    out = tmp_path / "bench.jsonl"
    args = [*TINY_CPU, "--trials", "1", "--no-memory", "--json", str(out)]
    rc = throughput_main([*args, "--variants", "baseline,attnres_full,attnres_block:2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "attnres_full: left out, its warm-up failed (ValueError: arange's range" in text
    ratios = json.loads(out.read_text())["ratios"]["train"]
    assert set(ratios) == {"baseline", "attnres_block:2"}
    failing.add("baseline")
    with pytest.raises(ValueError, match="power of 2"):
        throughput_main([*args, "--variants", "baseline,attnres_block:2"])
