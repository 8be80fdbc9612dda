"""mHC and mHC-lite (andrea/model/residuals/mhc.py, docs/ablations.md).

The model is compared with the papers' formulas written out below, one stream at a time, in
fp64 (outputs and gradients of every parameter): mHC Eq. 7-9 / 14-19 (Xie et al. 2025) with
Sinkhorn-Knopp in the exp domain as the paper writes it, and mHC-lite's H_res as the sum of the
n! permutation matrices spelled out entry by entry (Yang & Gao 2026)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import compose_run

import andrea.testing.schemes as checks
from andrea.config.resolve import resolve_run
from andrea.model.flops import flops_per_token
from andrea.model.residuals.mhc import n_streams, permutation_matrices
from andrea.model.residuals.sinkhorn import sinkhorn, sinkhorn_knopp
from andrea.model.transformer import ANDREA, ModelConfig, count_parameters
from andrea.testing.schemes import BASE, idx

pytestmark = pytest.mark.usefixtures("one_thread")

VARIANTS = [("mhc", 4), ("mhc_lite", 4), ("mhc", 2), ("mhc_lite", 3), ("mhc", 1), ("mhc_lite", 1)]
IDS = [f"{r}_n{n}" for r, n in VARIANTS]


def cfg_of(residual, n, **kw):
    return ModelConfig(**{**BASE, **kw}, residual=residual, mhc_streams=n)


def randomise(model, seed=3):
    """Move the mappings off their init (phi = 0 would hide the dynamic part)."""
    checks.randomise_stream_mappings(model.mhc, seed)
    return model


# ---------------------------------------------------------------------------------------------
# The formulas, written out
# ---------------------------------------------------------------------------------------------
def naive_sinkhorn(M, iters=20):
    """Eq. 9 in the exp domain: M(0) = exp(H~); M(t) = T_r(T_c(M(t-1)))."""
    n = M.shape[-1]
    M = torch.exp(M)
    for _ in range(iters):
        cols = [sum(M[..., i, j] for i in range(n)) for j in range(n)]
        M = torch.stack(
            [torch.stack([M[..., i, j] / cols[j] for j in range(n)], -1) for i in range(n)], -2
        )
        rows = [sum(M[..., i, j] for j in range(n)) for i in range(n)]
        M = torch.stack(
            [torch.stack([M[..., i, j] / rows[i] for j in range(n)], -1) for i in range(n)], -2
        )
    return M


def naive_mappings(m, streams):
    """H_pre [.., n], H_post [.., n], H_res [.., n, n] for one sublayer from its n streams."""
    n = m.n
    x = torch.cat(streams, dim=-1)  # vec(x_l)
    xn = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    h = xn @ m.phi
    pre = m.gate[0] * h[..., :n] + m.bias[:n]
    post = m.gate[1] * h[..., n : 2 * n] + m.bias[n : 2 * n]
    res = m.gate[2] * h[..., 2 * n :] + m.bias[2 * n :]
    h_pre = 1 / (1 + torch.exp(-pre))
    h_post = 2 / (1 + torch.exp(-post))
    if m.lite:
        e = torch.exp(res - res.max(-1, keepdim=True).values)
        h_res = checks.naive_h_res_lite(e / e.sum(-1, keepdim=True), n)
    else:
        h_res = naive_sinkhorn(res.reshape(*res.shape[:-1], n, n))
    return h_pre, h_post, h_res


def naive_logits(model, x):
    """The stream update with mHC's mappings (`naive_mappings`) for every sublayer."""
    return checks.naive_stream_logits(
        model, x, n_streams(model.cfg), lambda l, streams: naive_mappings(model.mhc[l], streams)
    )


@pytest.mark.parametrize("residual,n", VARIANTS, ids=IDS)
def test_matches_the_papers_formula_fp64_outputs_and_grads(residual, n):
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of(residual, n)).double())
    grads = checks.assert_matches_the_formula(
        model, lambda t: naive_logits(model, t), idx(), idx(seed=2)
    )
    assert all(grads[f"mhc.{l}.phi"].abs().sum() > 0 for l in range(4))  # the dynamic part learns


