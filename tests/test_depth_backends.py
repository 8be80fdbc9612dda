"""The depth-op backends (andrea/model/residuals/depth_backend.py): andrea's op equals each kernel
package's pure-torch reference, forward and gradients, for Full and Block at several S and numbers
of sources; and which backend a machine gets, or why it is refused.

The packages' Triton kernels need CUDA (bench/gpu_check.sh runs the same parity there). On a CPU,
what can be compared is each package's own pure-torch reference, where it ships one that imports
without triton:
- fla-core: `fla/ops/attnres/naive.py` (`naive_attnres`) imports only torch and einops, but its
  package's __init__ imports triton; the file is loaded by its path. It computes in fp32 whatever
  its inputs (`stacked.float()`), so the fp64 comparison holds to fp32 round-off (2e-5 of the
  largest entry).
- liger-kernel and flash-attn-res: no importable pure-torch reference (see the skip reasons).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from andrea.model import ANDREA, ModelConfig
from andrea.model.residuals import depth_backend
from andrea.model.residuals.depth_op import depth_attention, depth_attention_reference

EPS = 1e-6
FP32 = 2e-5  # the fla reference's fp32 round-off, relative to the largest entry compared


def assert_close_fp32(got, want, msg=""):
    """Equal up to fp32 round-off: max |got - want| <= FP32 * max |want| (max over the tensor,
    since an entry near zero carries the round-off of the large terms it sums)."""
    scale = want.abs().max().item()
    err = (got - want).abs().max().item()
    assert err <= FP32 * max(scale, 1e-12), f"{msg}: max error {err:.3g}, scale {scale:.3g}"


def fla_naive():
    """fla-core's `naive_attnres`, loaded from its file (the package's __init__ needs triton)."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("fla-core is not installed (pip install --no-deps fla-core einops)")
    if importlib.util.find_spec("einops") is None:
        pytest.skip("einops is not installed: fla's naive_attnres imports it")
    path = Path(list(spec.submodule_search_locations)[0]) / "ops" / "attnres" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_attnres_naive", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.naive_attnres


def case(n: int, extra: bool, d: int = 24, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    srcs = [
        torch.randn(2, 5, d, generator=g, dtype=torch.float64) * (1 + i) for i in range(n + extra)
    ]
    q = torch.randn(d, generator=g, dtype=torch.float64)
    w = 1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (*srcs, q, w)]


def grads(out, leaves):
    dh = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=out.dtype)
    return torch.autograd.grad(out, leaves, dh)


# Full: every source in the stack; Block: completed blocks plus the partial sum (`extra`)
SHAPES = [
    (1, False),
    (3, False),
    (5, False),
    (9, False),
    (17, False),
    (1, True),
    (2, True),
    (4, True),
    (8, True),
]


@pytest.mark.parametrize(
    "n, extra", SHAPES, ids=[f"{'block' if e else 'full'}-n{n}" for n, e in SHAPES]
)
def test_andreas_op_equals_flas_naive_reference_forward_and_gradients(n, extra):
    naive = fla_naive()
    *srcs, q, w = case(n, extra)
    stack, part = (srcs[:-1], srcs[-1]) if extra else (srcs, None)
    ours = depth_attention(stack, q, w, EPS, part)
    theirs = naive(q, srcs, w, rms_eps=EPS)
    assert ours.dtype == theirs.dtype == torch.float64
    assert_close_fp32(ours, theirs, "h")
    for name, a, b in zip(
        [f"v{i}" for i in range(len(srcs))] + ["query", "norm weight"],
        grads(ours, [*srcs, q, w]),
        grads(theirs, [*srcs, q, w]),
    ):
        assert_close_fp32(a, b, f"d{name}")


