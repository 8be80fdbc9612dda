"""andrea/components/optim.py: which parameters Muon takes, its settings, the combined optimizer,
and a Muon run end to end (results, exact resume, the reuse check)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, compose_run
from torch import nn

from andrea.components.checkpoint import load_latest_checkpoint
from andrea.components.optim import MuonWithAdamW, build_optimizer, hidden_matrices
from andrea.config.resolve import ConfigError, resolve_run, reuse_mismatches
from andrea.model.transformer import ANDREA, ModelConfig
from andrea.run.rundir import RunDir
from andrea.train import Interrupted, train

SHAPE = dict(n_layer=2, n_head=2, d_model=16, vocab_size=64, context_length=16)
HIDDEN = {
    f"blocks.{i}.{name}.weight"
    for i in range(2)
    for name in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")
}
VARIANTS = [
    dict(residual="baseline"),
    dict(residual="baseline", tie_embeddings=False),
    dict(residual="attnres_full"),
    dict(residual="attnres_block", block_size=2),
    dict(residual="denseformer"),
    dict(residual="attnres_full", attnres_input_query=True),  # a 2-D d x d mixing matrix
    dict(residual="attnres_full", attnres_static_mix=True),
    dict(residual="attnres_full", attnres_heads=2, attnres_key_norm=False),
]


def spec_for(*extra: str):
    return resolve_run(compose_run([*TINY_RUN, *extra]))


def names(model: nn.Module, params) -> set[str]:
    ids = {id(p) for p in params}
    return {n for n, p in model.named_parameters() if id(p) in ids}


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(f"{v}" for v in kw.values()))
def test_muon_takes_exactly_the_attention_and_mlp_matrices_of_every_variant(kw):
    model = ANDREA(ModelConfig(**SHAPE, **kw))
    opt = build_optimizer(model, spec_for("train.optimizer=muon"), torch.device("cpu"))
    muon, adamw = opt.optimizers["muon"], opt.optimizers["adamw"]
    on_muon = names(model, [p for g in muon.param_groups for p in g["params"]])
    on_adamw = names(model, [p for g in adamw.param_groups for p in g["params"]])
    assert on_muon == HIDDEN
    # Every other parameter is on AdamW, once: embeddings, head, norms, biases, mixing.
    assert on_muon.isdisjoint(on_adamw)
    assert on_muon | on_adamw == {n for n, _ in model.named_parameters()}
    assert "wte.weight" in on_adamw
    if kw.get("attnres_input_query"):
        assert any(n.endswith("query_proj.weight") for n in on_adamw)


def test_a_new_module_stays_on_adamw_unless_listed():
    """The rule is an allow-list: a 2-D Linear in any other module (a future mixing scheme) is
    not Muon's, even inside a block."""
    model = ANDREA(ModelConfig(**SHAPE))
    model.blocks[0].mixer = nn.Linear(16, 16)
    model.extra = nn.Linear(16, 16, bias=False)
    assert names(model, hidden_matrices(model)) == HIDDEN


def test_settings_reach_the_optimizers_and_one_lr_drives_both():
    spec = spec_for(
        "train.optimizer=muon",
        "train.weight_decay=0.05",
        "train.muon.momentum=0.9",
        "train.muon.ns_steps=3",
        "train.muon.nesterov=false",
    )
    model = ANDREA(spec.model)
    opt = build_optimizer(model, spec, torch.device("cpu"))
    g, qkv = opt.optimizers["muon"].param_groups
    assert (g.get("split", 1), qkv["split"]) == (1, 3)
    assert qkv["params"] == [b.attn.qkv.weight for b in model.blocks]
    assert all(qkv[k] == g[k] for k in ("lr", "weight_decay", "momentum", "ns_steps", "nesterov"))
    assert (
        g["lr"],
        g["weight_decay"],
        g["momentum"],
        g["ns_steps"],
        g["nesterov"],
        g["adjust_lr_fn"],
    ) == (spec.lr, 0.05, 0.9, 3, False, "match_rms_adamw")
    decay, no_decay = opt.optimizers["adamw"].param_groups
    assert decay["weight_decay"] == 0.05 and no_decay["weight_decay"] == 0.0
    assert decay["betas"] == (0.9, spec.train.beta2)
    for group in opt.param_groups:  # what Trainer._train_step does
        group["lr"] = 1.25e-3
    assert all(g["lr"] == 1.25e-3 for o in opt.optimizers.values() for g in o.param_groups)


