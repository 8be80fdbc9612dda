"""Tests for andrea/model/flops.py: hand-computed counts, a measured count (FlopCounterMode) on the
real model, monotonicity, 6·N·D, PFLOP/s-days, the peak table and MFU. All fast (CPU, < 5 s)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from andrea.model.flops import flops_per_token, six_n_d, training_flops, training_flops_per_token
from andrea.model.residuals.attnres import n_sources, source_counts
from andrea.run.units import PEAK_FLOPS, PFLOPS_DAY, match_device, mfu, peak_flops, to_pflops_days
from andrea.testing.flops import measured_forward_per_token


def n_depth_sources(cfg):
    """AttnRes's source counts; [] for a scheme without depth attention."""
    return source_counts(cfg) if cfg.residual.startswith("attnres") else []


def cfg(
    n_layer=2,
    n_head=2,
    d_model=8,
    vocab_size=11,
    context_length=4,
    residual="baseline",
    block_size=4,
    **switches,
):
    # flops.py is duck-typed: a plain namespace with ModelConfig's field names is enough.
    return SimpleNamespace(
        n_layer=n_layer,
        n_head=n_head,
        d_model=d_model,
        vocab_size=vocab_size,
        context_length=context_length,
        residual=residual,
        block_size=block_size,
        tie_embeddings=True,
        **switches,
    )


# ---------------------------------------------------------------------------------------------
# Hand-computed counts: n_layer=2 (L=4 sublayers), d=8, 2 heads, V=11, T=4
# ---------------------------------------------------------------------------------------------
# Per transformer block, per token (2 FLOPs per multiply-add):
#   QKV      8 x 24 matmul          2*8*24        =  384
#   out proj 8 x 8                  2*8*8         =  128
#   QK^T     4 keys x 8 dims        2*4*8         =   64   (all T keys: PaLM, no causal halving)
#   AV       4 values x 8 dims      2*4*8         =   64
#   MLP      8x32 and 32x8          2*8*32*2      = 1024
#   block total                                   = 1664;  x2 blocks = 3328
# LM head   8 x 11                  2*8*11        =  176
# Baseline forward = 3328 + 176 = 3504.
BASELINE_FWD = 3504
# Depth attention: 6*d = 48 FLOPs per source (score 2d, mix 2d, key sum of squares 2d); a layer
# with a single source is free (softmax of one score = 1).
#   Full      sources per layer 1,2,3,4, output 5        -> 2+3+4+5 = 14 -> 672
#   Block S=2 blocks {0,1},{2,3}: layers 1, 2(b0+partial), 2(b0,b1), 3(b0,b1,partial);
#             output b0,b1,b2 = 3                          -> 2+2+3+3 = 10 -> 480
#   Block S=3 blocks {0,1,2},{3}: layers 1, 2, 2, then layer 3 opens block 2: b0,b1 = 2;
#             output 3                                     -> 2+2+2+3 = 9  -> 432
#   Block S=4 one block: layers 1, 2, 2, 2; output 2       -> 8 -> 384
HAND = {
    ("baseline", None): (BASELINE_FWD, []),
    ("attnres_full", None): (BASELINE_FWD + 672, [1, 2, 3, 4, 5]),
    ("attnres_block", 1): (BASELINE_FWD + 672, [1, 2, 3, 4, 5]),  # S = 1 is Full AttnRes
    ("attnres_block", 2): (BASELINE_FWD + 480, [1, 2, 2, 3, 3]),
    ("attnres_block", 3): (BASELINE_FWD + 432, [1, 2, 2, 2, 3]),
    ("attnres_block", 4): (BASELINE_FWD + 384, [1, 2, 2, 2, 2]),
}


@pytest.mark.parametrize("residual,block_size", list(HAND))
def test_hand_computed(residual, block_size):
    expected_fwd, expected_sources = HAND[(residual, block_size)]
    c = cfg(residual=residual, block_size=block_size or 4)
    assert n_depth_sources(c) == expected_sources
    b = flops_per_token(c, 4)
    assert b.forward == expected_fwd
    assert b.training == training_flops_per_token(c, 4) == 3 * expected_fwd
    assert training_flops(c, 4, tokens=1000) == 3000 * expected_fwd
    # components
    assert (b.attn_qkv, b.attn_out, b.attn_qk, b.attn_av, b.mlp, b.lm_head) == (
        768,
        256,
        128,
        128,
        2048,
        176,
    )
    assert b.depth == expected_fwd - BASELINE_FWD
    assert b.depth_score == b.depth_mix == b.depth_key_norm == b.depth // 3
    assert b.matmul == b.forward - b.depth_key_norm
    assert b.as_dict()["forward"] == expected_fwd


