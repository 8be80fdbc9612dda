"""The ANDREA model: config validation, counting, the three residual schemes, introspection."""

import math

import pytest
import torch
import torch.nn.functional as F

from andrea.model.residuals.attnres import depth_block, n_sources
from andrea.model.residuals.depth_op import depth_attention_reference
from andrea.model.transformer import (
    ANDREA,
    RESIDUALS,
    ModelConfig,
    ParamCount,
    count_parameters,
    param_count_formula,
)

SCHEMES = [
    ("baseline", 4),
    ("attnres_full", 4),
    ("attnres_block", 1),
    ("attnres_block", 3),
    ("attnres_block", 4),
    ("attnres_block", 100),
]  # L = 4 below: 3 and 100 don't divide


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: threads only add contention


def tiny(residual="baseline", block_size=4, n_layer=2, **kw):
    base = dict(n_layer=n_layer, n_head=2, d_model=16, vocab_size=64, context_length=16)
    return ModelConfig(**{**base, **kw}, residual=residual, block_size=block_size)


def build(cfg, seed=0, random_queries=False):
    torch.manual_seed(seed)
    model = ANDREA(cfg)
    if (
        random_queries and getattr(model, "depth", None) is not None
    ):  # leave the uniform init: exercise softmax
        with torch.no_grad():
            for dep in model.depth:
                dep.query.normal_(0.0, 3.0)
                dep.key_norm_weight.uniform_(0.5, 1.5)
    return model


def idx(B=2, T=12, vocab=64, seed=1):
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field,kw",
    [
        ("d_model", dict(d_model=30, n_head=4)),
        ("block_size", dict(block_size=0)),
        ("residual", dict(residual="attnres")),
        ("vocab_size", dict(vocab_size=0)),
        ("context_length", dict(context_length=-1)),
        ("n_layer", dict(n_layer=0)),
        ("n_head", dict(n_head=0)),
        ("ln_eps", dict(ln_eps=0.0)),
    ],
)
def test_bad_config_raises_naming_the_field(field, kw):
    base = dict(n_layer=2, n_head=2, d_model=16)
    with pytest.raises(ValueError, match=field) as e:
        ModelConfig(**{**base, **kw})
    assert str(kw[field]) in str(e.value)


def test_block_size_only_matters_for_block():
    # S larger than L is valid (one block); S only changes attnres_block.
    assert n_sources(tiny("attnres_block", block_size=100), 3) == 2
    assert n_sources(tiny("attnres_full", block_size=100), 3) == 4


def test_sequence_longer_than_context_raises():
    with pytest.raises(ValueError, match="context_length"):
        build(tiny())(idx(T=17))


# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------
ANDREA_120M = dict(n_layer=12, n_head=12, d_model=768, vocab_size=8449, context_length=1024)


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("residual", RESIDUALS)
def test_param_count_andrea_120m_matches_closed_form(residual, tie):
    cfg = ModelConfig(**ANDREA_120M, residual=residual, tie_embeddings=tie)
    assert count_parameters(cfg) == param_count_formula(cfg)
    if residual == "baseline":
        # 12 d^2 + 13 d per block + final LN; embeddings 8449*768 + 1024*768.
        assert count_parameters(cfg).non_embedding == 85_056_000
        assert count_parameters(cfg).total == (92_331_264 if tie else 98_820_096)


def test_attnres_adds_exactly_two_d_per_layer_and_output():
    base = count_parameters(ModelConfig(**ANDREA_120M))
    L, d = 24, 768
    for residual in ("attnres_full", "attnres_block"):
        c = count_parameters(ModelConfig(**ANDREA_120M, residual=residual, block_size=4))
        assert c.total - base.total == (L + 1) * 2 * d
        assert c.non_embedding - base.non_embedding == (L + 1) * 2 * d


