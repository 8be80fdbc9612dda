"""The report's ablation switches and the rival residual DenseFormer (docs/ablations.md).

Every switch and DenseFormer are compared with their formula written out below, one source and
one head at a time, in fp64 (outputs and gradients); the defaults are checked against logits
that the code before the switches computed (commit 5b8efd0) for the same weights."""

import math

import pytest
import torch

from andrea.model.residuals import attnres as attnres_module
from andrea.model.residuals.attnres import depth_ablated, depth_block
from andrea.model.residuals.depth_op import depth_attention_reference
from andrea.model.residuals.depth_variants import depth_attention_general
from andrea.model.transformer import ANDREA, ModelConfig, count_parameters, param_count_formula
from andrea.testing.schemes import assert_matches_the_formula, outputs_and_grads

pytestmark = pytest.mark.usefixtures("one_thread")

BASE = dict(n_layer=3, n_head=2, d_model=16, vocab_size=64, context_length=16)
EPS = 1e-6

# (residual, block_size, switches): every switch on Full and on Block, a few combinations.
ABLATIONS = [
    ("attnres_full", 1, dict(attnres_key_norm=False)),
    ("attnres_full", 1, dict(attnres_gate="sigmoid")),
    ("attnres_full", 1, dict(attnres_input_query=True)),
    ("attnres_full", 1, dict(attnres_static_mix=True)),
    ("attnres_full", 1, dict(attnres_window=2)),
    ("attnres_full", 1, dict(attnres_heads=4)),
    ("attnres_block", 2, dict(attnres_key_norm=False)),
    ("attnres_block", 2, dict(attnres_gate="sigmoid")),
    ("attnres_block", 2, dict(attnres_input_query=True)),
    ("attnres_block", 2, dict(attnres_static_mix=True)),
    ("attnres_block", 2, dict(attnres_window=1)),
    ("attnres_block", 2, dict(attnres_heads=4)),
    ("attnres_full", 1, dict(attnres_gate="sigmoid", attnres_window=2, attnres_heads=2)),
    ("attnres_block", 3, dict(attnres_input_query=True, attnres_key_norm=False, attnres_heads=2)),
    ("attnres_full", 1, dict(attnres_static_mix=True, attnres_window=3)),
]
IDS = [f"{r}_s{S}+" + "+".join(f"{k[8:]}={v}" for k, v in sw.items()) for r, S, sw in ABLATIONS]


def cfg_of(residual, S, **switches):
    return ModelConfig(**BASE, residual=residual, block_size=S, **switches)


def randomise(model, seed=3):
    """Move the depth parameters off their init so that scores, heads and gates matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("depth.") or name.startswith("dwa."):
                scale = 0.3 if name.endswith("query_proj.weight") else 1.0
                p.copy_(p + scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def idx(B=2, T=12, seed=1):
    return torch.randint(
        0, BASE["vocab_size"], (B, T), generator=torch.Generator().manual_seed(seed)
    )


# ---------------------------------------------------------------------------------------------
# The formulas, written out (docs/ablations.md)
# ---------------------------------------------------------------------------------------------
def naive_mix(sources, query=None, W=None, g=None, logits=None, gate="softmax", heads=1):
    """One layer's mix, one head group and one source at a time."""
    n, d = len(sources), sources[0].shape[-1]
    if logits is not None:  # input-independent: softmax over learned logits, no keys
        e = [torch.exp(logits[i] - logits.max()) for i in range(n)]
        return sum(e[i] / sum(e) * sources[i] for i in range(n))
    dh = d // heads
    out = []
    for hd in range(heads):
        sl = slice(hd * dh, (hd + 1) * dh)
        q = (sources[-1] @ W.t())[..., sl] if W is not None else query[sl]
        scores = []
        for v in sources:
            k = v[..., sl]
            if g is not None:  # RMSNorm over the head's dims, with its slice of the weight
                k = k / torch.sqrt((k * k).mean(-1, keepdim=True) + EPS) * g[sl]
            scores.append((k * q).sum(-1))
        if gate == "softmax":
            m = torch.stack(scores).amax(0)
            e = [torch.exp(s - m) for s in scores]
            a = [x / sum(e) for x in e]
        else:
            a = [1 / (1 + torch.exp(-s)) for s in scores]
        out.append(sum(a[i].unsqueeze(-1) * sources[i][..., sl] for i in range(n)))
    return torch.cat(out, dim=-1)


