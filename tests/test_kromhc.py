"""KromHC, the example plug-in scheme (plugins/andrea-kromhc, docs/residual_schemes.md).

The model is compared with KromHC's formula written out below in fp64, one stream and one
matrix entry at a time (outputs and gradients of every parameter; Zhou et al. 2026,
arXiv:2601.21579): mHC's H_pre, H_post and stream update, and H_res = U^1 (x) ... (x) U^K with
each U^k the convex combination of its i! permutation matrices. Then: H_res exactly doubly
stochastic, n = 1 the baseline with gates, the counts against the built model and
FlopCounterMode, causality, determinism, the command line, exact resume and a sweep to a
multiplier. The plug-in is installed by `make env`; without it these tests skip, except under
CI=true, where they fail."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from andrea.model.residuals import registry
from andrea.testing.plugins import require_plugin

require_plugin("kromhc", "andrea-kromhc")

# imported after require_plugin, which skips (or fails under CI) without the plug-in
from conftest import REPO, TINY_RUN  # noqa: E402

import andrea.testing.schemes as checks  # noqa: E402
from andrea.model.flops import flops_per_token  # noqa: E402
from andrea.model.transformer import ANDREA, ModelConfig, count_parameters  # noqa: E402
from andrea.testing.schemes import BASE, idx  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

# (n, factor size i): n = i^K, K = 0 .. 3; 9 = 3^2 takes the factors the authors' code leaves out
SHAPES = [(1, 2), (2, 2), (4, 2), (8, 2), (9, 3)]
IDS = [f"n{n}_i{i}" for n, i in SHAPES]
LOGITS = {(1, 2): 0, (2, 2): 2, (4, 2): 4, (8, 2): 6, (9, 3): 12}  # k = K i!, by hand


def cfg_of(n, i=2, **kw):
    return ModelConfig(**{**BASE, **kw}, residual="kromhc", kromhc_streams=n, kromhc_factor=i)


def randomise(model, seed=3):
    """Move the mappings off their init (phi = 0 would hide the dynamic part)."""
    checks.randomise_stream_mappings(model.kromhc, seed)
    return model


# ---------------------------------------------------------------------------------------------
# The formula, written out
# ---------------------------------------------------------------------------------------------
def naive_kron(A, B):
    """(A (x) B)[p i + r, q i + s] = A[p, q] B[r, s], entry by entry."""
    m, i = A.shape[-1], B.shape[-1]
    rows = [
        [A[..., p, q] * B[..., r, s] for q in range(m) for s in range(i)]
        for p in range(m)
        for r in range(i)
    ]
    return torch.stack([torch.stack(row, -1) for row in rows], -2)


def naive_mappings(m, streams, n, i):
    """H_pre [.., n], H_post [.., n], H_res [.., n, n] for one sublayer from its n streams."""
    K = round(math.log(n, i)) if n > 1 else 0
    x = torch.cat(streams, dim=-1)  # vec(x_l)
    xn = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    h = xn @ m.phi
    h_pre = 1 / (1 + torch.exp(-(m.gate[0] * h[..., :n] + m.bias[:n])))
    h_post = 2 / (1 + torch.exp(-(m.gate[1] * h[..., n : 2 * n] + m.bias[n : 2 * n])))
    res = m.gate[2] * h[..., 2 * n :] + m.bias[2 * n :]
    h_res = torch.ones(*x.shape[:-1], 1, 1, dtype=x.dtype)
    f = math.factorial(i)
    for k in range(K):  # U^1 (x) U^2 (x) ... (x) U^K
        logits = res[..., k * f : (k + 1) * f]
        e = torch.exp(logits - logits.max(-1, keepdim=True).values)
        h_res = naive_kron(h_res, checks.naive_h_res_lite(e / e.sum(-1, keepdim=True), i))
    return h_pre, h_post, h_res


def naive_logits(model, x):
    """mHC's stream update with KromHC's mappings (`naive_mappings`) for every sublayer."""
    n, i = model.cfg.kromhc_streams, model.cfg.kromhc_factor
    return checks.naive_stream_logits(
        model, x, n, lambda l, streams: naive_mappings(model.kromhc[l], streams, n, i)
    )


@pytest.mark.parametrize("n,i", SHAPES, ids=IDS)
def test_matches_the_formula_fp64_outputs_and_grads(n, i):
    torch.manual_seed(0)
    model = randomise(ANDREA(cfg_of(n, i)).double())
    grads = checks.assert_matches_the_formula(
        model, lambda t: naive_logits(model, t), idx(), idx(seed=2)
    )
    assert all(grads[f"kromhc.{l}.phi"].abs().sum() > 0 for l in range(4))  # the dynamic part


# ---------------------------------------------------------------------------------------------
# H_res is exactly doubly stochastic; n = 1 is the identity residual
# ---------------------------------------------------------------------------------------------
def test_kron_is_torchs_kron():
    from andrea_kromhc.kromhc import kron

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 4, generator=g), torch.randn(3, 3, generator=g)
    assert torch.equal(kron(a, b), torch.kron(a, b))
    batch = torch.randn(5, 2, 2, generator=g)
    assert torch.equal(kron(batch, batch)[3], torch.kron(batch[3], batch[3]))


@pytest.mark.parametrize("n,i", SHAPES, ids=IDS)
def test_h_res_is_exactly_doubly_stochastic(n, i):
    """Every sublayer's H_res, per token, from spread-out mappings (a_res x 10, logits of order
    10): entries >= 0 and every row and column summing to 1 to rounding -- exactly, where
    mHC's Sinkhorn-Knopp is 1e-2 off for such logits (tests/test_mhc.py)."""
    torch.manual_seed(0)
    X = torch.randn(2, 5, n, BASE["d_model"], dtype=torch.float64)
    ones = torch.ones(2, 5, n, dtype=torch.float64)
    model = randomise(ANDREA(cfg_of(n, i)).double())
    with torch.no_grad():
        for m in model.kromhc:
            m.gate[2].mul_(10.0)
    for m in model.kromhc:
        h_pre, h_post, h_res = m(X)
        assert h_res.shape == (2, 5, n, n) and (h_res >= 0).all()
        assert ((h_pre > 0) & (h_pre < 1)).all() and ((h_post > 0) & (h_post < 2)).all()
        torch.testing.assert_close(h_res.sum(-1), ones, atol=1e-13, rtol=0)
        torch.testing.assert_close(h_res.sum(-2), ones, atol=1e-13, rtol=0)
        if n > 1:  # far from the identity it starts at
            assert (h_res - torch.eye(n, dtype=h_res.dtype)).abs().max() > 0.5