def test_count_of_a_model_equals_count_of_its_config_and_meta_build():
    cfg = tiny("attnres_block", 3, tie_embeddings=False)
    assert isinstance(count_parameters(cfg), ParamCount)
    assert count_parameters(build(cfg)) == count_parameters(cfg)
    with torch.device("meta"):
        m = ANDREA(ModelConfig(**ANDREA_120M, residual="attnres_full"))
    assert all(p.is_meta for p in m.parameters())


# ---------------------------------------------------------------------------------------------
# Forward behaviour
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("residual,S", SCHEMES)
def test_causal(residual, S):
    model = build(tiny(residual, S), random_queries=True)
    x = idx()
    y = x.clone()
    y[:, 7] = (y[:, 7] + 1) % 64
    for train in (True, False):
        model.train(train)
        a, b = model(x), model(y)
        torch.testing.assert_close(a[:, :7], b[:, :7], atol=0, rtol=0)
        assert not torch.allclose(a[:, 7:], b[:, 7:])


@pytest.mark.parametrize("residual,S", SCHEMES[1:])
def test_two_phase_inference_equals_training_path(residual, S):
    model = build(tiny(residual, S, n_layer=3), random_queries=True)
    x = idx()
    train_logits = model(x)  # training path: per-layer fast op
    model.eval()
    with torch.no_grad():
        eval_logits = model(x)  # two-phase path
    torch.testing.assert_close(eval_logits, train_logits, atol=1e-5, rtol=1e-5)


def test_block_size_one_equals_full_exactly():
    full = build(tiny("attnres_full", n_layer=3), random_queries=True)
    block = ANDREA(tiny("attnres_block", 1, n_layer=3))
    block.load_state_dict(full.state_dict())
    x = idx()
    assert torch.equal(full(x), block(x))
    full.eval(), block.eval()
    assert torch.equal(full(x), block(x))


def test_block_size_at_least_L_is_one_block_with_embedding_separate():
    # S >= L: every layer sees [b_0] or [b_0, partial]; depth weights have at most 2 entries.
    model = build(tiny("attnres_block", 4, n_layer=2))
    _, stats = model(idx(), return_stats=True)
    assert [len(w) for w in stats["depth_weights"]] == [1, 2, 2, 2, 2]


@pytest.mark.parametrize("residual,S", SCHEMES[1:])
def test_zero_init_gives_uniform_depth_weights(residual, S):
    cfg = tiny(residual, S)
    model = build(cfg)
    _, stats = model(idx(), return_stats=True)
    L = cfg.n_sublayers
    assert len(stats["depth_weights"]) == L + 1
    for l, w in enumerate(stats["depth_weights"]):
        assert w.shape == (n_sources(cfg, l),)
        torch.testing.assert_close(w, torch.full_like(w, 1 / len(w)))


def test_stats_shapes_and_no_change_to_logits():
    for residual, S in SCHEMES:
        model = build(tiny(residual, S), random_queries=True)
        x = idx()
        logits, stats = model(x, return_stats=True)
        torch.testing.assert_close(logits, model(x), atol=1e-6, rtol=1e-6)
        assert stats["layer_rms"].shape == (4,) and (stats["layer_rms"] > 0).all()
        if residual == "baseline":
            assert stats["depth_weights"] == []
        else:
            for w in stats["depth_weights"]:
                assert w.dim() == 1 and abs(w.sum().item() - 1) < 1e-5


def _attnres_from_baseline_gap(residual, S, scale_eps, n_layer=12):
    kw = dict(n_layer=n_layer, n_head=4, d_model=64, vocab_size=256, context_length=64)
    base = build(ModelConfig(**kw)).eval()
    model = ANDREA(
        ModelConfig(**kw, residual=residual, block_size=S, attnres_scale_eps=scale_eps)
    ).eval()
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("depth.") for k in missing)
    x = idx(T=64, vocab=256)
    with torch.no_grad():
        return (model(x) - base(x)).abs().max().item()