def naive_logits(model, x):
    """Full/Block AttnRes under the switches: the sources of docs/attnres.md, a window keeping
    the embedding and the W most recent, and `naive_mix` for every layer and the output."""
    cfg = model.cfg
    S, Wn = depth_block(cfg), cfg.attnres_window

    def mix(l, sources):
        if Wn is not None and len(sources) > 1 + Wn:
            sources = [sources[0]] + sources[-Wn:]
        dep = model.depth[l]
        return naive_mix(
            sources,
            query=dep.query,
            W=None if dep.query_proj is None else dep.query_proj.weight,
            g=dep.key_norm_weight,
            logits=dep.logits,
            gate=cfg.attnres_gate,
            heads=cfg.attnres_heads,
        )

    h0 = model.wte(x) + model.wpe(torch.arange(x.shape[1]))
    blocks, partial = [h0], None
    for l, f in enumerate(model.sublayers()):
        if l % S == 0 and partial is not None:
            blocks, partial = blocks + [partial], None
        v = f(mix(l, blocks + ([partial] if partial is not None else [])))
        partial = v if partial is None else partial + v
    return model.lm_head(model.ln_f(mix(cfg.n_sublayers, blocks + [partial])))


def naive_denseformer_logits(model, x):
    """DenseFormer (Pagliardini et al. 2024): X_0 = embedding; X_i = Block_i(Y_{i-1});
    Y_i = sum_j alpha_{i,j} X_j; logits from Y_last."""
    X = [model.wte(x) + model.wpe(torch.arange(x.shape[1]))]
    y = X[0]
    for i, block in enumerate(model.blocks):
        y = y + block.attn(y)
        X.append(y + block.mlp(y))
        y = sum(model.dwa[i][j] * X[j] for j in range(len(X)))
    return model.lm_head(model.ln_f(y))


def assert_matches_naive(model, naive_fn):
    """In fp64, in training and in inference (which runs the same general path)."""
    assert_matches_the_formula(model, lambda t: naive_fn(model, t), idx(), idx(seed=2))


# ---------------------------------------------------------------------------------------------
# Each switch against its formula
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("residual,S,switches", ABLATIONS, ids=IDS)
def test_switch_matches_naive_formula_fp64(residual, S, switches):
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of(residual, S, **switches)).double())
    assert depth_ablated(model.cfg)
    assert_matches_naive(model, naive_logits)


