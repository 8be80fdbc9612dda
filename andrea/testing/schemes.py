"""The checks the residual schemes' tests share (mHC and mHC-lite, the KromHC and Delta AttnRes
plug-ins; the AttnRes ablations use the formula comparison): a tiny model's logits and gradients
against the scheme's formula written out in fp64, causality, determinism, one compiled graph,
the FLOP counter, the parameter counts, recompute, one stream and exact resume. Each formula stays
in its own test module, written out from its paper independently of the code it checks; a
plug-in's module calls `andrea.testing.plugins.require_plugin` before it imports anything of the
plug-in. Plain asserts: no pytest needed to import or run them."""

from __future__ import annotations

import itertools
from dataclasses import replace

import torch
import torch.nn.functional as F

from andrea.model.flops import flops_per_token
from andrea.model.residuals.registry import is_mixing_parameter
from andrea.model.transformer import ANDREA, ModelConfig, count_parameters, param_count_formula

# the tiny model every scheme's tests build: 2 layers (4 sublayers), d 8, vocab 32, context 12
BASE = dict(n_layer=2, n_head=2, d_model=8, vocab_size=32, context_length=12)


def idx(B=2, T=10, seed=1):
    return torch.randint(
        0, BASE["vocab_size"], (B, T), generator=torch.Generator().manual_seed(seed)
    )