def test_match_rms_adamw_gives_updates_of_rms_0_2_lr():
    """Moonlight's matching (Liu et al. 2025): each hidden matrix's update has RMS ~0.2 x lr,
    AdamW-like, whatever its shape; Jordan's original scaling is sqrt(max(1, A/B)) x lr per unit
    of the orthogonalised update instead. Same gradients, so the ratio is exact."""
    steps = {}
    for adjust in ("match_rms_adamw", "original"):
        torch.manual_seed(0)
        spec = spec_for(
            "train.optimizer=muon", "train.weight_decay=0", f"train.muon.adjust_lr={adjust}"
        )
        model = ANDREA(spec.model)
        opt = build_optimizer(model, spec, torch.device("cpu"))
        mats = hidden_matrices(model)
        before = [p.detach().clone() for p in mats]
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        opt.step()
        steps[adjust] = [
            float((p.detach() - b).pow(2).mean().sqrt()) / spec.lr for p, b in zip(mats, before)
        ]
    for p, rms, orig in zip(mats, steps["match_rms_adamw"], steps["original"]):
        A, B = p.shape
        assert rms == pytest.approx(0.2, rel=0.35), (A, B, rms)
        assert rms / orig == pytest.approx(
            0.2 * math.sqrt(max(A, B)) / math.sqrt(max(1, A / B)), rel=1e-3
        )


def _qkv_updates(split: bool, steps: int = 2, d: int = 16):
    """The fused qkv weight [3d, d] after `steps` Muon steps of andrea's optimizer, beside the
    same steps of torch's Muon on (a) three separate d x d matrices q, k, v and (b) the fused
    matrix as one; same initial weights and gradients throughout."""
    torch.manual_seed(0)
    spec = spec_for("train.optimizer=muon", f"train.muon.split_qkv={str(split).lower()}")
    model = ANDREA(ModelConfig(**SHAPE))
    opt = build_optimizer(model, spec, torch.device("cpu"))
    w = model.blocks[0].attn.qkv.weight
    apart = [nn.Parameter(t.detach().clone()) for t in w.chunk(3, dim=0)]
    fused = nn.Parameter(w.detach().clone())
    kw = dict(
        lr=spec.lr,
        weight_decay=spec.train.weight_decay,
        momentum=0.95,
        nesterov=True,
        ns_steps=5,
        adjust_lr_fn="match_rms_adamw",
    )
    ref_apart, ref_fused = torch.optim.Muon(apart, **kw), torch.optim.Muon([fused], **kw)
    for _ in range(steps):  # a second step: the momentum buffer is split consistently too
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        for p, g in zip(apart, w.grad.chunk(3, dim=0)):
            p.grad = g.clone()
        fused.grad = w.grad.clone()
        opt.step(), ref_apart.step(), ref_fused.step()
    return w.detach(), torch.cat([p.detach() for p in apart]), fused.detach()


def test_muon_orthogonalises_q_k_and_v_apart_as_three_matrices():
    """Moonlight, Megatron-LM (muon_split_qkv, its default), nanochat and modded-nanogpt
    orthogonalise q, k and v each on its own, each step scaled by its own d x d shape: andrea's
    fused [3d, d] weight gets exactly the update of three separately stored matrices, and not
    the one-matrix update (which differs by far more than bfloat16's rounding)."""
    ours, apart, fused = _qkv_updates(split=True)
    assert torch.allclose(ours, apart, rtol=0, atol=1e-7)
    assert not torch.allclose(ours, fused, rtol=0, atol=1e-4)
    # train.muon.split_qkv=false: the fused treatment, for comparison
    off, *_ = _qkv_updates(split=False)
    assert torch.allclose(off, fused, rtol=0, atol=1e-7)


