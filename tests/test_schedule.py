"""The LR schedule at every phase boundary, with and without budgets, against formulas written
out here (andrea/components/schedule.py's docstring states the convention), and the budgets'
validation."""

from __future__ import annotations

import math

import pytest
from conftest import TINY_RUN, compose_run

from andrea.components.schedule import Cooldown, learning_rate
from andrea.config.resolve import ConfigError, resolve_run

# train.tokens=51200 / batch_tokens=512: budget 1 = 100 steps; warmup 10 % = 10 steps.
BASE = [*TINY_RUN, "train.tokens=51200", "train.warmup_frac=0.1"]


def spec_for(*extra: str):
    return resolve_run(compose_run([*BASE, *extra]))


def test_budgets_become_cooldowns_ending_at_each_budget():
    spec = spec_for("train.budgets=[1,0.25,0.5]", "train.cooldown_frac=0.2")
    # end = D x 100 steps; cooldown = round(0.2 x end) steps before it
    assert spec.cooldowns == (Cooldown(0.25, 20, 25), Cooldown(0.5, 40, 50), Cooldown(1.0, 80, 100))
    assert spec.steps == 100 and spec.tokens == 100 * 512 and spec.warmup_steps == 10
    assert spec.steps_spent == 100 + 5 + 10  # trunk + the two branches' cooldowns
    longer = spec_for("train.budgets=[0.5,2]")
    assert longer.steps == 200 and longer.warmup_steps == 10  # warmup counts budget 1's steps
    assert spec_for().cooldowns == () and spec_for().steps_spent == 100


@pytest.mark.parametrize("shape", ["linear", "1-sqrt"])
def test_lr_at_every_phase_boundary_with_budgets(shape):
    spec = spec_for(
        "train.budgets=[0.5,1]",
        "train.cooldown_frac=0.2",
        f"train.cooldown_shape={shape}",
        "train.min_lr_ratio=0.1",
    )
    peak, floor = spec.lr, spec.lr * 0.1

    def cooled(p):  # the shape's formula, written out (Hägele et al. 2024, Eq. 1 for 1-sqrt)
        return (
            peak - (peak - floor) * p
            if shape == "linear"
            else floor + (peak - floor) * (1 - math.sqrt(p))
        )

    lr = lambda step, end=None: learning_rate(step, spec, end)  # noqa: E731
    # warmup: step w trains with peak * (w + 1) / 10; its last step is exactly peak
    assert lr(0) == pytest.approx(peak / 10, rel=1e-12)
    assert lr(9) == peak and lr(10) == peak
    # the trunk (cooldown of budget 1: steps 80..99): stable up to step 79
    assert lr(79) == peak
    assert lr(80) == pytest.approx(cooled(1 / 20), rel=1e-12)  # cooldown start
    assert lr(89) == pytest.approx(cooled(10 / 20), rel=1e-12)
    assert lr(99) == pytest.approx(floor, rel=1e-12)  # cooldown end: the floor exactly
    # the branch of budget 0.5 (steps 40..49), while the trunk stays at peak there
    assert lr(39, 50) == peak and lr(40) == lr(49) == peak
    assert lr(40, 50) == pytest.approx(cooled(1 / 10), rel=1e-12)
    assert lr(49, 50) == pytest.approx(floor, rel=1e-12)
    decaying = [lr(s) for s in range(80, 100)]
    assert all(a > b for a, b in zip(decaying, decaying[1:]))


def test_the_trunk_does_not_depend_on_the_other_budgets():
    """budgets=[0.5] and budgets=[0.5,1] train the same first 50 steps, so a point is what a
    run trained to its budget alone would give."""
    alone, several = spec_for("train.budgets=[0.5]"), spec_for("train.budgets=[0.5,1]")
    assert [learning_rate(s, alone) for s in range(50)] == [
        learning_rate(s, several, end=50) for s in range(50)
    ]


