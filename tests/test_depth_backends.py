"""The depth-op backends (andrea/model/residuals/depth_backend.py): andrea's op equals each kernel
package's pure-torch reference (or, for liger-kernel, its Triton kernels run by Triton's CPU
interpreter), forward and gradients, for Full and Block at several S and numbers of sources; and
which backend a machine gets, or why it is refused.

The packages' Triton kernels need CUDA (bench/gpu_check.sh runs the same parity there). On a CPU:
- fla-core: `fla/ops/attnres/naive.py` (`naive_attnres`) imports only torch and einops, but its
  package's __init__ imports triton; the file is loaded by its path. It computes in fp32 whatever
  its inputs (`stacked.float()`), so the fp64 comparison holds to fp32 round-off (2e-5 of the
  largest entry).
- flash-attn-res: `flash_attn_res/experimental/torch.py` has no import statements (it reads torch,
  F, EPS, BLOCK_SIZE and DTYPE without binding them, and two Triton ops in its Triton path, which
  is not called; `far_code` checks that this is the whole list) and its package's __init__ imports
  triton; the file is compiled from its path and run in a namespace that supplies exactly those
  five names (`far_reference`: EPS is the package's own constant, fp32's machine epsilon;
  BLOCK_SIZE and DTYPE are no constants of the package, see there). Its torch.compile decorators
  are dropped (they compile the same function; wrapping them imports torch._dynamo, ~3 s). What
  it computes, against andrea's op h = sum_i softmax_i(w . RMSNorm_g(v_i)) v_i:
  - `naive_attention_residual(pseudo_query, values)`: keys are the values RMS-normalised without a
    learnable weight (`F.rms_norm`), scores pseudo_query . key (no 1/sqrt(d)), softmax over the
    sources axis (0), the mix of the raw values. The same function with the key weight g folded
    into the query, pseudo_query = g * w (w . (g * v * r) = r * (g * w) . v), and its eps fixed at
    EPS = 1.19e-7 where andrea's is a parameter (1e-6 by default): compared at that eps. It
    computes in its inputs' dtype: compared in fp64 to 1e-12 of the largest entry.
  - `phase_1_fn(queries [S, d], values)` / `phase_2_fn(partial, query, lse, out)`: the two-phase
    Block AttnRes (phase 1 scores all S queries of a block against the completed blocks; phase 2
    merges a layer's partial sum by the online-softmax rule). They compute in fp32 whatever their
    inputs, and round what they hand on to bf16: phase 1 every query's output (the first query's
    it also returns in fp32, with the fp32 log-sum-exp), phase 2 its output. So: fp32 round-off
    for the fp32 values and every gradient, bf16 rounding (2^-8 of each entry) for a bf16 output.
    The seam's `flash_attn_res` branch (its Triton phase-1 op with one query) is run in the
    whole model with `phase_1_fn` in the kernel's place.
  - `paper_forward(inputs, pseudo_queries, layers)`: Block AttnRes over a list of layers, S =
    BLOCK_SIZE (Full: 1), the embedding and the block sums as sources, the partial sum after a
    block's first layer, a final aggregation with the last query: andrea's `attnres` over the same
    layers, to fp32 round-off (it casts its inputs to fp32).
  - Not compared: `torch_compile_phases_forward`, which feeds phase 1's bf16 outputs into phase 2
    for every layer of a block after the first, so equals andrea only to bf16 compounded over the
    layers; `production_forward2` and `_blockwise_attention_block_forward` call the Triton ops.
- liger-kernel: no pure-torch reference (`liger_kernel/ops/attn_res.py` is the Triton kernels and
  their autograd function). Triton's interpreter (TRITON_INTERPRET=1, read when `@triton.jit` wraps
  a kernel) runs them on CPU tensors with numpy, so the kernels themselves, forward and backward,
  are compared through the seam's `liger` branch, fp32, to fp32 round-off (three tokens), in a
  process of its own started with TRITON_INTERPRET=1 (`liger_interpreted` says why; ~5 s).
  Needs `triton` (pip, a 286 MB wheel, 999 MB installed: not in the Makefile's env, so skipped
  there; CI installs it); `liger_interpreted` loads the file without liger_kernel's __init__,
  which imports every op and torch._dynamo.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import math
import symtable
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from andrea.model import ANDREA, ModelConfig
from andrea.model.residuals import depth_backend
from andrea.model.residuals.attnres import attnres, depth_modules
from andrea.model.residuals.depth_op import depth_attention, depth_attention_reference

EPS = 1e-6
FP32 = 2e-5  # a reference's fp32 round-off, relative to the largest entry compared
FP64 = 1e-12  # the same in fp64
BF16 = 2.0**-8  # bf16's unit round-off: a value stored in bf16 is within this of it, relatively


def assert_close(got, want, msg="", tol=FP32):
    """Equal up to round-off: max |got - want| <= tol * max |want| (max over the tensor, since an
    entry near zero carries the round-off of the large terms it sums)."""
    scale = want.abs().max().item()
    err = (got - want).abs().max().item()
    assert err <= tol * max(scale, 1e-12), f"{msg}: max error {err:.3g}, scale {scale:.3g}"


def assert_rounded_bf16(got, want, msg=""):
    """`got` is `want` stored in bf16, each entry to its own 2^-8, plus fp32 round-off."""
    err = (got.double() - want).abs()
    bound = BF16 * want.abs() + FP32 * want.abs().max()
    assert (err <= bound).all(), f"{msg}: max error/bound {(err / bound).max().item():.3g}"


def package_dir(module: str, dist: str) -> Path:
    """An installed package's folder, found without importing it (its __init__ imports triton)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{dist} is not installed (pip install --no-deps {dist})")
    return Path(list(spec.submodule_search_locations)[0])