@pytest.mark.parametrize(
    "residual,S", [("attnres_full", 1), ("attnres_block", 4), ("attnres_block", 5)]
)
def test_eps_question_attnres_from_baseline_weights_matches_baseline(residual, S):
    """At zero init AttnRes feeds each LayerNorm h_l / n. Measured on a 12-block d=64 model
    (logits ~1): with the baseline's eps = 1e-5 unchanged the logit gap is 0.65 (Full) / 0.16
    (Block S=4): eps dominates. With eps / n^2 per layer (ModelConfig.layer_norm_eps) the gap
    is ~3e-7, fp32 rounding. The default is the report's model (eps unchanged); the scaled eps
    is the switch `attnres_scale_eps=true` (docs/ablations.md). Both are asserted here."""
    scaled = _attnres_from_baseline_gap(residual, S, scale_eps=True)
    unscaled = _attnres_from_baseline_gap(residual, S, scale_eps=False)
    assert scaled < 2e-6
    assert unscaled > 1e-2


# ---------------------------------------------------------------------------------------------
# Training behaviour
# ---------------------------------------------------------------------------------------------
TEXT = b"the quick brown fox jumps over the lazy dog. " * 4


@pytest.mark.parametrize("residual,S", [("baseline", 4), ("attnres_full", 4), ("attnres_block", 3)])
def test_tiny_model_overfits_and_every_parameter_learns(residual, S):
    cfg = ModelConfig(
        n_layer=2,
        n_head=2,
        d_model=32,
        vocab_size=256,
        context_length=64,
        residual=residual,
        block_size=S,
    )
    model = build(cfg)
    data = torch.tensor(list(TEXT[:65]), dtype=torch.long)
    x, y = data[:-1][None], data[1:][None]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for _ in range(60):
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 0.9 * math.log(256)
    assert losses[-1] < 0.25 * losses[0]
    opt.zero_grad()
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    # Layer 0 has one source (the embedding): softmax over one source is 1, so its query and
    # key-norm weight never receive a gradient. Every other parameter must.
    dead = {"depth.0.query", "depth.0.key_norm_weight"}
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert (p.grad.abs().sum() > 0) == (name not in dead), name


def test_pseudo_queries_get_gradient_at_zero_init():
    model = build(tiny("attnres_full"))
    F.cross_entropy(model(idx()).flatten(0, 1), idx(seed=2).flatten()).backward()
    for l, dep in enumerate(model.depth):
        # Layer 0 has one source: a zero (not missing) gradient, so DDP sees every parameter.
        assert (dep.query.grad.abs().sum() > 0) == (l > 0), l


def test_same_seed_same_logits():
    for residual, S in SCHEMES:
        a, b = build(tiny(residual, S), seed=5), build(tiny(residual, S), seed=5)
        assert torch.equal(a(idx()), b(idx()))


def _naive_attnres_logits(model, x):
    """docs/attnres.md written out with Python lists and the reference op, for comparison."""
    cfg, S = model.cfg, depth_block(model.cfg)
    h0 = model.wte(x) + model.wpe(torch.arange(x.shape[1]))
    blocks, partial = [h0], None
    for l, f in enumerate(model.sublayers()):
        if l % S == 0 and partial is not None:
            blocks, partial = blocks + [partial], None
        sources = blocks + ([partial] if partial is not None else [])
        dep = model.depth[l]
        h, _ = depth_attention_reference(sources, dep.query, dep.key_norm_weight, cfg.key_eps)
        v = f(h)
        partial = v if partial is None else partial + v
    dep = model.depth[-1]
    h, _ = depth_attention_reference(
        blocks + [partial], dep.query, dep.key_norm_weight, cfg.key_eps
    )
    return model.lm_head(model.ln_f(h))