def test_seq_len_defaults_to_context_length_and_enters_only_the_scores():
    c = cfg(context_length=4)
    assert flops_per_token(c) == flops_per_token(c, 4)
    longer = flops_per_token(c, 8)
    # Doubling T adds 2*T*d more per score matmul per layer: 2 layers x 2 matmuls x 2*4*8 = 256.
    assert longer.forward - flops_per_token(c, 4).forward == 256
    # PaLM: training attention-score term = 12 * n_layer * T * d.
    assert 3 * longer.attention_scores == 12 * 2 * 8 * 8


def test_palm_formula_and_six_n_d():
    """Baseline training FLOPs/token = 6·N_matmul + 12·n_layer·T·d + 6·d·V, where N_matmul is
    the matmul weights of the blocks (12·d² per block) and 6·d·V the (tied) LM head."""
    n_layer, d, T, V = 12, 768, 1024, 8449
    c = cfg(n_layer=n_layer, n_head=12, d_model=d, vocab_size=V, context_length=T)
    n_matmul = 12 * d * d * n_layer
    attn = 12 * n_layer * T * d
    head = 6 * d * V
    assert training_flops_per_token(c) == six_n_d(n_matmul, 1) + attn + head
    assert six_n_d(10, 7) == 420


def test_pflops_days():
    assert PFLOPS_DAY == 8.64e19
    assert to_pflops_days(8.64e19) == 1.0
    assert to_pflops_days(0) == 0.0


def test_invalid_config_errors_name_the_value():
    with pytest.raises(ValueError, match="attnres_ful'"):
        flops_per_token(cfg(residual="attnres_ful"))
    with pytest.raises(ValueError, match="block_size"):
        flops_per_token(cfg(residual="attnres_block", block_size=0))
    with pytest.raises(ValueError, match="seq_len"):
        flops_per_token(cfg(), 0)


# ---------------------------------------------------------------------------------------------
# Monotonicity
# ---------------------------------------------------------------------------------------------
def test_more_layers_width_context_vocab_cost_more():
    base = flops_per_token(cfg(n_layer=4, d_model=64, vocab_size=100), 32).forward
    assert flops_per_token(cfg(n_layer=5, d_model=64, vocab_size=100), 32).forward > base
    assert flops_per_token(cfg(n_layer=4, d_model=96, vocab_size=100), 32).forward > base
    assert flops_per_token(cfg(n_layer=4, d_model=64, vocab_size=200), 32).forward > base
    assert flops_per_token(cfg(n_layer=4, d_model=64, vocab_size=100), 64).forward > base
    for residual in ("attnres_full", "attnres_block"):
        small = flops_per_token(cfg(n_layer=4, residual=residual), 4).forward
        assert flops_per_token(cfg(n_layer=5, residual=residual), 4).forward > small


@pytest.mark.parametrize("n_layer", [1, 2, 3, 6, 12])
def test_full_ge_block_ge_baseline(n_layer):
    L = 2 * n_layer
    base = flops_per_token(cfg(n_layer=n_layer), 16).forward
    full = flops_per_token(cfg(n_layer=n_layer, residual="attnres_full"), 16).forward
    prev = full
    for S in range(1, L + 2):
        block = flops_per_token(
            cfg(n_layer=n_layer, residual="attnres_block", block_size=S), 16
        ).forward
        assert full >= block > base
        assert block <= prev  # larger blocks, fewer sources
        prev = block
    assert (
        flops_per_token(cfg(n_layer=n_layer, residual="attnres_block", block_size=1), 16).forward
        == full
    )


# Ablation switches and DenseFormer, same shape (docs/ablations.md). Full's sources per layer are
# 1, 2, 3, 4 and 5 for the output; 14 of them in layers with more than one source.
#   no key norm      score + mix only: 2 x 16 x 14                          = 448
#   sigmoid          a single source is not free: 15 sources x 48           = 720
#   input query      672 + W_l x, 2 d^2 = 128 for each of the 4 scored layers = 1184
#   static mix       the mix alone: 16 x 14                                  = 224
#   window 2         sources 1, 2, 3, 3, 3 -> 11 x 48                        = 528
#   4 heads          the d dims split, not copied                            = 672
#   DenseFormer      DWA after block 1 mixes 2 vectors, after block 2 three: 2 x 8 x 5 = 80
HAND_SWITCHES = [
    ("attnres_full", dict(attnres_key_norm=False), 448),
    ("attnres_full", dict(attnres_gate="sigmoid"), 720),
    ("attnres_full", dict(attnres_input_query=True), 1184),
    ("attnres_full", dict(attnres_static_mix=True), 224),
    ("attnres_full", dict(attnres_window=2), 528),
    ("attnres_full", dict(attnres_heads=4), 672),
    ("denseformer", {}, 80),
]