@pytest.mark.parametrize(
    "switches",
    [
        dict(),
        dict(gate="sigmoid"),
        dict(heads=4),
        dict(gate="sigmoid", heads=2),
        dict(key_norm=False),
        dict(input_query=True),
        dict(input_query=True, heads=2),
        dict(static=True),
    ],
    ids=str,
)
def test_general_op_matches_naive_mix_fp64(switches):
    """The op alone, gradients with respect to every input (sources and parameters)."""
    g = torch.Generator().manual_seed(0)
    d, n = 8, 4
    sources = [
        torch.randn(2, 3, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(n)
    ]
    params = dict(query=torch.randn(d, generator=g, dtype=torch.float64, requires_grad=True))
    if switches.get("key_norm", True) and not switches.get("static"):
        params["norm_weight"] = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
        params["norm_weight"].requires_grad_(True)
    if switches.get("input_query"):
        params["query_proj"] = torch.randn(
            d, d, generator=g, dtype=torch.float64, requires_grad=True
        )
    if switches.get("static"):
        params = dict(logits=torch.randn(n, generator=g, dtype=torch.float64, requires_grad=True))
    gate, heads = switches.get("gate", "softmax"), switches.get("heads", 1)
    h, w = depth_attention_general(
        sources,
        None if "query_proj" in params else params.get("query"),
        params.get("norm_weight"),
        EPS,
        query_proj=params.get("query_proj"),
        logits=params.get("logits"),
        gate=gate,
        heads=heads,
    )
    ref = naive_mix(
        sources,
        query=params.get("query"),
        W=params.get("query_proj"),
        g=params.get("norm_weight"),
        logits=params.get("logits"),
        gate=gate,
        heads=heads,
    )
    torch.testing.assert_close(h, ref, atol=1e-12, rtol=1e-12)
    assert w.shape == (2, 3, 1 if "logits" in params else heads, n)
    inputs = [*sources, *[p for p in params.values() if p.requires_grad]]
    dh = torch.randn(h.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(h, inputs, dh, allow_unused=True)
    want = torch.autograd.grad(ref, inputs, dh, allow_unused=True)
    for a, b in zip(got, want):
        if b is None:  # e.g. the static query when W x replaces it
            assert a is None or not a.any()
            continue
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


def test_general_op_with_defaults_is_the_fast_path():
    g = torch.Generator().manual_seed(0)
    sources = [torch.randn(2, 5, 16, generator=g) for _ in range(5)]
    q, w = torch.randn(16, generator=g), torch.rand(16, generator=g) + 0.5
    h, _ = depth_attention_general(sources, q, w, EPS)
    ref, _ = depth_attention_reference(sources, q, w, EPS)
    torch.testing.assert_close(h, ref, atol=1e-6, rtol=1e-5)


def test_denseformer_matches_naive_formula_fp64():
    torch.manual_seed(0)
    model = randomise(ANDREA(ModelConfig(**BASE, residual="denseformer")).double())
    assert_matches_naive(model, naive_denseformer_logits)


def test_denseformer_starts_as_the_baseline_exactly():
    """Identity-mix init (DenseFormer, Sec. 3): with the baseline's weights, the same logits."""
    torch.manual_seed(0)
    base = ANDREA(ModelConfig(**BASE))
    dense = ANDREA(ModelConfig(**BASE, residual="denseformer"))
    missing, unexpected = dense.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("dwa.") for k in missing)
    assert all(a[-1] == 1 and not a[:-1].any() for a in dense.dwa)
    torch.testing.assert_close(dense(idx()), base(idx()), atol=1e-6, rtol=0)


def test_input_query_starts_as_full_attnres():
    """W_l = 0 at init: the query is 0, the weights uniform, as Full's zero pseudo-query."""
    torch.manual_seed(0)
    full = ANDREA(cfg_of("attnres_full", 1))
    torch.manual_seed(0)
    inq = ANDREA(cfg_of("attnres_full", 1, attnres_input_query=True))
    assert all(not d.query_proj.weight.any() for d in inq.depth)
    inq.load_state_dict(full.state_dict(), strict=False)
    torch.testing.assert_close(inq(idx()), full(idx()), atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# The defaults compute what they computed before the switches existed
# ---------------------------------------------------------------------------------------------
# Logits [0, -1, :4] of ANDREA(n_layer=3, n_head=2, d_model=16, vocab 64, context 16), built
# with torch.manual_seed(0), pseudo-queries set from N(0, 3) (generator seed 7), on idx(), by the
# code of commit 5b8efd0 (before the switches), with its attnres_scale_eps set as given.
BEFORE = {
    ("attnres_full", 1, True): [
        0.0412028469145298,
        0.14956754446029663,
        -0.02125139907002449,
        -0.04712742567062378,
    ],
    ("attnres_full", 1, False): [
        0.039657313376665115,
        0.14610949158668518,
        -0.02111658826470375,
        -0.04600260779261589,
    ],
    ("attnres_block", 2, True): [
        0.0928472951054573,
        -0.008215300738811493,
        0.0768163651227951,
        0.00334709114395082,
    ],
    ("attnres_block", 2, False): [
        0.0573265515267849,
        -0.009199973195791245,
        0.05184725672006607,
        0.0050881304778158665,
    ],
    ("attnres_block", 4, False): [
        0.03609233349561691,
        0.15431557595729828,
        -0.027908124029636383,
        -0.049589432775974274,
    ],
}


@pytest.mark.parametrize("residual,S,scale_eps", list(BEFORE))
def test_defaults_compute_what_the_code_before_the_switches_computed(residual, S, scale_eps):
    torch.manual_seed(0)
    model = ANDREA(cfg_of(residual, S, attnres_scale_eps=scale_eps))
    assert not depth_ablated(model.cfg)
    with torch.no_grad():
        for dep in model.depth:
            dep.query.normal_(0, 3, generator=torch.Generator().manual_seed(7))
    x = idx()
    train_logits = model(x)
    model.eval()
    with torch.no_grad():
        eval_logits = model(x)  # the two-phase path
    want = torch.tensor(BEFORE[(residual, S, scale_eps)])
    torch.testing.assert_close(train_logits[0, -1, :4], want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(eval_logits[0, -1, :4], want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize(
    "residual,S", [("attnres_full", 1), ("attnres_block", 2), ("attnres_block", 4)]
)
def test_general_path_with_default_switches_equals_the_fast_path(residual, S, monkeypatch):
    """Forcing the default config through the general path gives the fast path's logits and
    gradients: the general path is the same function, only slower."""
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of(residual, S)))
    x, y = idx(), idx(seed=2)
    fast, fast_grads = outputs_and_grads(model, model, x, y)
    monkeypatch.setattr(attnres_module, "depth_ablated", lambda cfg: True)
    slow, slow_grads = outputs_and_grads(model, model, x, y)
    torch.testing.assert_close(slow, fast, atol=1e-5, rtol=1e-5)
    for n in fast_grads:
        torch.testing.assert_close(slow_grads[n], fast_grads[n], atol=1e-5, rtol=1e-4, msg=n)


def test_default_config_is_the_reports_model():
    cfg = ModelConfig(**BASE, residual="attnres_full")
    assert cfg.attnres_scale_eps is False and cfg.label_suffix == ""
    model = ANDREA(cfg)
    assert all(f.ln.eps == cfg.ln_eps for f in model.sublayers()) and model.ln_f.eps == cfg.ln_eps
    scaled = ANDREA(ModelConfig(**BASE, residual="attnres_full", attnres_scale_eps=True))
    assert [f.ln.eps for f in scaled.sublayers()] == [cfg.ln_eps / n**2 for n in range(1, 7)]
    assert scaled.ln_f.eps == cfg.ln_eps / 7**2


# ---------------------------------------------------------------------------------------------
# What holds for every variant holds for the new ones
# ---------------------------------------------------------------------------------------------
NEW = [("denseformer", 1, {})] + ABLATIONS[:6] + ABLATIONS[6:12:2]
NEW_IDS = ["denseformer"] + IDS[:6] + IDS[6:12:2]


@pytest.mark.parametrize("residual,S,switches", NEW, ids=NEW_IDS)
def test_causal_deterministic_and_counted(residual, S, switches):
    cfg = cfg_of(residual, S, **switches)
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg))
    torch.manual_seed(0)
    again = randomise(ANDREA(cfg))
    x = idx(B=1, T=10)
    logits = model(x)
    assert torch.equal(logits, again(x))
    x2 = x.clone()
    x2[0, 6] = (x2[0, 6] + 1) % BASE["vocab_size"]
    logits2 = model(x2)
    torch.testing.assert_close(logits2[0, :6], logits[0, :6], atol=1e-6, rtol=0)
    assert (logits2[0, 6:] - logits[0, 6:]).abs().max() > 1e-4
    assert count_parameters(model) == param_count_formula(cfg) == count_parameters(cfg)