def fla_naive():
    """fla-core's `naive_attnres`, loaded from its file (the package's __init__ needs triton)."""
    root = package_dir("fla", "fla-core")
    if importlib.util.find_spec("einops") is None:
        pytest.skip("einops is not installed: fla's naive_attnres imports it")
    path = root / "ops" / "attnres" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_attnres_naive", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.naive_attnres


# flash-attn-res's experimental/torch.py: the names it uses and never binds. The test supplies the
# first five; the two Triton ops are used only by its Triton path, which the tests never call.
FAR_SUPPLIED = {"torch", "F", "EPS", "BLOCK_SIZE", "DTYPE"}
FAR_TRITON = {"phase_1_batched_attention_triton_op", "phase_2_online_softmax_merge_triton_op"}


def unbound_names(source: str, filename: str) -> set[str]:
    """The global names a module's code reads that it does not bind itself (nor are builtins)."""
    top = symtable.symtable(source, filename, "exec")

    def read(table) -> set[str]:
        names = {
            s.get_name()
            for s in table.get_symbols()
            if s.is_referenced() and (table is top or s.is_global())
        }
        return names.union(*(read(child) for child in table.get_children()))

    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    return read(top) - bound - set(dir(builtins))


@functools.lru_cache(maxsize=None)
def far_code():
    """(code, eps): flash-attn-res's pure-torch reference compiled from its file, its
    `@torch.compile(...)` decorators dropped, and the package's EPS constant."""
    root = package_dir("flash_attn_res", "flash-attn-res")
    path = root / "experimental" / "torch.py"
    source = path.read_text()
    missing = unbound_names(source, str(path))
    assert missing == FAR_SUPPLIED | FAR_TRITON, f"{path} reads other names now: {missing}"
    tree = ast.parse(source, str(path))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:  # only torch.compile: the function is unchanged
                assert ast.unparse(dec).startswith("torch.compile("), ast.unparse(dec)
            node.decorator_list = []
    # The package's one eps constant (ops/phase_1.py; its Triton ops take eps as an argument).
    # That module imports triton, so the assignment is read from its source.
    ops = root / "ops" / "phase_1.py"
    (value,) = [
        node.value
        for node in ast.parse(ops.read_text(), str(ops)).body
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["EPS"]
    ]
    eps = eval(compile(ast.Expression(value), str(ops), "eval"), {"torch": torch})
    return compile(tree, str(path), "exec"), eps