@pytest.mark.parametrize(
    "residual,S",
    [("attnres_full", 4), ("attnres_block", 2), ("attnres_block", 4), ("attnres_block", 5)],
)
def test_optimised_model_matches_naive_reference_outputs_and_grads(residual, S):
    """Source stack, custom backward and two-phase inference against the naive formula: logits
    and every parameter's gradient to 1e-5 (fp32)."""
    model = build(tiny(residual, S, n_layer=3), random_queries=True)
    x, y = idx(), idx(seed=2)
    fast = model(x)
    F.cross_entropy(fast.flatten(0, 1), y.flatten()).backward()
    fast_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    ref = _naive_attnres_logits(model, x)
    F.cross_entropy(ref.flatten(0, 1), y.flatten()).backward()
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(fast_grads[n], p.grad, atol=1e-5, rtol=1e-4, msg=n)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("residual,S", [("attnres_full", 4), ("attnres_block", 3)])
def test_traceable_by_dynamo_without_graph_breaks(residual, S, train, autocast):
    """One graph for torch.compile: the custom autograd op, the source stack and the two-phase
    path all trace, also under bf16 autocast (how GPU runs train)."""
    import torch._dynamo as dynamo

    model = build(tiny(residual, S), random_queries=True).train(train)
    dynamo.reset()
    with torch.set_grad_enabled(train), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        explained = dynamo.explain(model)(idx())
    dynamo.reset()
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit inside inductor
@pytest.mark.parametrize(
    "residual,S,backend", [("attnres_full", 4, "aot_eager"), ("attnres_block", 3, "inductor")]
)
def test_compiled_model_matches_eager(residual, S, backend):
    """torch.compile gives the same loss and gradients as eager. Block AttnRes goes through
    inductor (CPU), whose C++ build costs ~70 CPU-s with an empty cache; Full, whose custom op and
    source stack Block's path also runs, through dynamo and AOTAutograd only (seconds): what it
    adds is the trace, which the one-graph test above also holds it to."""
    model = build(tiny(residual, S), random_queries=True)
    x, y = idx(), idx(seed=2)
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend)
    # inductor's C++ builds in this process, for training and for eval (a recompile): a pool of
    # compile workers each imports torch first (~10 CPU-s more on 2 cores, measured), for a
    # handful of kernels
    import torch._inductor.config as inductor_config

    with inductor_config.patch(compile_threads=1):
        loss_c = F.cross_entropy(compiled(x).flatten(0, 1), y.flatten())
        loss_c.backward()
        torch.testing.assert_close(loss_c, loss, atol=1e-5, rtol=1e-5)
        for n, p in model.named_parameters():
            torch.testing.assert_close(p.grad, grads[n], atol=1e-4, rtol=1e-3, msg=n)
        model.eval()
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
    torch._dynamo.reset()


@pytest.mark.parametrize("residual,S", [("attnres_full", 4), ("attnres_block", 3)])
def test_bf16_autocast_close_to_fp32(residual, S):
    """Under bf16 autocast the depth scores and softmax stay fp32 and block sums accumulate in
    fp32 (like the baseline's stream): logits within 0.05 of fp32 (logits ~1; the matmuls' bf16
    rounding sets this), depth weights fp32, and the two-phase path agrees with training's."""
    model = build(tiny(residual, S, n_layer=3), random_queries=True)
    x = idx()
    ref = model(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        train_logits, stats = model(x, return_stats=True)
        model.eval()
        with torch.no_grad():
            eval_logits = model(x)
    assert all(w.dtype == torch.float32 for w in stats["depth_weights"])
    torch.testing.assert_close(train_logits.float(), ref, atol=0.05, rtol=0)
    torch.testing.assert_close(eval_logits.float(), train_logits.float(), atol=0.02, rtol=0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.train()
        F.cross_entropy(model(x).float().flatten(0, 1), x.flatten()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_eval_mode_with_grad_uses_the_differentiable_path():
    """model.eval() under autograd (e.g. saliency) must still give true gradients."""
    model = build(tiny("attnres_block", 3), random_queries=True)
    x, y = idx(), idx(seed=2)
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.eval()
    F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[n], msg=n)
