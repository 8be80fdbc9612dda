"""The depth-attention op: fast path and two-phase path against the naive formula."""

import pytest
import torch

from andrea.model.residuals.depth_op import (
    SourceStack,
    depth_attention,
    depth_attention_reference,
    depth_attention_weights,
)
from andrea.model.residuals.depth_variants import block_phase1, block_phase2

EPS = 1e-6


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: threads only add contention


def _inputs(n, B=2, T=5, d=16, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    sources = [(torch.randn(B, T, d, generator=g) * (0.5 + i)).to(dtype) for i in range(n)]
    query = (torch.randn(d, generator=g) * scale).to(dtype)
    weight = (1 + 0.3 * torch.randn(d, generator=g)).to(dtype)
    return sources, query, weight


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_fast_path_matches_reference_outputs_and_grads(n):
    sources, query, weight = _inputs(n)
    leaves = [t.clone().requires_grad_() for t in (*sources, query, weight)]
    ref_leaves = [t.clone().requires_grad_() for t in (*sources, query, weight)]
    h = depth_attention(leaves[:n], leaves[n], leaves[n + 1], EPS)
    h_ref, _ = depth_attention_reference(ref_leaves[:n], ref_leaves[n], ref_leaves[n + 1], EPS)
    torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=1e-5)
    dh = torch.randn_like(h)
    (h * dh).sum().backward()
    (h_ref * dh).sum().backward()
    for a, b in zip(leaves, ref_leaves):
        if a.grad is None:  # one source: h is the source, the query has no effect
            assert n == 1 and torch.count_nonzero(b.grad) == 0
            continue
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_no_grad_path_matches_reference():
    sources, query, weight = _inputs(4)
    with torch.no_grad():
        h = depth_attention(sources, query, weight, EPS)
    h_ref, alpha_ref = depth_attention_reference(sources, query, weight, EPS)
    torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(depth_attention_weights(sources, query, weight, EPS), alpha_ref)


def test_zero_query_gives_the_mean_of_the_sources():
    sources, _, weight = _inputs(5)
    h = depth_attention(sources, torch.zeros(16), weight, EPS)
    torch.testing.assert_close(h, sum(sources) / 5, atol=1e-6, rtol=1e-6)


def test_gradcheck_fast_path_float64():
    sources, query, weight = _inputs(4, B=1, T=3, d=6, dtype=torch.float64)
    inputs = [t.requires_grad_() for t in (*sources, query, weight)]

    def f(*xs):
        return depth_attention(list(xs[:4]), xs[4], xs[5], EPS)

    assert torch.autograd.gradcheck(f, inputs)


def test_gradcheck_two_phase_float64():
    sources, query, weight = _inputs(4, B=1, T=3, d=6, dtype=torch.float64)
    qs = torch.randn(2, 6, dtype=torch.float64)
    inputs = [t.requires_grad_() for t in (*sources, qs, weight)]

    def f(*xs):
        completed, partial, qs, w = list(xs[:3]), xs[3], xs[4], xs[5]
        ws = torch.stack([w, w * 0.5])
        p1 = block_phase1(completed, qs, ws, EPS)
        return block_phase2(p1, 1, partial, qs[1], ws[1], EPS, torch.float64)

    assert torch.autograd.gradcheck(f, inputs)


def _two_phase_vs_naive(n_completed, S, dtype=torch.float32, autocast=False):
    """One block of S layers: layer j attends over completed blocks (+ partial sum for j >= 1)."""
    completed, _, _ = _inputs(n_completed, dtype=dtype, seed=1)
    partials = [None] + _inputs(S - 1, dtype=dtype, seed=2)[0] if S > 1 else [None]
    g = torch.Generator().manual_seed(3)
    qs = torch.randn(S, 16, generator=g) * 2
    ws = 1 + 0.3 * torch.randn(S, 16, generator=g)
    worst = 0.0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        p1 = block_phase1(completed, qs, ws, EPS)
        for j in range(S):
            srcs = completed + ([partials[j]] if partials[j] is not None else [])
            h = block_phase2(p1, j, partials[j], qs[j], ws[j], EPS, torch.float32)
            h_ref, _ = depth_attention_reference(
                [s.float() for s in srcs], qs[j], ws[j], EPS
            )  # fp32 reference on the same (possibly bf16-rounded) sources
            worst = max(worst, (h.float() - h_ref).abs().max().item())
    return worst


@pytest.mark.parametrize("n_completed,S", [(1, 1), (1, 3), (3, 2), (4, 5), (6, 7)])
def test_two_phase_matches_naive_fp32(n_completed, S):
    assert _two_phase_vs_naive(n_completed, S) < 1e-5