def test_one_stream_is_the_identity_residual_and_with_unit_gates_the_baseline():
    """n = 1: K = 0 factors, H_res = 1 whatever the mappings, so x_{l+1} = x_l + H_post
    f(H_pre x_l); with the gates pinned to 1 (no dynamic part, b_pre -> +inf, b_post = 0) the
    model is the baseline: same weights, same logits (as mHC's n = 1)."""
    checks.assert_one_stream_is_the_baseline_with_unit_gates(
        lambda: ANDREA(cfg_of(1)).double(), randomise, lambda model: model.kromhc
    )


def test_recompute_keeps_the_loss_and_every_gradient_bit_for_bit_and_no_stream(monkeypatch):
    """model.kromhc_recompute (the default), mHC's: at n = 4 the logits and all gradients equal
    storing the streams exactly (same machine), and no stream is kept for the backward."""
    checks.assert_recompute_is_bit_for_bit(cfg_of(4, n_layer=3), "kromhc_recompute", randomise)
    checks.assert_recompute_keeps_no_stream(
        lambda on: ANDREA(cfg_of(4, kromhc_recompute=on)), monkeypatch
    )
    with pytest.raises(ValueError, match=r"model\.kromhc_recompute=1 is invalid"):
        cfg_of(4, kromhc_recompute=1)