@pytest.mark.parametrize("residual,switches,depth", HAND_SWITCHES, ids=str)
def test_hand_computed_switches_and_denseformer(residual, switches, depth):
    b = flops_per_token(cfg(residual=residual, **switches), 4)
    assert b.depth == depth and b.forward == BASELINE_FWD + depth
    assert b.attn_qkv + b.attn_out + b.mlp + b.lm_head == 768 + 256 + 2048 + 176


# ---------------------------------------------------------------------------------------------
# Against the real model
# ---------------------------------------------------------------------------------------------
def _model_or_skip():
    try:
        from andrea.model.transformer import ANDREA, ModelConfig
    except ImportError as e:  # pragma: no cover - only while the model is being written
        pytest.skip(f"andrea.model does not import ({e}); the measured-count tests need it")
    return ANDREA, ModelConfig


@pytest.mark.parametrize(
    "residual,block_size",
    [
        ("attnres_full", 4),
        ("attnres_block", 1),
        ("attnres_block", 2),
        ("attnres_block", 3),
        ("attnres_block", 5),
        ("attnres_block", 6),
        ("attnres_block", 7),
    ],
)
def test_depth_sources_match_the_model(residual, block_size):
    _, ModelConfig = _model_or_skip()
    mc = ModelConfig(n_layer=3, n_head=2, d_model=8, residual=residual, block_size=block_size)
    assert n_depth_sources(mc) == [n_sources(mc, l) for l in range(mc.n_sublayers + 1)]


_SHAPE = dict(n_layer=3, n_head=4, d_model=32, vocab_size=50, context_length=16)
_B, _T = 2, 16


@pytest.mark.parametrize("tie", [True, False])
def test_measured_baseline_is_exact(tie):
    """Baseline: every matmul is an nn.Linear (addmm/mm), SDPA or the head, so the measured
    forward equals the predicted matmul count exactly; any difference is a counting error."""
    ANDREA, ModelConfig = _model_or_skip()
    mc = ModelConfig(**_SHAPE, residual="baseline", tie_embeddings=tie)
    measured = measured_forward_per_token(ANDREA(mc), _B, _T)
    predicted = flops_per_token(mc, _T)
    assert predicted.depth == 0
    assert measured == predicted.matmul == predicted.forward


@pytest.mark.parametrize(
    "residual,block_size",
    [("attnres_full", 4), ("attnres_block", 2), ("attnres_block", 3), ("attnres_block", 4)],
)
def test_measured_attnres(residual, block_size):
    """AttnRes: compare the measured depth-attention matmuls (AttnRes minus baseline, same shape)
    with the predicted score + mix terms, and the whole forward with `matmul`.

    Tolerances, and why: the training path of andrea/attnres.py scores with V @ (g*w) and mixes
    with alpha @ V -- exactly the 2·d·n + 2·d·n per layer counted here -- and today it matches
    exactly. The implementation is being optimised; an exact formulation that merely regroups
    the work (e.g. the two-phase Block path, which scores the first block's b_0 for every query
    and merges the partial sum elementwise) moves the measured depth term by a few per cent at
    this shape (-3 %..-7 % for S = 2..3, measured), so the depth term gets 10 %. The whole forward
    gets 1 %: the depth attention is ~3-4 % of it here, so a missing or doubled depth term fails,
    a regrouping does not. A failure with the depth term at ~50 % means the scores stopped being
    a matmul (e.g. (V * q).sum(-1)), which FlopCounterMode cannot see: the count may still be
    right, but then this test must measure the scores another way.
    """
    ANDREA, ModelConfig = _model_or_skip()
    torch.manual_seed(0)
    base = measured_forward_per_token(ANDREA(ModelConfig(**_SHAPE, residual="baseline")), _B, _T)
    mc = ModelConfig(**_SHAPE, residual=residual, block_size=block_size)
    model = ANDREA(mc)
    with torch.no_grad():  # zero-init queries give the same FLOPs, but exercise real scores
        for dep in model.depth:
            dep.query.normal_()
    measured = measured_forward_per_token(model, _B, _T)
    predicted = flops_per_token(mc, _T)
    measured_depth = measured - base
    predicted_depth = predicted.depth_score + predicted.depth_mix
    assert predicted_depth > 0
    assert measured_depth == pytest.approx(predicted_depth, rel=0.10), (
        f"depth attention: measured {measured_depth} FLOPs/token, predicted {predicted_depth}"
    )
    assert measured == pytest.approx(predicted.matmul, rel=0.01)