def test_schedules_without_budgets_are_unchanged():
    """Cosine and WSD without budgets give today's LR at every step (formulas copied from the
    schedule before budgets existed)."""
    for schedule in ("cosine", "wsd"):
        spec = spec_for(f"train.schedule={schedule}", "train.decay_frac=0.2")
        peak, floor, steps = spec.lr, spec.lr * spec.train.min_lr_ratio, spec.steps
        warmup = max(1, round(spec.train.warmup_frac * steps))
        for step in range(steps):
            if step < warmup:
                want = peak * (step + 1) / warmup
            elif schedule == "cosine":
                progress = (step - warmup) / max(1, steps - warmup)
                want = floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(progress, 1.0)))
            else:
                start = steps - max(1, round(0.2 * steps))
                want = (
                    peak
                    if step < start
                    else peak
                    + (floor - peak) * min((step - start + 1) / max(1, steps - start), 1.0)
                )
            assert learning_rate(step, spec) == want, (schedule, step)


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.budgets=[0.5,0.5]", "distinct positive"),
        ("train.budgets=[-1,1]", "distinct positive"),
        ("train.budgets=[0,1]", "distinct positive finite"),
        ("train.budgets=[nan]", "distinct positive finite"),
        ("train.budgets=[0.5,inf]", "distinct positive finite"),  # was an OverflowError
        ("train.budgets=[0.1,1]", "inside the warmup of 10 steps"),  # cooldown starts at step 8
        ("train.budgets=[0.5,0.501]", "both end at step 50"),
        ("train.budgets=[0.001]", "less than one optimizer step"),
        ("train.cooldown_shape=cosine", "train.cooldown_shape='cosine'; valid: linear, 1-sqrt"),
        ("train.cooldown_frac=0", r"train.cooldown_frac=0.0 must lie in \(0, 1\]"),
        ("train.val_tokens=10", "train.val_tokens=10 is less than one validation window"),
    ],
)
def test_bad_budgets_are_refused_with_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        spec_for(override)


def _run_and_spec(*overrides: str):
    from andrea.config.resolve import to_dataclass

    run = to_dataclass(compose_run([*BASE, *overrides]))
    return run, resolve_run(run)


def test_budgets_past_1_are_said_in_one_line():
    """train.budgets=[0.5,1.5] trains every run to 1.5x its token budget (the largest budget is
    its length): a grid planned at 20 tokens/param is one at 30, which is said, not silent."""
    from andrea.launch.plan import over_budget_note

    note = over_budget_note([_run_and_spec("train.tokens=null", "train.budgets=[0.5,1.5]")])
    assert note is not None and "\n" not in note
    assert "each run trains 1.5x its token budget (20 -> 30 tokens/param)" in note
    fixed = over_budget_note([_run_and_spec("train.budgets=[0.5,2]")])
    assert "each run trains 2x its token budget (train.tokens=51200 -> 102400 tokens)" in fixed
    mixed = [_run_and_spec("train.budgets=[0.5,2]"), _run_and_spec()]
    assert "1 of 2 runs train 2x its token budget" in over_budget_note(mixed)
    assert over_budget_note([_run_and_spec("train.budgets=[0.5,1]"), _run_and_spec()]) is None


def test_a_single_run_past_its_budget_says_so_first(tmp_path, monkeypatch, capsys):
    """The note is a single run's first line, before its data or training (train is stubbed)."""
    import logging
    import runpy
    import sys

    from conftest import REPO, TINY_RUN

    import andrea.train

    monkeypatch.setattr(andrea.train, "train", lambda *args, **kwargs: {})
    argv = [*TINY_RUN, "train.budgets=[0.5,1.5]", f"out_dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["sweep.py", *argv])
    handlers, level = logging.root.handlers[:], logging.root.level  # Hydra configures logging
    try:
        runpy.run_path(str(REPO / "sweep.py"), run_name="__main__")
    finally:
        from hydra.core.global_hydra import GlobalHydra

        logging.root.handlers[:], logging.root.level = handlers, level
        GlobalHydra.instance().clear()
    err = capsys.readouterr().err.splitlines()
    assert err and err[0].startswith("note: train.budgets above 1: each run trains 1.5x")
    assert "(train.tokens=12288 -> 18432 tokens)" in err[0]


def test_val_tokens_default_is_1024_windows():
    assert resolve_run(compose_run(["size=tiny-1"])).val_tokens == 1024 * 128  # context 128
    assert resolve_run(compose_run(["size=andrea-12m"])).val_tokens == 2**20  # >= 1 M on GPU sizes