def test_init_follows_the_authors_code():
    """phi = 0, gates 0.01, H_pre/H_post favouring stream l mod n, each factor's logits 0 on its
    identity and -8 elsewhere: H_res = (1 - 3e-4)^K on the diagonal (n = 8: 0.9990)."""
    torch.manual_seed(0)
    model = ANDREA(cfg_of(8))
    for l, m in enumerate(model.kromhc):
        assert not m.phi.any() and torch.allclose(m.gate, torch.full((3,), 0.01))
        assert m.bias[16:].tolist() == [0.0, -8.0] * 3
        h_pre, h_post, h_res = m(torch.randn(1, 2, 8, BASE["d_model"]))
        assert h_pre[0, 0].argmax() == l % 8 and h_post[0, 0].argmax() == l % 8
        p = 1 / (1 + math.exp(-8))
        torch.testing.assert_close(
            h_res.diagonal(dim1=-2, dim2=-1), torch.full((1, 2, 8), p**3), atol=1e-6, rtol=0
        )


# ---------------------------------------------------------------------------------------------
# Causality, determinism, counting
# ---------------------------------------------------------------------------------------------
def test_causal():
    torch.manual_seed(0)
    checks.assert_causal(randomise(ANDREA(cfg_of(8))))


def test_same_seed_same_model_same_logits_and_grads():
    checks.assert_same_seed_same_logits_and_grads(lambda: ANDREA(cfg_of(8)))


def test_one_graph_for_torch_compile_and_bf16_autocast_close_to_fp32():
    """The factors' loop unrolls into one graph under bf16 autocast (how GPU runs train); the
    coefficients and streams stay fp32 there (StreamMapping, shared with mHC), so the logits
    are within 0.05 of fp32 and every gradient is finite."""
    torch.manual_seed(0)
    checks.assert_one_graph_under_bf16_autocast(randomise(ANDREA(cfg_of(8))))


@pytest.mark.parametrize("n,i", SHAPES, ids=IDS)
def test_parameter_count_formula(n, i):
    cfg = cfg_of(n, i)
    d, L, k = BASE["d_model"], 4, LOGITS[(n, i)]
    checks.assert_parameter_counts_agree(cfg, "kromhc.", 3 * L)
    extra = count_parameters(cfg).total - count_parameters(ModelConfig(**BASE)).total
    assert extra == L * (n * d * (2 * n + k) + 2 * n + k + 3)


def test_eight_streams_cost_less_than_mhc_and_mhc_lite_cannot():
    """n = 8: 6 H_res logits per token against mHC's 64 and mHC-lite's 8! = 40,320 (refused)."""
    big = dict(n_layer=12, n_head=12, d_model=768, vocab_size=8449, context_length=1024)
    kromhc = count_parameters(ModelConfig(**big, residual="kromhc", kromhc_streams=8)).total
    mhc = count_parameters(ModelConfig(**big, residual="mhc", mhc_streams=8)).total
    base = count_parameters(ModelConfig(**big)).total
    assert kromhc - base == 24 * (8 * 768 * 22 + 22 + 3) < (mhc - base) / 3
    with pytest.raises(ValueError, match="too many for model=mhc_lite"):
        ModelConfig(**big, residual="mhc_lite", mhc_streams=8)


# FLOPs per token, by hand, for d = 8, L = 4 sublayers, 2 x 2 factors:
#   n = 4 (K = 2, k = 4): projection 2*32*12 = 768, permutations 2*2*2!*4 = 32, Kronecker
#     2^4 = 16, mix 2*32 + 2*16*8 + 2*32 = 384, norm 2*32 = 64: 1264 per sublayer
#   n = 8 (K = 3, k = 6): projection 2*64*22 = 2816, permutations 2*3*2*4 = 48, Kronecker
#     16 + 64 = 80, mix 128 + 1024 + 128 = 1280, norm 128: 4352 per sublayer
@pytest.mark.parametrize("n,depth", [(4, 4 * 1264), (8, 4 * 4352)])
def test_flops_by_hand(n, depth):
    f = flops_per_token(cfg_of(n), 12)
    assert f.depth == depth and f.kromhc_kron == 4 * (16 if n == 4 else 80)
    base = flops_per_token(ModelConfig(**BASE), 12)
    assert f.forward == base.forward + depth and f.training == 3 * f.forward
    assert f.matmul == f.forward - f.kromhc_kron - f.kromhc_norm


