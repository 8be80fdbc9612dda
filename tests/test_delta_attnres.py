"""Delta AttnRes and Delta Block, the second example plug-in (plugins/andrea-delta-attnres).

The model is compared with Delta AttnRes's formula written out below in fp64, one source and one
token at a time (outputs and gradients of every parameter; Luo, Cai & Hu 2026,
arXiv:2605.18855): h_0 = x_0, h_l = x_l + sum_i softmax_i(w_l . RMSNorm_{g_l}(v_i)) v_i over
the embedding and the earlier sublayer outputs (Delta Block: the completed blocks' deltas),
x_{l+1} = x_l + f_l(h_l). Then: the init the module documents, causality, determinism, the
counts against the built model and FlopCounterMode, the routing's statistics, the command line,
the export through its `Scheme.export` module and exact resume (its sweep to a multiplier runs
in tests/test_kromhc.py's sweep, beside KromHC's). The plug-in is installed by `make env`;
without it these tests skip, except under CI=true, where they fail."""

from __future__ import annotations

import math

import pytest
import torch

from andrea.testing.plugins import require_plugin

require_plugin("delta_attnres", "andrea-delta-attnres")

# imported after require_plugin, which skips (or fails under CI) without the plug-in
import andrea.testing.schemes as checks  # noqa: E402
from andrea.model.flops import flops_per_token  # noqa: E402
from andrea.model.transformer import ANDREA, ModelConfig, count_parameters  # noqa: E402
from andrea.testing.schemes import BASE, idx  # noqa: E402
from andrea_delta_attnres.delta_attnres import source_counts  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def cfg_of(**kw):
    return ModelConfig(**{**BASE, **kw}, residual="delta_attnres")