# ---------------------------------------------------------------------------------------------
# H_res is doubly stochastic; n = 1 is the identity residual
# ---------------------------------------------------------------------------------------------
def test_sinkhorn_matches_the_exp_domain_iteration_and_is_doubly_stochastic_to_its_convergence():
    """Rows sum to 1 to rounding (Eq. 9 ends with T_r); columns only as far as 20 iterations
    converge: within 1e-9 for N(0, 0.5^2) logits, but 1e-2 off for some of N(0, 2^2) -- the
    approximation gap that motivates mHC-lite (Yang & Gao 2026, limitation (i))."""
    g = torch.Generator().manual_seed(0)
    ones = torch.ones(2000, 4, dtype=torch.float64)
    for scale, col_tol in ((0.5, 1e-9), (2.0, None)):
        logits = scale * torch.randn(2000, 4, 4, generator=g, dtype=torch.float64)
        M = sinkhorn(logits)
        torch.testing.assert_close(M, naive_sinkhorn(logits), atol=1e-13, rtol=1e-12)
        assert (M > 0).all()
        torch.testing.assert_close(M.sum(-1), ones, atol=1e-13, rtol=0)
        col_err = (M.sum(-2) - 1).abs().max().item()
        assert col_err < col_tol if col_tol else col_err > 1e-3