@pytest.mark.parametrize("n,i", [(1, 2), (4, 2), (8, 2), (9, 3)], ids=str)
def test_flops_match_flop_counter_mode(n, i):
    """Every KromHC matmul (projection, the factors' permutation combinations, H_pre/H_res/
    H_post) is one FlopCounterMode sees: the measured forward equals the predicted matmul
    FLOPs exactly (the RMS and the Kronecker products are elementwise, counted by hand above)."""
    checks.assert_flop_counter_sees_every_matmul(cfg_of(n, i))


# ---------------------------------------------------------------------------------------------
# From the command line: labels, bad input, run directories, the benchmark
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "over,label,n",
    [
        ([], "kromhc_n4", 4),
        (["model.kromhc_streams=8"], "kromhc_n8", 8),
        (["model.kromhc_streams=9", "model.kromhc_factor=3"], "kromhc_n9+factor3", 9),
    ],
)
def test_reaches_the_model_with_its_label(over, label, n):
    """`model=kromhc` comes from the plug-in's model_conf (andrea has no conf/model file for it),
    its options from the command line."""
    assert not (REPO / "conf" / "model" / "kromhc.yaml").exists()
    spec = checks.resolve_on_the_baselines_budget("kromhc", *over)
    assert spec.variant == "kromhc" and spec.label == label
    assert spec.model.residual == "kromhc" and spec.model.kromhc_streams == n


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["model=kromhc", "model.kromhc_streams=6"],
            "model.kromhc_streams=6 is not a power of model.kromhc_factor=2",
        ),
        (
            ["model=kromhc", "model.kromhc_factor=3"],
            "model.kromhc_streams=4 is not a power of model.kromhc_factor=3",
        ),
        (["model=kromhc", "model.kromhc_streams=0"], "model.kromhc_streams=0 is invalid"),
        (["model=kromhc", "model.kromhc_factor=1"], "model.kromhc_factor=1 is invalid"),
        (
            ["model=kromhc", "model.kromhc_factor=7", "model.kromhc_streams=7"],
            "model.kromhc_factor=7 is too large",
        ),
        (["model=mhc", "model.kromhc_streams=8"], "model.kromhc_streams=8 applies to model=kromhc"),
        (["model=kromhc", "model.mhc_streams=2"], "model.mhc_streams=2 applies to model=mhc"),
    ],
)
def test_bad_input_fails_before_launch_naming_the_key(overrides, message):
    checks.assert_refused_naming_the_key(overrides, message)


def test_the_command_lines_precheck_knows_the_plugins_model_entry():
    """sweep.py checks group options before Hydra; `model=kromhc` has no conf/model file."""
    from andrea.config.overrides import precheck

    assert precheck(["-m", "model=baseline,kromhc", "model.kromhc_streams=8"]) == []
    assert "did you mean model=kromhc?" in precheck(["model=kromhcc"])[0]


def test_an_option_on_the_command_line_is_in_the_label_not_in_the_run_directory_suffix():
    """conf/config.yaml's exclude_keys lists the built-in schemes' options; a plug-in's are
    dropped from the run directory's suffix all the same (its label carries them)."""
    from andrea.config.schema import _suffix

    assert _suffix("model.kromhc_streams=8") == ""
    assert (
        _suffix("model.kromhc_factor=3,model.kromhc_streams=9,train.lr=0.001") == ",train.lr=0.001"
    )