def randomise_stream_mappings(mappings, seed=3):
    """Move mHC-style stream mappings off their init (phi = 0 would hide the dynamic part)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in mappings:
            m.phi.copy_(0.5 * torch.randn(m.phi.shape, generator=g, dtype=m.phi.dtype))
            m.bias.add_(torch.randn(m.bias.shape, generator=g, dtype=m.bias.dtype))
            m.gate.copy_(0.5 + torch.rand(3, generator=g, dtype=m.gate.dtype))


def naive_h_res_lite(w, n):
    """sum_k w_k P_k with P_k[i, j] = 1 iff pi_k(i) = j, the permutations in itertools' order:
    mHC-lite's H_res (Yang & Gao 2026) and each of KromHC's factors (Zhou et al. 2026)."""
    perms = list(itertools.permutations(range(n)))
    return torch.stack(
        [
            torch.stack(
                [sum(w[..., k] for k, p in enumerate(perms) if p[i] == j) for j in range(n)], -1
            )
            for i in range(n)
        ],
        -2,
    )


def naive_stream_logits(model, x, n, mappings):
    """x_{l+1} = H_res x_l + H_post^T f(H_pre x_l), stream by stream (mHC, Xie et al. 2025; KromHC
    keeps it); n copies of the embedding in, their sum out. `mappings(l, streams)` is the
    scheme's own formula for sublayer l's H_pre, H_post and H_res."""
    h0 = model.wte(x) + model.wpe(torch.arange(x.shape[1]))
    streams = [h0] * n
    for l, f in enumerate(model.sublayers()):
        h_pre, h_post, h_res = mappings(l, streams)
        v = f(sum(h_pre[..., j : j + 1] * streams[j] for j in range(n)))
        streams = [
            sum(h_res[..., i, j : j + 1] * streams[j] for j in range(n))
            + h_post[..., i : i + 1] * v
            for i in range(n)
        ]
    return model.lm_head(model.ln_f(sum(streams)))


def outputs_and_grads(model, fn, x, y):
    model.zero_grad()
    logits = fn(x)
    F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
    return logits.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}


def assert_matches_the_formula(model, naive_logits, x, y):
    """The fp64 model's logits and every parameter's gradient equal those of `naive_logits(x)`
    (the formula written out) within 1e-10 (gradients: rtol 1e-8), in training and in
    inference; returns the model's gradients for the scheme's own checks of them."""
    out, grads = outputs_and_grads(model, model, x, y)
    ref, ref_grads = outputs_and_grads(model, naive_logits, x, y)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    assert grads.keys() == ref_grads.keys()
    for k in grads:
        torch.testing.assert_close(grads[k], ref_grads[k], atol=1e-10, rtol=1e-8, msg=k)
    model.eval()
    with torch.no_grad():  # inference runs the same path
        torch.testing.assert_close(model(x), ref, atol=1e-10, rtol=1e-10)
    return grads


def assert_causal(model):
    """Changing the tokens from position 6 on leaves the logits before it exactly as they were
    and changes those after it."""
    a = idx(B=1)
    b = a.clone()
    b[0, 6:] = (b[0, 6:] + 1) % BASE["vocab_size"]
    la, lb = model(a), model(b)
    torch.testing.assert_close(la[0, :6], lb[0, :6], atol=0, rtol=0)
    assert (la[0, 6:] - lb[0, 6:]).abs().max() > 1e-4


def assert_same_seed_same_logits_and_grads(make_model):
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        model = make_model()
        runs.append(outputs_and_grads(model, model, idx(), idx(seed=2)))
    (a, ga), (b, gb) = runs
    assert torch.equal(a, b) and all(torch.equal(ga[k], gb[k]) for k in ga)


def assert_one_graph_under_bf16_autocast(model):
    """One torch.compile graph under bf16 autocast (how GPU runs train), logits within 0.05 of
    fp32 and every gradient finite."""
    import torch._dynamo as dynamo

    x = idx()
    ref = model(x)
    dynamo.reset()
    with torch.autocast("cpu", torch.bfloat16):
        explained = dynamo.explain(model)(x)
        logits = model(x)
        F.cross_entropy(logits.float().flatten(0, 1), x.flatten()).backward()
    dynamo.reset()
    assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
    torch.testing.assert_close(logits.float(), ref, atol=0.05, rtol=0)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def assert_parameter_counts_agree(cfg, prefix, n_mixing):
    """The built model, the formula and the config count the same parameters, and the model has
    `n_mixing` mixing parameters, all under `prefix`."""
    model = ANDREA(cfg)
    assert count_parameters(model) == param_count_formula(cfg) == count_parameters(cfg)
    names = [name for name, _ in model.named_parameters() if is_mixing_parameter(name)]
    assert len(names) == n_mixing and all(name.startswith(prefix) for name in names)


def assert_flop_counter_sees_every_matmul(cfg):
    """The forward FLOPs FlopCounterMode measures equal the predicted matmul FLOPs exactly."""
    from andrea.testing.flops import measured_forward_per_token

    torch.manual_seed(0)
    assert measured_forward_per_token(ANDREA(cfg), 2, 12) == flops_per_token(cfg, 12).matmul


def recompute_outputs_and_grads(cfg, key, off_init):
    """The logits and every gradient of one model with its mappings moved off their init by
    `off_init(model)`, without and with `model.<key>` (the streams rebuilt in the backward)."""
    runs = []
    for on in (False, True):
        torch.manual_seed(7)
        model = off_init(ANDREA(replace(cfg, **{key: on})))
        runs.append(outputs_and_grads(model, model, idx(), idx(seed=2)))
    return runs


def assert_recompute_is_bit_for_bit(cfg, key, off_init):
    """With `model.<key>` the logits and all gradients equal storing the streams exactly."""
    (a, ga), (b, gb) = recompute_outputs_and_grads(cfg, key, off_init)
    assert torch.equal(a, b) and ga.keys() == gb.keys()
    assert all(torch.equal(ga[k], gb[k]) for k in ga)


def streams_kept(model, monkeypatch):
    """After a training forward: for each stream x_1 .. x_L the update made, whether it is still
    alive (kept for the backward: nothing else holds it once the forward moves on)."""
    import weakref

    import andrea.model.residuals.mhc as mhc

    made, update = [], mhc.update

    def tracked(*args):
        out = update(*args)
        made.append(weakref.ref(out))
        return out

    monkeypatch.setattr(mhc, "update", tracked)
    logits = model(idx())
    kept = [ref() is not None for ref in made]
    del logits
    return kept


def assert_recompute_keeps_no_stream(make_model, monkeypatch):
    """Without recompute the backward keeps every x_l but the last; with it none.
    `make_model(on)` builds the model with recompute on or off."""
    kept = {on: streams_kept(make_model(on), monkeypatch) for on in (False, True)}
    assert kept[False] == [True] * (2 * BASE["n_layer"] - 1) + [False]
    assert kept[True] == [False] * (2 * BASE["n_layer"])


def assert_resume_is_exact(full_dir, split_dir, overrides, label, prefix):
    """A tiny run with `overrides`, interrupted after 10 steps and resumed in `split_dir`, ends
    with the val loss and the weights bit-identical to an uninterrupted one in `full_dir`; its
    label is `label` and its mixing weights are under `prefix`."""
    from andrea.testing.runs import final_weights, train_tiny
    from andrea.train import Interrupted

    full = train_tiny(full_dir, *overrides)
    try:
        train_tiny(split_dir, *overrides, "train.stop_after_steps=10")
    except Interrupted:
        pass
    else:
        raise AssertionError("train.stop_after_steps=10 did not interrupt the run")
    resumed = train_tiny(split_dir, *overrides)
    assert resumed["val_loss"] == full["val_loss"] and full["label"] == label
    a, b = final_weights(full_dir), final_weights(split_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.startswith(prefix) for k in a)


def assert_refused_naming_the_key(overrides, message):
    """`overrides` at size=tiny-1 are refused while the run is resolved (before anything
    launches) with `message` in the error."""
    from andrea.config.resolve import ConfigError, resolve_run
    from andrea.testing.runs import compose_run

    try:
        resolve_run(compose_run([*overrides, "size=tiny-1"]))
    except ConfigError as error:
        assert message in str(error), f"{message!r} not in {str(error)!r}"
    else:
        raise AssertionError(f"{overrides} resolved: expected an error naming {message!r}")


def resolve_on_the_baselines_budget(model, *overrides):
    """The run `model=<model> size=tiny-1 <overrides>` resolves to, after checking that it
    trains on the baseline's token budget with more parameters than the baseline."""
    from andrea.config.resolve import resolve_run
    from andrea.testing.runs import compose_run

    spec = resolve_run(compose_run([f"model={model}", "size=tiny-1", *overrides]))
    base = resolve_run(compose_run(["model=baseline", "size=tiny-1"]))
    assert spec.tokens == base.tokens and spec.params > base.params  # the baseline's budget
    return spec