def randomise(model, seed=3):
    """Queries and gains off their init, so every weight and every gain matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.delta:
            m.query.copy_(torch.randn(m.query.shape, generator=g, dtype=m.query.dtype))
            m.key_norm_weight.add_(
                0.5 * torch.randn(m.query.shape, generator=g, dtype=m.query.dtype)
            )
    return model


# ---------------------------------------------------------------------------------------------
# The formula, written out
# ---------------------------------------------------------------------------------------------
def naive_mix(sources, w, g, eps):
    """sum_i alpha_i v_i, alpha = softmax_i(w . RMSNorm_g(v_i)), token by token."""
    B, T, d = sources[0].shape
    out = torch.zeros_like(sources[0])
    rows = []
    for b in range(B):
        row = []
        for t in range(T):
            scores = []
            for v in sources:
                u = v[b, t]
                key = u / torch.sqrt((u * u).sum() / d + eps) * g
                scores.append((key * w).sum())
            s = torch.stack(scores)
            e = torch.exp(s - s.max())
            alpha = e / e.sum()
            row.append(sum(alpha[i] * sources[i][b, t] for i in range(len(sources))))
        rows.append(torch.stack(row))
    return out + torch.stack(rows)


def naive_logits(model, x):
    """Delta AttnRes: sources = the embedding and every sublayer output before l. Delta Block
    (N blocks of P = ceil(n_layer / N) layers): sources = the embedding and the sum of each
    completed block's sublayer outputs, a block joining after the next layer's attention."""
    h0 = model.wte(x) + model.wpe(torch.arange(x.shape[1]))
    N, n_layer = model.cfg.delta_blocks, model.cfg.n_layer
    P = None if N is None else -(-n_layer // N)
    stream, sources, outputs = h0, [h0], []
    for l, f in enumerate(model.sublayers()):
        i = l // 2
        if P is not None and l % 2 == 1 and i > 0 and i % P == 0:
            # the block of layers i - P .. i - 1: the sum of its 2P sublayer outputs
            sources.append(sum(outputs[2 * (i - P) : 2 * i]))
        if l == 0:
            h = stream
        else:
            m = model.delta[l - 1]
            h = stream + naive_mix(sources, m.query, m.key_norm_weight, model.cfg.key_eps)
        v = f(h)
        stream = stream + v
        outputs.append(v)
        if P is None:
            sources.append(v)
    return model.lm_head(model.ln_f(stream))


SHAPES = [(1, None), (2, None), (3, None), (3, 1), (3, 2), (3, 3), (4, 2)]  # (n_layer, N)


@pytest.mark.parametrize("n_layer,blocks", SHAPES, ids=str)
def test_matches_the_formula_fp64_outputs_and_grads(n_layer, blocks):
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of(n_layer=n_layer, delta_blocks=blocks)).double())
    grads = checks.assert_matches_the_formula(
        model, lambda t: naive_logits(model, t), idx(B=2, T=6), idx(B=2, T=6, seed=2)
    )
    scored = [l for l, n in enumerate(source_counts(model.cfg)) if n > 1]
    assert all(grads[f"delta.{l}.query"].abs().sum() > 0 for l in scored)


def test_delta_blocks_sources_by_hand():
    """n_layer = 4, N = 2 (P = 2): layer 0's MLP sees x_0; layers 1's sublayers x_0; layer 2's
    attention x_0 (block 1 joins after it), its MLP and layer 3's x_0 and block 1's delta."""
    assert source_counts(cfg_of(n_layer=4, delta_blocks=2)) == [1, 1, 1, 1, 2, 2, 2]
    assert source_counts(cfg_of(n_layer=4)) == [2, 3, 4, 5, 6, 7, 8]


def test_init_follows_the_authors_code():
    """Queries N(0, 0.02^2) (their nn.Linear(d, 1) under their model's init), gains 1; no
    routing for the first sublayer, which has no sources yet."""
    torch.manual_seed(0)
    model = ANDREA(
        ModelConfig(
            n_layer=6,
            n_head=4,
            d_model=256,
            vocab_size=64,
            context_length=16,
            residual="delta_attnres",
        )
    )
    assert len(model.delta) == 11
    q = torch.cat([m.query.detach() for m in model.delta])
    assert abs(float(q.std()) - 0.02) < 0.002 and abs(float(q.mean())) < 0.002
    assert all(torch.equal(m.key_norm_weight, torch.ones(256)) for m in model.delta)


def test_the_added_mix_changes_the_baseline():
    """With the same sublayer weights, Delta AttnRes is not the baseline: the mix is added to
    the stream (the stream alone would be the baseline)."""
    torch.manual_seed(0)
    delta = randomise(ANDREA(cfg_of()))
    base = ANDREA(ModelConfig(**BASE))
    base.load_state_dict(
        {k: v for k, v in delta.state_dict().items() if not k.startswith("delta.")}
    )
    x = idx()
    with torch.no_grad():
        assert (delta(x) - base(x)).abs().max() > 1e-3


# ---------------------------------------------------------------------------------------------
# Causality, determinism, compile, counting
# ---------------------------------------------------------------------------------------------
def test_causal():
    torch.manual_seed(0)
    checks.assert_causal(randomise(ANDREA(cfg_of())))


def test_same_seed_same_model_same_logits_and_grads():
    checks.assert_same_seed_same_logits_and_grads(lambda: ANDREA(cfg_of()))


def test_one_graph_for_torch_compile_and_bf16_autocast_close_to_fp32():
    torch.manual_seed(0)
    checks.assert_one_graph_under_bf16_autocast(randomise(ANDREA(cfg_of())))


@pytest.mark.parametrize("n_layer,blocks", [(1, None), (2, None), (3, None), (3, 2)], ids=str)
def test_parameter_count_formula(n_layer, blocks):
    cfg = cfg_of(n_layer=n_layer, delta_blocks=blocks)
    checks.assert_parameter_counts_agree(cfg, "delta.", 2 * (2 * n_layer - 1))
    extra = (
        count_parameters(cfg).total
        - count_parameters(ModelConfig(**{**BASE, "n_layer": n_layer})).total
    )
    assert extra == 2 * 8 * (2 * n_layer - 1)  # w_l and g_l, d = 8 each, sublayers 1..L-1


# FLOPs per token, by hand, d = 8, L = 4 sublayers: sublayers 1, 2, 3 score 2 + 3 + 4 = 9
# sources; score, mix and key norm are 2*8 = 16 each per source: 144 each, 432 in all.
# Delta Block, N = 2 at n_layer = 2 (P = 1): sources 1, 1, 2: 4 in all, 64 per term.
def test_flops_by_hand():
    f = flops_per_token(cfg_of(), 12)
    assert f.delta_score == f.delta_mix == f.delta_key_norm == 144 and f.depth == 432
    base = flops_per_token(ModelConfig(**BASE), 12)
    assert f.forward == base.forward + 432 and f.training == 3 * f.forward
    assert f.matmul == f.forward - f.delta_key_norm
    assert flops_per_token(cfg_of(delta_blocks=2), 12).delta_score == 64


@pytest.mark.parametrize(
    "n_layer,blocks", [(1, None), (2, None), (3, None), (3, 2), (4, 2)], ids=str
)
def test_flops_match_flop_counter_mode(n_layer, blocks):
    checks.assert_flop_counter_sees_every_matmul(cfg_of(n_layer=n_layer, delta_blocks=blocks))


def test_the_routing_statistics_are_logged_as_attnres_logs_them():
    """Per routing (sublayers 1..L-1): its mean weights over its l + 1 sources (the heatmap's
    rows), the mean largest weight and the mean entropy, the quantities the paper compares
    (max weight ~0.6 for Delta AttnRes against ~0.2 for AttnRes); AttnRes logs the same."""
    from andrea.model.residuals.common import routing_sharpness

    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of()))
    with torch.no_grad():
        _, stats = model(idx(), return_stats=True)
    assert [len(w) for w in stats["depth_weights"]] == [2, 3, 4]
    assert len(stats["depth_max_weight"]) == len(stats["depth_entropy"]) == 3
    for w, top, ent in zip(
        stats["depth_weights"], stats["depth_max_weight"], stats["depth_entropy"]
    ):
        n = len(w)
        assert 1 / n - 1e-6 <= float(top) <= 1 and 0 <= float(ent) <= math.log(n) + 1e-6
    uniform = torch.full((5, 4), 0.25)
    top, ent = routing_sharpness(uniform)
    assert float(top) == 0.25 and float(ent) == pytest.approx(math.log(4))
    top, ent = routing_sharpness(torch.eye(3))
    assert float(top) == 1.0 and float(ent) == 0.0
    attnres = ANDREA(ModelConfig(**BASE, residual="attnres_full"))
    with torch.no_grad():
        _, stats = attnres(idx(), return_stats=True)
    assert len(stats["depth_max_weight"]) == len(stats["depth_weights"]) == 5


# ---------------------------------------------------------------------------------------------
# From the command line; the export
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "over,label,blocks",
    [([], "delta_attnres", None), (["model.delta_blocks=2"], "delta_attnres+blocks2", 2)],
)
def test_reaches_the_model_with_its_label(over, label, blocks):
    spec = checks.resolve_on_the_baselines_budget("delta_attnres", *over)
    assert spec.variant == "delta_attnres" and spec.label == label
    assert spec.model.delta_blocks == blocks


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["model=delta_attnres", "model.delta_blocks=0"], "model.delta_blocks=0 is invalid"),
        (["model=delta_attnres", "model.delta_blocks=3"], "model.delta_blocks=3 is invalid"),
        (["model=baseline", "model.delta_blocks=2"], "model.delta_blocks=2 applies to model=delta"),
    ],
)
def test_bad_input_fails_before_launch_naming_the_key(overrides, message):
    checks.assert_refused_naming_the_key(overrides, message)


def test_the_rivals_sweep_and_the_throughput_benchmark_know_it():
    from conftest import REPO

    from andrea.config.overrides import precheck
    from bench.throughput import variant_config

    assert precheck(["-m", "model=baseline,delta_attnres"]) == []
    rivals = (REPO / "sweeps" / "rivals_cpu.yaml").read_text()
    assert "delta_attnres" in rivals.split("model:")[1].splitlines()[0]
    assert variant_config("delta_attnres", "tiny", 64).residual == "delta_attnres"


@pytest.mark.parametrize("blocks", [None, 2], ids=str)
def test_the_export_loads_with_the_same_logits(tmp_path, blocks):
    """Through the scheme's export module (residual_andrea.py): standalone with transformers
    hidden, as tests/test_eval_export.py checks every built-in scheme."""
    pytest.importorskip("safetensors")
    from andrea.eval.export import export_run
    from andrea.testing.export import VOCAB, fake_run, import_modeling, save_small_tokenizer

    tok = save_small_tokenizer(tmp_path / "tokenizer.json")
    run, model = fake_run(
        tmp_path / "run", dict(residual="delta_attnres", delta_blocks=blocks), tok
    )
    out = export_run(run, tmp_path / "export")
    assert "delta" in (out / "residual_andrea.py").read_text()
    exported = import_modeling(out, hide_transformers=True).load_exported(str(out))
    x = torch.randint(0, VOCAB, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(exported(x), model(x), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# End to end: exact resume
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_resume_is_exact(tmp_path, data_cache):
    """A tiny Delta AttnRes run interrupted and resumed ends bit-identical to an uninterrupted
    one."""
    checks.assert_resume_is_exact(
        tmp_path / "full", tmp_path / "split", ["model=delta_attnres"], "delta_attnres", "delta."
    )