def test_parameter_counts_by_hand():
    """d = 16, L = 6 sublayers (7 depth attentions incl. the output), n_layer = 3."""
    d = 16
    base = param_count_formula(ModelConfig(**BASE)).total
    extra = lambda **kw: count_parameters(cfg_of("attnres_full", 1, **kw)).total - base  # noqa
    assert extra() == 7 * 2 * d
    assert extra(attnres_key_norm=False) == 7 * d
    assert extra(attnres_input_query=True) == 7 * (d * d + d)
    assert extra(attnres_heads=4) == 7 * 2 * d
    assert extra(attnres_static_mix=True) == sum(range(1, 8))  # layer l has l + 1 sources
    assert extra(attnres_static_mix=True, attnres_window=2) == 1 + 2 + 3 * 5
    dense = count_parameters(ModelConfig(**BASE, residual="denseformer")).total
    assert dense - base == 2 + 3 + 4


@pytest.mark.parametrize(
    "residual,S,switches",
    [
        ("denseformer", 1, {}),
        ("attnres_full", 1, dict(attnres_gate="sigmoid", attnres_window=2)),
        ("attnres_block", 2, dict(attnres_input_query=True, attnres_heads=2)),
        ("attnres_full", 1, dict(attnres_static_mix=True)),
    ],
    ids=str,
)
def test_new_variants_trace_without_graph_breaks(residual, S, switches):
    import torch._dynamo as dynamo

    model = randomise(ANDREA(cfg_of(residual, S, **switches)))
    dynamo.reset()
    explained = dynamo.explain(model)(idx())
    dynamo.reset()
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons


# ---------------------------------------------------------------------------------------------
# Where a switch makes no sense, the config says so and names the key
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "residual,S,switches,key",
    [
        ("baseline", 4, dict(attnres_window=2), "model.attnres_window"),
        ("denseformer", 4, dict(attnres_gate="sigmoid"), "model.attnres_gate"),
        ("baseline", 4, dict(attnres_scale_eps=True), "model.attnres_scale_eps"),
        ("attnres_full", 1, dict(attnres_heads=3), "model.attnres_heads"),
        ("attnres_full", 1, dict(attnres_heads=0), "model.attnres_heads"),
        ("attnres_full", 1, dict(attnres_window=0), "model.attnres_window"),
        ("attnres_full", 1, dict(attnres_gate="relu"), "model.attnres_gate"),
        (
            "attnres_full",
            1,
            dict(attnres_static_mix=True, attnres_gate="sigmoid"),
            "model.attnres_gate",
        ),
        (
            "attnres_full",
            1,
            dict(attnres_static_mix=True, attnres_input_query=True),
            "model.attnres_input_query",
        ),
        (
            "attnres_block",
            2,
            dict(attnres_static_mix=True, attnres_key_norm=False),
            "model.attnres_key_norm",
        ),
        ("attnres_block", 2, dict(attnres_static_mix=True, attnres_heads=2), "model.attnres_heads"),
    ],
)
def test_bad_combinations_are_rejected_naming_the_key(residual, S, switches, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        cfg_of(residual, S, **switches)


def test_labels_show_the_switches_in_a_fixed_order():
    cfg = cfg_of(
        "attnres_full",
        1,
        attnres_scale_eps=True,
        attnres_window=8,
        attnres_gate="sigmoid",
        attnres_key_norm=False,
    )
    assert cfg.label_suffix == "+no_keynorm+sigmoid+window8+scale_eps"
    assert cfg_of("attnres_block", 4, attnres_heads=4).label_suffix == "+heads4"
    assert not depth_ablated(cfg_of("attnres_full", 1, attnres_scale_eps=True))


def test_sigmoid_weights_are_not_normalised():
    model = ANDREA(cfg_of("attnres_full", 1, attnres_gate="sigmoid"))
    _, stats = model(idx(), return_stats=True)
    # zero queries: every weight sigmoid(0) = 1/2, so layer l's weights sum to n_l / 2
    for n, w in enumerate(stats["depth_weights"], start=1):
        torch.testing.assert_close(w, torch.full((n,), 0.5))
    assert math.isclose(stats["depth_weights"][-1].sum().item(), 7 / 2, rel_tol=1e-6)