def test_the_throughput_benchmark_takes_it():
    from bench.throughput import variant_config

    assert variant_config("kromhc", "tiny", 64).kromhc_streams == 4
    assert variant_config("kromhc:8", "tiny", 64).kromhc_streams == 8
    cfg = variant_config("kromhc:kromhc_streams=9:kromhc_factor=3", "tiny", 64)
    assert (cfg.kromhc_streams, cfg.kromhc_factor) == (9, 3)
    with pytest.raises(ValueError, match="model.kromhc_streams=6 is not a power"):
        variant_config("kromhc:6", "tiny", 64)


def test_its_export_is_refused_in_one_line(tmp_path, capsys):
    """KromHC gives no export module (`Scheme.export` is None): `python -m andrea.eval.export`
    refuses its run with one line and writes nothing (it wrote a folder that did not load)."""
    pytest.importorskip("safetensors")
    from andrea.eval.export import main
    from andrea.testing.export import fake_run, save_small_tokenizer

    tok = save_small_tokenizer(tmp_path / "tokenizer.json")
    run, _ = fake_run(tmp_path / "run", dict(residual="kromhc"), tok)
    assert main([str(run), str(tmp_path / "export")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: model=kromhc cannot be exported"), err
    assert not (tmp_path / "export").exists()


# ---------------------------------------------------------------------------------------------
# End to end: exact resume; a sweep against the baseline to a multiplier
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_resume_is_exact(tmp_path, data_cache):
    """A tiny n = 8 KromHC run interrupted and resumed ends bit-identical to an uninterrupted
    one."""
    checks.assert_resume_is_exact(
        tmp_path / "full",
        tmp_path / "split",
        ["model=kromhc", "model.kromhc_streams=8"],
        "kromhc_n8",
        "kromhc.",
    )


@pytest.mark.slow
def test_a_cpu_sweep_against_the_baseline_gets_a_multiplier(tmp_path, data_cache):
    """`sweep.py -m model=baseline,kromhc,delta_attnres size=tiny-1,tiny-2 train.seed=0,1`, then
    `analysis.fit`: the runs in their labelled directories and a multiplier for each plug-in
    (kromhc_n4, and delta_attnres when that plug-in is installed: one sweep serves both, to keep
    the suite's time)."""
    plugins = {"kromhc": "kromhc_n4"}
    if "delta_attnres" in registry.SCHEMES:
        plugins["delta_attnres"] = "delta_attnres"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    sweep = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            "-m",
            ",".join(["model=baseline", *plugins]),
            "size=tiny-1,tiny-2",
            "train.seed=0,1",
            f"out_dir={tmp_path / 'runs'}",
            "sweep_name=kromhc",
            *TINY_RUN[1:],
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    root = tmp_path / "runs" / "kromhc"
    runs = {
        p.parent.relative_to(root).parts: json.loads(p.read_text())
        for p in root.rglob("results.json")
    }
    # <size>/<label>/seed<N>[,<the tiny budget's overrides>]
    labels = sorted(["baseline", *plugins.values()])
    assert sorted((size, label, seed.split(",")[0]) for size, label, seed in runs) == [
        (size, label, f"seed{s}")
        for size in ("tiny-1", "tiny-2")
        for label in labels
        for s in (0, 1)
    ]
    assert all(r["status"] == "completed" for r in runs.values())
    for variant, label in plugins.items():
        assert {r["variant"] for key, r in runs.items() if key[1] == label} == {variant}
    fit = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis.fit",
            str(root),
            "--out",
            str(tmp_path / "fit"),
            "--no-plots",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert fit.returncode == 0, fit.stdout[-3000:] + fit.stderr[-3000:]
    fits = json.loads((tmp_path / "fit" / "fits.json").read_text())
    assert set(labels) <= set(fits["fits"])
    for label in plugins.values():
        lines = [line for line in fit.stdout.splitlines() if label in line]
        assert lines and any(ch.isdigit() for ch in lines[-1]), (label, fit.stdout)