def assert_one_stream_is_the_baseline_with_unit_gates(make_model, off_init, mappings):
    """One stream (n = 1) of an mHC-style scheme: H_res = 1 whatever the mappings, so x_{l+1} =
    x_l + H_post f(H_pre x_l); with the gates pinned to 1 (no dynamic part, b_pre -> +inf,
    b_post = 0) the model is the baseline, same weights, same logits; at the init (gates not 1)
    it is not. `make_model()` builds the fp64 model, `off_init` moves its mappings off their
    init, `mappings(model)` are its stream mappings."""
    torch.manual_seed(0)
    one = off_init(make_model())
    for m in mappings(one):
        assert torch.equal(
            m(torch.randn(2, 3, 1, BASE["d_model"], dtype=torch.float64))[2],
            torch.ones(2, 3, 1, 1, dtype=torch.float64),
        )
    torch.manual_seed(0)
    base = ANDREA(ModelConfig(**BASE)).double()
    missing, unexpected = one.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and missing and all(is_mixing_parameter(k) for k in missing)
    with torch.no_grad():
        for m in mappings(one):
            m.gate.zero_()
            # sigma(50) = 1 in, 2 sigma(0) = 1 out; H_res's logits (if any) left at 0
            m.bias.copy_(torch.tensor([50.0, 0.0] + [0.0] * (len(m.bias) - 2)))
    torch.testing.assert_close(one(idx()), base(idx()), atol=1e-12, rtol=0)
    fresh = make_model()
    fresh.load_state_dict(base.state_dict(), strict=False)
    assert (fresh(idx()) - base(idx())).abs().max() > 1e-3