def far_reference(dtype: torch.dtype = torch.float64, block_size: int = 1) -> dict:
    """flash-attn-res's pure-torch reference: its functions by name, and "EPS".

    Supplied: torch and F (torch.nn.functional), as it spells them; EPS, the package's own.
    BLOCK_SIZE is Block AttnRes's S in `paper_forward` (and the default S of the Triton path's
    `production_forward2`): the package's blockwise autograd function takes S as an argument
    (experimental/autograd.py), none is a constant, so it is the S a test compares at. DTYPE is
    the dtype `naive_attention_residual` casts its output to: the package defines none, and its
    kernels store their outputs in bf16 (ops/phase_1.py); a test supplies the precision it
    compares in (fp64: the cast is the identity, and the reference's own fp64 arithmetic is
    compared; the bf16 store is no part of the function, and andrea's seam casts a kernel's
    output back to the sources' dtype)."""
    code, eps = far_code()
    ns = {"torch": torch, "F": F, "EPS": eps, "BLOCK_SIZE": block_size, "DTYPE": dtype}
    exec(code, ns)
    return ns


def case(n: int, extra: bool, d: int = 24, seed: int = 0, tokens: tuple = (2, 5)):
    g = torch.Generator().manual_seed(seed)
    srcs = [
        torch.randn(*tokens, d, generator=g, dtype=torch.float64) * (1 + i)
        for i in range(n + extra)
    ]
    q = torch.randn(d, generator=g, dtype=torch.float64)
    w = 1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (*srcs, q, w)]


def grads(out, leaves, values: torch.dtype = torch.float64):
    """The gradients of `out` for a fixed upstream gradient whose values are representable in
    `values` (so two outputs of different dtypes get the same one)."""
    dh = torch.randn(out.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return torch.autograd.grad(out, leaves, dh.to(values).to(out.dtype))


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
    assert_close(ours, theirs, "h")
    for name, a, b in zip(
        [f"v{i}" for i in range(len(srcs))] + ["query", "norm weight"],
        grads(ours, [*srcs, q, w]),
        grads(theirs, [*srcs, q, w]),
    ):
        assert_close(a, b, f"d{name}")


@pytest.mark.parametrize("n, extra", SHAPES[:3] + SHAPES[-2:])
def test_the_compile_backends_formula_equals_andreas_reference_in_fp64(n, extra):
    *srcs, q, w = case(n, extra)
    ref, _ = depth_attention_reference(srcs, q, w, EPS)
    got = depth_backend.stacked_mix(torch.stack(srcs), q, w, EPS)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads(got, [*srcs, q, w]), grads(ref, [*srcs, q, w])):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


SEAM = [
    (b, r, S)
    for b in ("fla", "flash_attn_res")
    for r, S in [("attnres_full", 1), ("attnres_block", 2), ("attnres_block", 3)]
]