def test_the_combined_state_round_trips_and_refuses_an_adamw_state():
    spec = spec_for("train.optimizer=muon")
    model = ANDREA(spec.model)
    opt = build_optimizer(model, spec, torch.device("cpu"))
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    state = opt.state_dict()
    assert set(state) == {"muon", "adamw"}
    assert len(state["muon"]["state"]) == len(hidden_matrices(model)) > 0
    fresh = build_optimizer(model, spec, torch.device("cpu"))
    fresh.load_state_dict(state)
    again = fresh.state_dict()
    for name, key in (("muon", "momentum_buffer"), ("adamw", "exp_avg"), ("adamw", "exp_avg_sq")):
        assert again[name]["state"].keys() == state[name]["state"].keys(), name
        for i, s in state[name]["state"].items():
            assert torch.equal(again[name]["state"][i][key], s[key]), (name, key, i)
    adamw = build_optimizer(model, spec_for(), torch.device("cpu"))
    with pytest.raises(ValueError, match="not Muon \\+ AdamW"):
        fresh.load_state_dict(adamw.state_dict())
    assert isinstance(opt, MuonWithAdamW) and isinstance(adamw, torch.optim.AdamW)


# ---- config ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, named",
    [
        (["train.optimizer=sgd"], "train.optimizer='sgd'"),
        (
            ["train.optimizer=muon", "train.muon.adjust_lr=spectral"],
            "train.muon.adjust_lr='spectral'",
        ),
        (["train.optimizer=muon", "train.muon.momentum=1.0"], "train.muon.momentum=1.0"),
        (["train.optimizer=muon", "train.muon.ns_steps=0"], "train.muon.ns_steps=0"),
        (["train.muon.momentum=0.9"], "applies to train.optimizer=muon only"),
    ],
)
def test_bad_optimizer_settings_are_named(overrides, named):
    with pytest.raises(ConfigError, match=named.replace("+", "\\+")):
        spec_for(*overrides)


def test_results_record_the_optimizer_and_the_reuse_check_compares_it():
    muon, adamw = spec_for("train.optimizer=muon"), spec_for()
    from andrea.config.resolve import spec_summary

    summary = spec_summary(muon)
    assert summary["optimizer"] == "muon" and summary["muon"]["adjust_lr"] == "match_rms_adamw"
    assert spec_summary(adamw)["optimizer"] == "adamw" and spec_summary(adamw)["muon"] is None
    old = {k: v for k, v in spec_summary(adamw).items() if k not in ("optimizer", "muon")}
    old.update(tokens=adamw.steps * adamw.batch_tokens, budgets=None)
    assert reuse_mismatches(old, adamw) == []  # written before the key: AdamW
    assert reuse_mismatches(old, muon) == [
        "optimizer='adamw' (now 'muon')",
        "muon=None (now {'momentum': 0.95, 'nesterov': True, "
        "'ns_steps': 5, 'adjust_lr': 'match_rms_adamw', "
        "'split_qkv': True})",
    ]
    # a Muon run from before q, k and v were split (its muon settings lack split_qkv) is refused
    fused = spec_summary(muon) | {"tokens": muon.steps * muon.batch_tokens, "budgets": None}
    fused["muon"] = {k: v for k, v in fused["muon"].items() if k != "split_qkv"}
    assert [m.split("=")[0] for m in reuse_mismatches(fused, muon)] == ["muon"]
    slower = spec_for("train.optimizer=muon", "train.muon.ns_steps=3")
    assert [
        m.split("=")[0]
        for m in reuse_mismatches(
            spec_summary(muon) | {"tokens": muon.steps * muon.batch_tokens, "budgets": None}, slower
        )
    ] == ["muon"]


def test_an_hparams_file_of_another_optimizer_is_refused(tmp_path):
    (tmp_path / "hparams").mkdir()
    (tmp_path / "hparams" / "scan_muon.yaml").write_text(
        "name: scan_muon\noptimizer: muon\nsizes:\n  tiny-1:\n    lr: 0.01\n"
    )
    over = [f"hydra.searchpath=[file://{tmp_path}]", "hparams=scan_muon"]
    assert spec_for(*over, "train.optimizer=muon").lr == pytest.approx(0.01)
    with pytest.raises(ConfigError, match="selected under train.optimizer=muon"):
        spec_for(*over)