@pytest.mark.parametrize(
    "residual,block_size,switches",
    [
        ("denseformer", 4, {}),
        ("attnres_full", 4, dict(attnres_gate="sigmoid")),
        ("attnres_full", 4, dict(attnres_input_query=True, attnres_heads=2)),
        ("attnres_full", 4, dict(attnres_static_mix=True, attnres_window=3)),
        ("attnres_block", 2, dict(attnres_key_norm=False, attnres_window=2)),
    ],
    ids=str,
)
def test_measured_ablations_and_denseformer(residual, block_size, switches):
    """The general path and DenseFormer's DWA are einsum/matmul contractions, so FlopCounterMode
    sees scores, query projections and mixes. Tolerances as in test_measured_attnres. The
    general path also computes the single-source layers under softmax, which the count calls
    free (softmax of one score is 1; the fast path skips them): their work is added here, one
    score and one mix (2·d each; the mix alone for static mixing) and the query projection
    (2·d²) each."""
    ANDREA, ModelConfig = _model_or_skip()
    torch.manual_seed(0)
    base = measured_forward_per_token(ANDREA(ModelConfig(**_SHAPE, residual="baseline")), _B, _T)
    mc = ModelConfig(**_SHAPE, residual=residual, block_size=block_size, **switches)
    measured = measured_forward_per_token(ANDREA(mc), _B, _T)
    predicted = flops_per_token(mc, _T)
    d = mc.d_model
    single = sum(n == 1 for n in n_depth_sources(mc)) if mc.attnres_gate == "softmax" else 0
    per_single = (2 * d if mc.attnres_static_mix else 4 * d) + (
        2 * d * d if mc.attnres_input_query else 0
    )
    predicted_depth = predicted.depth - predicted.depth_key_norm + single * per_single
    assert predicted_depth > 0
    assert measured - base == pytest.approx(predicted_depth, rel=0.10), (
        f"depth: measured {measured - base} FLOPs/token, predicted {predicted_depth}"
    )
    assert measured == pytest.approx(predicted.matmul + single * per_single, rel=0.01)


# ---------------------------------------------------------------------------------------------
# Peak table and MFU
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,key,bf16",
    [
        ("NVIDIA A100-SXM4-80GB", "A100", 312e12),
        ("NVIDIA A100 80GB PCIe", "A100", 312e12),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989e12),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756e12),
        ("NVIDIA H100 NVL", "H100 NVL", 835e12),
        ("NVIDIA H200", "H200", 989e12),
        ("NVIDIA H200 NVL", "H200 NVL", 835e12),
        ("NVIDIA GH200 480GB", "GH200", 989e12),
        ("NVIDIA A10G", "A10G", 125e12),
        ("NVIDIA A10", "A10", 125e12),
        ("NVIDIA L4", "L4", 121e12),
        ("NVIDIA L40S", "L40S", 362e12),
        ("NVIDIA L40", "L40", 181e12),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2e12),
        ("AMD Instinct MI250X", "MI250X", 191.5e12),
        ("AMD Instinct MI300X", "MI300X", 1307.4e12),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", None),  # no bf16 tensor cores
        ("Tesla T4", "T4", None),
    ],
)
def test_device_matching(name, key, bf16):
    assert match_device(name) == key
    assert peak_flops(name, torch.bfloat16) == bf16
    assert peak_flops(name, "bf16") == bf16


def test_dtypes_and_unknown_devices():
    assert peak_flops("Tesla V100-SXM2-32GB", torch.float16) == 125e12
    assert peak_flops("Tesla V100-PCIE-32GB", "fp16") == 112e12
    assert peak_flops("NVIDIA A100-SXM4-40GB", "tf32") == 156e12
    assert peak_flops("NVIDIA A100-SXM4-40GB", torch.float32) == 19.5e12
    assert peak_flops("NVIDIA A100-SXM4-40GB", torch.float16) == 312e12
    for unknown in ("cpu", "", None, "NVIDIA RTX A4000", "NVIDIA GeForce RTX 3090 Ti"):
        assert peak_flops(unknown, torch.bfloat16) is None, unknown
    with pytest.raises(ValueError, match="int8"):
        peak_flops("NVIDIA H100 80GB HBM3", "int8")


def test_peak_table_is_dense_and_consistent():
    keys = {match_device(k) for k in PEAK_FLOPS}
    assert keys == set(PEAK_FLOPS), "every entry must be reachable from its own name"
    for key, row in PEAK_FLOPS.items():
        assert set(row) <= {"bf16", "fp16", "tf32", "fp32"}, key
        assert all(v > 0 for v in row.values()), key
        assert row.get("bf16", 0) <= 2.5e15, f"{key}: a sparsity figure? (dense only)"
        if "tf32" in row:
            assert row["tf32"] <= row["bf16"], key
        if "fp16" in row:
            assert row["fp32"] <= row["fp16"], key


def test_mfu():
    peak = peak_flops("NVIDIA H100 80GB HBM3", torch.bfloat16)
    assert mfu(0.4 * peak, peak) == pytest.approx(0.4)
    assert mfu(8 * 0.4 * peak, peak, n_devices=8) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="peak"):
        mfu(1e12, None)
    with pytest.raises(ValueError, match="n_devices"):
        mfu(1e12, peak, n_devices=0)