@pytest.mark.parametrize("n, extra", SHAPES[:3] + SHAPES[-2:])
def test_the_compile_backends_formula_equals_andreas_reference_in_fp64(n, extra):
    *srcs, q, w = case(n, extra)
    ref, _ = depth_attention_reference(srcs, q, w, EPS)
    got = depth_backend.stacked_mix(torch.stack(srcs), q, w, EPS)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads(got, [*srcs, q, w]), grads(ref, [*srcs, q, w])):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "residual, S", [("attnres_full", 1), ("attnres_block", 2), ("attnres_block", 3)]
)
def test_a_scheme_runs_a_backend_without_knowing_it(residual, S, monkeypatch):
    """The whole model through the seam with the `fla` backend, its kernel stood in for by the
    package's reference (CPU), equals the eager model: the seam hands the kernel the same
    sources (embedding, outputs or block sums, Block's partial sum) in the same order."""
    naive = fla_naive()
    monkeypatch.setattr(
        depth_backend, "_fused", lambda name, items, q, w, eps: naive(q, items, w, rms_eps=eps)
    )
    cfg = ModelConfig(
        n_layer=3,
        n_head=2,
        d_model=16,
        vocab_size=50,
        context_length=8,
        residual=residual,
        block_size=S,
    )
    torch.manual_seed(0)
    model = ANDREA(cfg).double()
    with torch.no_grad():  # away from the zero-init query, so the weights are not uniform
        for name, p in model.named_parameters():
            if name.startswith("depth."):
                p.add_(0.5 * torch.randn_like(p))
    x = torch.randint(0, 50, (2, 8))
    out = {}
    for backend in ("eager", "fla"):
        depth_backend.use(model, backend)
        model.zero_grad()
        y = model(x)
        y.square().mean().backward()
        out[backend] = (y.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert_close_fp32(out["fla"][0], out["eager"][0], "logits")
    for name, g in out["eager"][1].items():
        assert_close_fp32(out["fla"][1][name], g, name)


def test_liger_parity_on_cpu():
    pytest.skip(
        "liger-kernel ships no pure-torch AttnRes reference: liger_kernel/ops/attn_res.py "
        "holds only the Triton kernels and imports triton at import; its parity runs on "
        "CUDA in bench/gpu_check.sh (bench.depth_backends)"
    )


def test_flash_attn_res_parity_on_cpu():
    pytest.skip(
        "flash-attn-res's pure-torch reference (flash_attn_res/experimental/torch.py: "
        "naive_attention_residual, phase_1_fn) is not importable: the file has no import "
        "statements (torch, F, EPS, BLOCK_SIZE are undefined names) and the package's "
        "__init__ imports triton; its parity runs on CUDA in bench/gpu_check.sh"
    )


# ---- selection and refusal -------------------------------------------------------------------


def test_eager_and_compile_run_anywhere():
    assert depth_backend.resolve("eager", cuda=False) == ("eager", None)
    assert depth_backend.resolve("compile", cuda=False) == ("compile", None)


@pytest.mark.parametrize("name", depth_backend.FUSED)
def test_a_fused_backend_without_cuda_is_refused(name):
    with pytest.raises(depth_backend.BackendError, match="no CUDA device"):
        depth_backend.resolve(name, cuda=False)


def test_auto_without_cuda_falls_back_to_eager_with_a_note():
    used, note = depth_backend.resolve("auto", cuda=False)
    assert used == "eager" and "no CUDA device" in note


def test_auto_with_cuda_but_no_importable_kernel_falls_back_and_says_why(monkeypatch):
    monkeypatch.setattr(depth_backend, "importable", lambda name: f"{name} needs triton")
    used, note = depth_backend.resolve("auto", cuda=True)
    assert used == "eager" and "fla needs triton" in note and "liger needs triton" in note


def test_auto_with_cuda_takes_the_first_kernel_that_imports(monkeypatch):
    monkeypatch.setattr(depth_backend, "importable", lambda name: None if name == "liger" else "no")
    assert depth_backend.resolve("auto", cuda=True) == ("liger", None)


def test_a_fused_backend_whose_package_does_not_import_is_refused(monkeypatch):
    monkeypatch.setattr(depth_backend, "importable", lambda name: "no module named triton")
    with pytest.raises(depth_backend.BackendError, match="pip install fla-core"):
        depth_backend.resolve("fla", cuda=True)


def test_an_unknown_backend_is_refused():
    with pytest.raises(depth_backend.BackendError, match="valid: eager, compile"):
        depth_backend.resolve("trition", cuda=True)


def test_use_sets_every_depth_module_and_only_those():
    model = ANDREA(
        ModelConfig(
            n_layer=2,
            n_head=2,
            d_model=16,
            vocab_size=50,
            context_length=8,
            residual="attnres_block",
            block_size=2,
        )
    )
    depth_backend.use(model, "compile")
    mods = [m for m in model.modules() if hasattr(m, "depth_backend")]
    assert len(mods) == 5 and all(m.depth_backend == "compile" for m in mods)
    with torch.no_grad():  # inference: the two-phase path, andrea's own whatever the backend
        assert math.isfinite(model(torch.randint(0, 50, (1, 8))).sum().item())