@pytest.mark.parametrize("recompute", [False, True], ids=["store", "recompute"])
def test_sinkhorn_knopps_hand_written_backward_is_the_loops_and_recompute_keeps_no_iterate(
    recompute,
):
    """sinkhorn_knopp (its backward by hand) against autograd through the plain loop `sinkhorn`,
    in fp64 for several shapes: the outputs within 1e-13, the gradients within 1e-12 (both
    measured 0 here), and gradcheck's finite differences. Saved for the backward: the output
    and the 39 iterates, or with `recompute` the output and the logits only. Under bf16
    autocast (fp32 logits) the output, the gradient and their dtype do not change."""
    g = torch.Generator().manual_seed(0)
    for shape in [(4, 4), (2, 3, 4, 4), (5, 2, 2), (3, 1, 1), (2, 3, 3)]:
        x = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
        dM = torch.randn(shape, generator=g, dtype=torch.float64)
        ref, (ref_grad,) = sinkhorn(x), torch.autograd.grad(sinkhorn(x), x, dM)
        M = sinkhorn_knopp(x, recompute)
        (grad,) = torch.autograd.grad(M, x, dM)
        torch.testing.assert_close(M, ref, atol=1e-13, rtol=0)
        torch.testing.assert_close(grad, ref_grad, atol=1e-12, rtol=0)
        assert torch.autograd.gradcheck(lambda t: sinkhorn_knopp(t, recompute, iters=5), (x,))

    saved = []
    x = torch.randn(2, 3, 4, 4, generator=g, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        M = sinkhorn_knopp(x, recompute)
    assert saved[0] is M and len(saved) == (2 if recompute else 40)
    assert saved[1] is x if recompute else all(t.shape == (4, 4, 6) for t in saved[1:])
    (grad,) = torch.autograd.grad(M, x, torch.ones_like(M))
    with torch.autocast("cpu", torch.bfloat16):
        M16 = sinkhorn_knopp(x, recompute)
        (grad16,) = torch.autograd.grad(M16, x, torch.ones_like(M))
    assert M16.dtype == grad16.dtype == torch.float32
    assert torch.equal(M16, M) and torch.equal(grad16, grad)


@pytest.mark.parametrize("residual,n", VARIANTS, ids=IDS)
def test_model_h_res_is_doubly_stochastic(residual, n):
    """Every sublayer's H_res, per token: at init (near the identity) to rounding; from random
    (spread-out) mappings mHC-lite's still exactly (a convex combination of permutations), mHC's
    rows exactly and its columns within 0.1 (measured 0.04 here)."""
    torch.manual_seed(0)
    X = torch.randn(2, 5, n, BASE["d_model"], dtype=torch.float64)
    ones = torch.ones(2, 5, n, dtype=torch.float64)
    fresh = ANDREA(cfg_of(residual, n)).double()
    model = randomise(ANDREA(cfg_of(residual, n)).double())
    for m0, m in zip(fresh.mhc, model.mhc):
        h_res0 = m0(X)[2]
        torch.testing.assert_close(h_res0.sum(-2), ones, atol=1e-12, rtol=0)
        h_pre, h_post, h_res = m(X)
        assert (h_res >= 0).all() and ((h_pre > 0) & (h_pre < 1)).all()
        assert ((h_post > 0) & (h_post < 2)).all()
        torch.testing.assert_close(h_res.sum(-1), ones, atol=1e-13, rtol=0)
        tol = 1e-13 if residual == "mhc_lite" or n == 1 else 0.1
        torch.testing.assert_close(h_res.sum(-2), ones, atol=tol, rtol=0)


def test_permutation_matrices():
    P = permutation_matrices(3)
    assert P.shape == (6, 3, 3) and torch.equal(P[0], torch.eye(3))
    assert (P.sum(-1) == 1).all() and (P.sum(-2) == 1).all()
    assert len({tuple(p.flatten().tolist()) for p in P}) == 6


@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_one_stream_is_the_identity_residual_and_with_unit_gates_the_baseline(residual):
    """n = 1: the doubly stochastic 1 x 1 matrix is 1 (mHC Sec. 4.1: "recovering the original
    identity mapping"), whatever the mappings: x_{l+1} = x_l + H_post f(H_pre x_l) with scalar
    gates H_pre in (0, 1), H_post in (0, 2). With the gates pinned to 1 (no dynamic part,
    b_pre -> +inf, b_post = 0) and the merge of one stream being that stream, the model is the
    baseline: same weights, same logits."""
    checks.assert_one_stream_is_the_baseline_with_unit_gates(
        lambda: ANDREA(cfg_of(residual, 1)).double(), randomise, lambda model: model.mhc
    )


def test_init_follows_the_documented_choices():
    torch.manual_seed(0)
    for residual in ("mhc", "mhc_lite"):
        model = ANDREA(cfg_of(residual, 4))
        for l, m in enumerate(model.mhc):
            assert not m.phi.any() and torch.allclose(m.gate, torch.full((3,), 0.01))
            h_pre, h_post, h_res = m(torch.randn(1, 2, 4, BASE["d_model"]))
            # stream l mod n read and written most, H_res 0.999 on the diagonal (n = 4)
            assert h_pre[0, 0].argmax() == l % 4 and h_post[0, 0].argmax() == l % 4
            assert (h_res - torch.eye(4)).abs().max() < 1e-2


# ---------------------------------------------------------------------------------------------
# Causality, determinism, counting
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_causal(residual):
    torch.manual_seed(0)
    checks.assert_causal(randomise(ANDREA(cfg_of(residual, 4))))


@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_same_seed_same_model_same_logits_and_grads(residual):
    checks.assert_same_seed_same_logits_and_grads(lambda: ANDREA(cfg_of(residual, 4)))


@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_recompute_keeps_the_loss_and_every_gradient_bit_for_bit(residual):
    """model.mhc_recompute (the default) rebuilds the streams and H_res in the backward with the
    forward's own operations: the logits and all gradients equal storing them exactly (same
    machine), at n = 4 with the mappings off their init."""
    checks.assert_recompute_is_bit_for_bit(
        ModelConfig(**{**BASE, "n_layer": 3}, residual=residual, mhc_streams=4),
        "mhc_recompute",
        randomise,
    )


def test_recompute_takes_true_or_false_only():
    """(From the command line OmegaConf refuses a non-boolean for the bool field first.)"""
    with pytest.raises(ValueError, match=r"model\.mhc_recompute='yes' is invalid"):
        cfg_of("mhc", 4, mhc_recompute="yes")


@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_recompute_keeps_no_stream_for_the_backward(residual, monkeypatch):
    """Without recompute the backward keeps every x_l but the last (n·C per token each); with
    it none: the saves inside the tape are notes of a view, the streams rebuilt when needed."""
    checks.assert_recompute_keeps_no_stream(
        lambda on: ANDREA(cfg_of(residual, 4, mhc_recompute=on)), monkeypatch
    )


@pytest.mark.parametrize("residual", ["mhc", "mhc_lite"])
def test_one_graph_for_torch_compile_and_bf16_autocast_close_to_fp32(residual):
    """The mappings, Sinkhorn's loop and the stream updates trace into one graph under bf16
    autocast (how GPU runs train); the coefficients and streams stay fp32 there, so the logits
    are within 0.05 of fp32 (logits ~1; the sublayers' bf16 matmuls set this) and every
    gradient is finite."""
    torch.manual_seed(0)
    checks.assert_one_graph_under_bf16_autocast(randomise(ANDREA(cfg_of(residual, 4, n_layer=3))))


@pytest.mark.parametrize("residual,n", VARIANTS, ids=IDS)
def test_parameter_count_formula(residual, n):
    cfg = cfg_of(residual, n)
    d, L = BASE["d_model"], 4
    checks.assert_parameter_counts_agree(cfg, "mhc.", 3 * L)
    k = math.factorial(n) if residual == "mhc_lite" else n * n
    extra = count_parameters(cfg).total - count_parameters(ModelConfig(**BASE)).total
    assert extra == L * (n * d * (2 * n + k) + 2 * n + k + 3)


# FLOPs per token, by hand, for d = 8, L = 4 sublayers, n = 2 (k = 4 for mHC, 2! = 2 for lite):
#   projection 2 * (n d) * (2n + k): mHC 2*16*8 = 256, lite 2*16*6 = 192
#   mix        2nd + 2n^2 d + 2nd = 32 + 64 + 32 = 128
#   norm       2nd = 32
#   Sinkhorn   4 n^2 * 20 = 320 (mHC); lite's combination 2 * n! * n^2 = 16
#   per sublayer: mHC 256 + 128 + 32 + 320 = 736; lite 192 + 128 + 32 + 16 = 368
@pytest.mark.parametrize("residual,depth", [("mhc", 4 * 736), ("mhc_lite", 4 * 368)])
def test_flops_by_hand(residual, depth):
    cfg = cfg_of(residual, 2)
    f = flops_per_token(cfg, 12)
    assert f.depth == depth
    base = flops_per_token(ModelConfig(**BASE), 12)
    assert f.forward == base.forward + depth and f.training == 3 * f.forward


@pytest.mark.parametrize("residual,n", [("mhc", 4), ("mhc_lite", 4), ("mhc", 2)], ids=str)
def test_flops_match_flop_counter_mode(residual, n):
    """Every mHC matmul (projection, H_pre/H_res/H_post, mHC-lite's permutation combination) is
    one FlopCounterMode sees: the measured forward equals the predicted matmul FLOPs exactly
    (the RMS and Sinkhorn terms are elementwise, counted by hand above)."""
    checks.assert_flop_counter_sees_every_matmul(cfg_of(residual, n))


# ---------------------------------------------------------------------------------------------
# From the command line: labels, bad input, the sweep
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "model,n,label",
    [("mhc", None, "mhc_n4"), ("mhc_lite", None, "mhc_lite_n4"), ("mhc", 2, "mhc_n2")],
)
def test_reaches_the_model_with_its_label(model, n, label):
    # the budget counts the baseline's parameters, as for every variant
    spec = checks.resolve_on_the_baselines_budget(model, *([f"model.mhc_streams={n}"] if n else []))
    assert spec.variant == model and spec.label == label
    assert spec.model.residual == model and n_streams(spec.model) == (n or 4)


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["model=baseline", "model.mhc_streams=4"], "model.mhc_streams=4 applies to model=mhc"),
        (["model=attnres_full", "model.mhc_streams=2"], "model.mhc_streams=2 applies"),
        (["model=mhc", "model.mhc_streams=0"], "model.mhc_streams=0 is invalid"),
        (["model=mhc_lite", "model.mhc_streams=7"], "model.mhc_streams=7 is too many"),
        (["model=mhc", "model.attnres_window=2"], "model.attnres_window=2 applies to"),
        (["model=mhc", "model.block_size=2"], "model.block_size=2 applies to model=attnres_block"),
    ],
)
def test_bad_input_fails_before_launch_naming_the_key(overrides, key):
    checks.assert_refused_naming_the_key(overrides, key)


def test_rivals_sweep_composes():
    cfg = compose_run(["sweeps=scaling_law_rivals"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    labels = {
        resolve_run(
            compose_run(["sweeps=scaling_law_rivals", f"model={m}", "size=andrea-12m"])
        ).label
        for m in params["model"].split(",")
    }
    assert labels == {"baseline", "attnres_block_n8", "denseformer", "mhc_n4", "mhc_lite_n4"}


@pytest.mark.slow
def test_resume_is_exact_and_the_analysis_groups_by_its_label(tmp_path, data_cache):
    """A tiny mHC-lite run interrupted and resumed ends bit-identical to an uninterrupted one;
    analysis.inputs.collect reads its label from results.json."""
    from analysis.inputs.collect import collect_dir

    checks.assert_resume_is_exact(
        tmp_path / "sweep" / "full", tmp_path / "split", ["model=mhc_lite"], "mhc_lite_n4", "mhc."
    )
    assert {r.label for r in collect_dir(tmp_path / "sweep").runs} == {"mhc_lite_n4"}