@pytest.mark.parametrize("n_completed,S", [(2, 3), (5, 4)])
def test_two_phase_and_fast_path_under_bf16_autocast(n_completed, S):
    # Scores and softmax are fp32 under autocast, so on bf16 sources the two-phase result stays
    # within fp32 rounding of the fp32 reference: tolerance 1e-4 (values ~ up to 10).
    assert _two_phase_vs_naive(n_completed, S, dtype=torch.bfloat16, autocast=True) < 1e-4
    sources, query, weight = _inputs(n_completed + 1, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = depth_attention(sources, query.float(), weight.float(), EPS)
        alpha = depth_attention_weights(sources, query.float(), weight.float(), EPS)
    assert alpha.dtype == torch.float32
    h_ref, _ = depth_attention_reference([s.float() for s in sources], query, weight, EPS)
    # The mix is returned in bf16 (the sources' dtype): one bf16 rounding, rel. 2^-8.
    torch.testing.assert_close(h.float(), h_ref, atol=0.05, rtol=1 / 128)


def test_mixed_dtype_sources_promote():
    # Under autocast the embedding is fp32 and sublayer outputs are bf16.
    sources, query, weight = _inputs(3)
    mixed = [sources[0]] + [s.bfloat16() for s in sources[1:]]
    h = depth_attention(mixed, query, weight, EPS)
    assert h.dtype == torch.float32


@pytest.mark.parametrize("n", [1, 3])
def test_stack_plus_extra_source_matches_reference(n):
    """The model's form: completed sources in a SourceStack, the partial sum as `extra`."""
    sources, query, weight = _inputs(n + 1, seed=4)
    leaves = [t.clone().requires_grad_() for t in (*sources, query, weight)]
    ref_leaves = [t.clone().requires_grad_() for t in (*sources, query, weight)]
    stack = SourceStack(leaves[0] * 1.0, capacity=n + 2)  # * 1.0: a non-leaf, as in the model
    for v in leaves[1:n]:
        stack.push(v * 1.0)
    h = depth_attention(stack, leaves[n + 1], leaves[n + 2], EPS, extra=leaves[n])
    h_ref, alpha_ref = depth_attention_reference(
        ref_leaves[: n + 1], ref_leaves[n + 1], ref_leaves[n + 2], EPS
    )
    torch.testing.assert_close(h, h_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        depth_attention_weights(stack, leaves[n + 1], leaves[n + 2], EPS, extra=leaves[n]),
        alpha_ref,
    )
    dh = torch.randn_like(h)
    (h * dh).sum().backward()
    (h_ref * dh).sum().backward()
    for a, b in zip(leaves, ref_leaves):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)


def test_gradcheck_stack_plus_extra_float64():
    sources, query, weight = _inputs(4, B=1, T=3, d=6, dtype=torch.float64, seed=5)
    inputs = [t.requires_grad_() for t in (*sources, query, weight)]

    def f(*xs):
        stack = SourceStack(xs[0] * 1.0, capacity=4)
        for v in xs[1:3]:
            stack.push(v * 1.0)
        return depth_attention(stack, xs[4], xs[5], EPS, extra=xs[3])

    assert torch.autograd.gradcheck(f, inputs)


def test_saves_no_stacked_copies_of_the_sources():
    """Backward keeps only the shared source stack, the extra source and [n, B, T] statistics:
    no [n, B, T, d] tensor (fp32 keys, stacked values) is saved per layer."""
    sources, query, weight = _inputs(5, B=2, T=5, d=16)
    leaves = [t.requires_grad_() for t in (*sources, query, weight)]
    saved = []

    def pack(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        stack = SourceStack(leaves[0] * 1.0, capacity=5)
        for v in leaves[1:4]:
            stack.push(v * 1.0)
        depth_attention(stack, leaves[5], leaves[6], EPS, extra=leaves[4]).sum().backward()
    big = [s for s in saved if len(s) == 4]
    assert not big, big
    # The extra source and the scores p and weights alpha [n, B, T]; 1/RMS r [n, B, T] is kept
    # on ctx (it may be a view of the stack's cache).
    assert sorted(s for s in saved if len(s) == 3) == [(2, 5, 16)] + [(5, 2, 5)] * 2


def test_cached_key_norms_give_the_same_result():
    """A SourceStack built with eps caches each key's 1/RMS at push; same output and grads."""
    sources, query, weight = _inputs(4, seed=6)
    results = []
    for eps in (None, EPS):
        leaves = [t.clone().requires_grad_() for t in (*sources, query, weight)]
        stack = SourceStack(leaves[0] * 1.0, capacity=4, eps=eps)
        for v in leaves[1:3]:
            stack.push(v * 1.0)
        assert (stack.inv_rms(EPS) is None) == (eps is None)
        h = depth_attention(stack, leaves[4], leaves[5], EPS, extra=leaves[3])
        h.pow(2).sum().backward()
        results.append([h.detach()] + [t.grad for t in leaves])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


def test_accelerator_mix_equals_cpu_mix(monkeypatch):
    """The broadcast/einsum weighted sum (accelerators, torch.compile) and the CPU eager
    multiply-add chain agree, with and without a query dimension (phase 1)."""
    import andrea.model.residuals.depth_op as ar

    g = torch.Generator().manual_seed(7)
    V = torch.randn(5, 2, 3, 8, generator=g)
    for alpha in (torch.rand(5, 2, 3, generator=g), torch.rand(5, 4, 2, 3, generator=g)):
        cpu = ar.weighted_sum(alpha, V)
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
        fused = ar.weighted_sum(alpha, V)
        monkeypatch.undo()
        torch.testing.assert_close(fused, cpu, atol=1e-6, rtol=1e-6)