@pytest.mark.parametrize("backend, residual, S", SEAM)
def test_a_scheme_runs_a_backend_without_knowing_it(backend, residual, S, monkeypatch):
    """The whole model through the seam with a fused backend, its kernel stood in for by the
    package's reference (CPU), equals the eager model: the seam hands the kernel the same
    sources (embedding, outputs or block sums, Block's partial sum) in the same order.

    fla: `_fused` itself is replaced by fla's `naive_attnres`. flash_attn_res: the seam's own
    branch runs (the stack, g folded into the query, eps, the first query's output, the cast),
    with the package's Triton phase-1 op stood in for by `phase_1_fn`, its pure-torch phase 1,
    whose fp32 first output replaces the kernel's bf16 store; the model's key eps is the
    package's EPS, the one `phase_1_fn` uses."""
    key_eps = EPS
    if backend == "fla":
        naive = fla_naive()
        monkeypatch.setattr(
            depth_backend, "_fused", lambda name, items, q, w, eps: naive(q, items, w, rms_eps=eps)
        )
    else:
        ref = far_reference()
        key_eps = ref["EPS"]

        def phase_1_op(values, queries, eps):
            assert eps == key_eps and queries.shape[0] == 1
            lse, _bf16, first = ref["phase_1_fn"](queries, values)
            return first.unsqueeze(0), lse

        stand_in = types.ModuleType("flash_attn_res")
        stand_in.phase_1_batched_attention_triton_op = phase_1_op
        monkeypatch.setitem(sys.modules, "flash_attn_res", stand_in)
    cfg = ModelConfig(
        n_layer=3,
        n_head=2,
        d_model=16,
        vocab_size=50,
        context_length=8,
        residual=residual,
        block_size=S,
        key_eps=key_eps,
    )
    torch.manual_seed(0)
    model = ANDREA(cfg).double()
    with torch.no_grad():  # away from the zero-init query, so the weights are not uniform
        for name, p in model.named_parameters():
            if name.startswith("depth."):
                p.add_(0.5 * torch.randn_like(p))
    x = torch.randint(0, 50, (2, 8))
    out = {}
    for used in ("eager", backend):
        depth_backend.use(model, used)
        model.zero_grad()
        y = model(x)
        y.square().mean().backward()
        out[used] = (y.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    assert_close(out[backend][0], out["eager"][0], "logits")
    for name, g in out["eager"][1].items():
        assert_close(out[backend][1][name], g, name)


@pytest.mark.parametrize(
    "n, extra", SHAPES, ids=[f"{'block' if e else 'full'}-n{n}" for n, e in SHAPES]
)
def test_andreas_op_equals_flash_attn_res_naive_reference_in_fp64(n, extra):
    """`naive_attention_residual` with g folded into its pseudo-query, at its eps, in fp64."""
    ref = far_reference(torch.float64)
    *srcs, q, w = case(n, extra)
    stack, part = (srcs[:-1], srcs[-1]) if extra else (srcs, None)
    ours = depth_attention(stack, q, w, ref["EPS"], part)
    theirs = ref["naive_attention_residual"](q * w, torch.stack(srcs))
    assert ours.dtype == theirs.dtype == torch.float64
    assert_close(ours, theirs, "h", FP64)
    for name, a, b in zip(
        [f"v{i}" for i in range(len(srcs))] + ["query", "norm weight"],
        grads(ours, [*srcs, q, w]),
        grads(theirs, [*srcs, q, w]),
    ):
        assert_close(a, b, f"d{name}", FP64)


@pytest.mark.parametrize("n, S", [(1, 1), (2, 3), (5, 2), (8, 4)])
def test_andreas_op_equals_flash_attn_res_two_phase_reference(n, S):
    """Phase 1 over n completed blocks for the S queries of a block, then phase 2 merging the
    first layer's partial sum: each query's phase-1 output is andrea's op over the completed
    blocks (the first in fp32, the others stored in bf16), and the merge is andrea's op over the
    completed blocks plus the partial sum (stored in bf16), its gradients (through phase 2, the
    log-sum-exp and phase 1) to fp32 round-off. The gradient of a bf16 output passes its cast
    unrounded, so the upstream gradient is bf16-valued for both sides."""
    ref = far_reference()
    eps = ref["EPS"]
    *srcs, q, w = case(n, True)
    g = torch.Generator().manual_seed(1)
    more = torch.randn(2, S - 1, q.shape[0], generator=g, dtype=torch.float64)
    qs = torch.cat([q.unsqueeze(0), q.detach() + 0.5 * more[0]])  # the block's other queries
    ws = torch.cat([w.unsqueeze(0), w.detach() * (1 + 0.2 * more[1])])
    completed, partial = srcs[:-1], srcs[-1]
    lse, stored, first = ref["phase_1_fn"](qs * ws, torch.stack(completed))
    assert first.dtype == lse.dtype == torch.float32 and stored.dtype == torch.bfloat16
    with torch.no_grad():
        assert_close(first, depth_attention(completed, q, w, eps), "phase 1, query 0")
        for s in range(S):
            mix = depth_attention(completed, qs[s], ws[s], eps)
            assert_rounded_bf16(stored[s], mix, f"phase 1, query {s} (bf16)")
    merged = ref["phase_2_fn"](partial, qs[0] * ws[0], lse[0], first)
    ours = depth_attention(completed, q, w, eps, partial)
    assert merged.dtype == torch.bfloat16
    assert_rounded_bf16(merged.detach(), ours.detach(), "phase 2 (bf16)")
    leaves = [*srcs, q, w]
    for name, a, b in zip(
        [f"v{i}" for i in range(n)] + ["partial", "query", "norm weight"],
        grads(ours, leaves, torch.bfloat16),
        grads(merged, leaves, torch.bfloat16),
    ):
        assert_close(a, b, f"d{name}")


@pytest.mark.parametrize(
    "residual, S", [("attnres_full", 1), ("attnres_block", 2), ("attnres_block", 4)]
)
def test_andreas_attnres_equals_flash_attn_res_paper_forward(residual, S):
    """Full and Block AttnRes over the same 6 layers (tanh of a linear map): andrea's `attnres`
    with its depth modules (a query and a key weight per layer and for the output), and
    `paper_forward` with BLOCK_SIZE = S and those folded into its pseudo-queries. It works in
    fp32 (it casts its inputs) and returns DTYPE: fp32 round-off, forward and gradients (the
    embedding, every query and key weight, the layers' weights)."""
    ref = far_reference(torch.float32, block_size=S)
    d, L = 16, 6
    cfg = ModelConfig(
        n_layer=L // 2,
        n_head=2,
        d_model=d,
        vocab_size=50,
        context_length=8,
        residual=residual,
        block_size=S,
        key_eps=ref["EPS"],
    )
    g = torch.Generator().manual_seed(0)
    depth = depth_modules(cfg).double()
    with torch.no_grad():
        for m in depth:
            m.query.copy_(torch.randn(d, generator=g, dtype=torch.float64))
            m.key_norm_weight.mul_(1 + 0.3 * torch.randn(d, generator=g, dtype=torch.float64))
    W = [
        (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5).requires_grad_()
        for _ in range(L)
    ]
    layers = [lambda h, W=W_l: torch.tanh(h @ W.to(h.dtype)) for W_l in W]
    x = torch.randn(2, 5, d, generator=g, dtype=torch.float64).requires_grad_()
    ours = attnres(x, layers, depth, cfg, None)
    pseudo_queries = torch.stack([m.query * m.key_norm_weight for m in depth])
    theirs = ref["paper_forward"](x, pseudo_queries, layers)
    assert theirs.dtype == torch.float32
    assert_close(theirs, ours, "h")
    leaves = [x, *W, *(p for m in depth for p in (m.query, m.key_norm_weight))]
    names = ["x", *(f"W{l}" for l in range(L)), *(f"{k}{l}" for l in range(L + 1) for k in "qg")]
    for name, a, b in zip(
        names, grads(ours, leaves, torch.float32), grads(theirs, leaves, torch.float32)
    ):
        assert_close(b, a, f"d{name}")


LIGER_CASES = {"full-n3": (3, False), "full-n9": (9, False), "block-n4": (4, True)}


def liger_interpreted():
    """liger-kernel's AttnRes module with its Triton kernels run by Triton's CPU interpreter, put
    in sys.modules as `liger_kernel.ops.attn_res`, so the seam's own import takes it. Only in a
    process that set TRITON_INTERPRET=1 before triton was first imported: triton's own library
    functions (tl.zeros, ...) are wrapped for the interpreter or for a GPU when triton.language is
    imported, and torch.compile imports it, so in a test process that already compiled something
    the interpreted kernel calls GPU-wrapped functions and fails. Its one liger import,
    ops/utils.py, is reached through the two package folders without their __init__s, which import
    every liger op and torch._dynamo (~3 s)."""
    root = package_dir("liger_kernel", "liger-kernel")
    for name, folder in (("liger_kernel", root), ("liger_kernel.ops", root / "ops")):
        stub = types.ModuleType(name)
        stub.__path__ = [str(folder)]
        sys.modules[name] = stub
    spec = importlib.util.spec_from_file_location(
        "liger_kernel.ops.attn_res", root / "ops" / "attn_res.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert type(mod._attn_res_fwd_kernel).__name__ == "InterpretedFunction"
    sys.modules["liger_kernel.ops.attn_res"] = mod
    return mod


def liger_parity(n: int, extra: bool) -> None:
    """The seam's `liger` branch (the sources stacked, Block's partial sum last; query, key
    weight, eps) with liger's forward and backward kernels, fp32, against andrea's op in fp64 on
    the same values: fp32 round-off. Three tokens: the interpreter runs each token's program
    in numpy."""
    *srcs, q, w = (t.detach().float().requires_grad_() for t in case(n, extra, tokens=(1, 3)))
    stack, part = (srcs[:-1], srcs[-1]) if extra else (srcs, None)
    sources = depth_backend.SourceList(stack[0])
    for v in stack[1:]:
        sources.push(v)
    theirs = depth_backend.mix("liger", sources, q, w, EPS, part)
    assert theirs.dtype == torch.float32
    *srcs64, q64, w64 = (t.detach().double().requires_grad_() for t in (*srcs, q, w))
    stack64, part64 = (srcs64[:-1], srcs64[-1]) if extra else (srcs64, None)
    ours = depth_attention(stack64, q64, w64, EPS, part64)
    assert_close(theirs, ours, "h")
    for name, a, b in zip(
        [f"v{i}" for i in range(len(srcs))] + ["query", "norm weight"],
        grads(theirs, [*srcs, q, w], torch.float32),
        grads(ours, [*srcs64, q64, w64], torch.float32),
    ):
        assert_close(a, b, f"d{name}")


def test_the_liger_backend_equals_andreas_op_under_tritons_cpu_interpreter():
    """`liger_parity` for Full at 3 and 9 sources and Block at 4, in a process of its own
    (`liger_interpreted` says why), started with TRITON_INTERPRET=1."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip(
            "triton is not installed: liger-kernel's AttnRes is Triton kernels only "
            "(liger_kernel/ops/attn_res.py), which Triton's CPU interpreter runs; "
            "pip install --no-deps triton (a 286 MB wheel, 999 MB installed; not in the Makefile's "
            "env). Its parity on CUDA: bench/gpu_check.sh"
        )
    package_dir("liger_kernel", "liger-kernel")  # skips when liger-kernel is not installed
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, __file__, "liger", *LIGER_CASES],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.split() == [f"{c}:ok" for c in LIGER_CASES]


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


def test_a_kernel_that_cannot_run_the_width_is_refused_first_and_auto_skips_it(monkeypatch):
    """flash_attn_res tiles d with one tl.arange (a power of 2): on an H200, andrea-120m's
    d 768 raised inside Triton mid-run (2026-12-04). Refused before any job, on any machine."""
    monkeypatch.setattr(depth_backend, "importable", lambda name: None)
    with pytest.raises(depth_backend.BackendError, match="d_model=768"):
        depth_backend.resolve("flash_attn_res", cuda=False, d_model=768)
    assert depth_backend.resolve("flash_attn_res", cuda=True, d_model=512)[0] == "flash_attn_res"
    assert depth_backend.resolve("fla", cuda=True, d_model=768)[0] == "fla"
    monkeypatch.setattr(
        depth_backend, "importable", lambda name: None if name == "flash_attn_res" else "no"
    )
    used, note = depth_backend.resolve("auto", cuda=True, d_model=768)
    assert used == "eager" and "power of 2" in note
    assert depth_backend.resolve("auto", cuda=True, d_model=1024) == ("flash_attn_res", None)


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


if __name__ == "__main__" and sys.argv[1:2] == ["liger"]:
    liger_interpreted()
    for name in sys.argv[2:]:
        liger_parity(*LIGER_CASES[name])
        print(f"{name}:ok", flush=True)