# ---- a Muon run end to end ------------------------------------------------------------------
def run(path: Path, *extra: str) -> dict:
    return train(spec_for(*extra), RunDir(path), {"overrides": list(extra)})


def test_a_muon_run_records_it_and_resumes_exactly(tmp_path, data_cache):
    """Interrupted halfway (inside a cooldown branch too) and resumed, a Muon run ends
    bit-identical to an uninterrupted one: both optimizers' states are in its checkpoints."""
    extra = (
        "model=attnres_block",
        "model.block_size=2",
        "train.optimizer=muon",
        "train.budgets=[0.5,1]",
        "wandb.mode=disabled",
    )
    full = run(tmp_path / "full", *extra)
    assert full["optimizer"] == "muon" and full["muon"]["ns_steps"] == 5
    # 7: on the trunk; 11: inside budget 0.5's cooldown branch (steps 10..12, after 10 trunk steps)
    for stop in (7, 11):
        path = tmp_path / f"split{stop}"
        with pytest.raises(Interrupted):
            run(path, *extra, f"train.stop_after_steps={stop}")
        resumed = run(path, *extra)
        assert resumed["val_loss"] == full["val_loss"]
        assert [p["val_loss"] for p in resumed["points"]] == [p["val_loss"] for p in full["points"]]
        a = load_latest_checkpoint(RunDir(tmp_path / "full"))[0]
        b = load_latest_checkpoint(RunDir(path))[0]
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
        bufs_a, bufs_b = (
            [v["momentum_buffer"] for v in s["optimizer"]["muon"]["state"].values()] for s in (a, b)
        )
        assert all(torch.equal(x, y) for x, y in zip(bufs_a, bufs_b)) and len(bufs_a) == 8


def _run_and_spec(*overrides: str):
    from andrea.config.resolve import to_dataclass

    run = to_dataclass(compose_run(["size=tiny-1", *overrides]))
    return run, resolve_run(run)


@pytest.mark.parametrize(
    "overrides,named",
    [
        (["train.optimizer=muon"], "hparams=rule: the size rule, fitted under AdamW"),
        (
            ["train.optimizer=muon", "hparams=lr_scan_cpu"],
            "hparams=lr_scan_cpu: not scanned under Muon",
        ),
        (["train.optimizer=muon", "hparams=lr_scan_cpu_muon"], None),  # Muon's own scan
        (["train.optimizer=muon", "train.lr=0.03"], None),  # an LR of one's own
        (["hparams=lr_scan_cpu"], None),  # AdamW
    ],
)
def test_muon_at_an_lr_selected_under_adamw_is_warned_about(overrides, named):
    """docs/protocol.md §4 measured Muon's best LR at 7-10x AdamW's on the CPU sizes: a Muon
    sweep at AdamW's LR picks (hparams=lr_scan_cpu, or the size rule) compares the variants
    far from Muon's optimum. One line, not an error."""
    from andrea.launch.plan import muon_hparams_warning

    warning = muon_hparams_warning([_run_and_spec(*overrides)])
    if named is None:
        assert warning is None
    else:
        assert (
            warning.startswith(
                "warning: train.optimizer=muon with hyper-parameters selected under AdamW"
            )
            and named in warning
            and "7-10x" in warning
        )
        assert "\n" not in warning


def test_an_lr_scan_under_muon_is_not_warned_about():
    from andrea.launch.plan import muon_hparams_warning

    scan = [_run_and_spec("train.optimizer=muon", f"train.lr_scale={x}") for x in (1, 4, 16)]
    assert muon_hparams_warning(scan) is None


def test_the_plan_of_a_muon_sweep_at_adamws_lr_prints_the_warning(tmp_path):
    import subprocess
    import sys

    from conftest import REPO

    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "sweep.py"),
            "-m",
            "size=tiny-1",
            "train.optimizer=muon",
            "hparams=lr_scan_cpu",
            "train.seed=0,1",
            f"out_dir={tmp_path}",
            "plan=true",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("warning: train.optimizer=muon with hyper-parameters selected") == 1
