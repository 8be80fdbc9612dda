"""andrea/ladder/shapes.py, the shape rule: every derived shape is within PARAM_TOL of its target
with a valid head_dim, near the aspect asked, counts what the built model counts; bad input is
refused naming the key; resolve_run labels the size and gives every cell the same tokens."""

from __future__ import annotations

import math

import pytest

from andrea.config.resolve import ConfigError, resolve_run, reuse_mismatches, spec_summary
from andrea.ladder import shapes
from andrea.ladder.sizes import SHAPES
from andrea.model.transformer import ModelConfig, count_parameters

GRID = [  # (target, head_ratio, head_dim kept, head_dim_multiple): tiny to GPU
    (56_640, None, 24, 1),
    (150_080, None, 16, 1),
    (447_552, 0.5, 24, 1),
    (12_000_000, 0.5, 64, 8),
    (49_236_480, 0.3, 64, 8),
    (49_236_480, 0.7, 64, 8),
    (49_236_480, None, 64, 8),
    (200_000_000, 0.5, 128, 8),
]


@pytest.mark.parametrize("target,ratio,hd,q", GRID)
def test_every_derived_shape_is_near_its_target_with_a_valid_head_dim(target, ratio, hd, q):
    derived = 0
    for aspect in (4, 6, 8, 10, 12, 15, 20, 25, 32, 40, 50, 64, 75, 100, 150):
        try:
            s = shapes.derive(target, aspect, ratio, hd, q)
        except shapes.ShapeError as e:
            assert f"size.aspect={aspect:g}" in str(e)  # refused only when no shape is near it
            continue
        derived += 1
        assert abs(s.params / target - 1) <= shapes.PARAM_TOL
        assert s.d_model % s.n_head == 0 and s.head_dim % q == 0
        assert s.head_dim >= shapes.MIN_HEAD_DIM and s.n_layer >= 1
        assert 1 / shapes.ASPECT_TOL <= s.aspect / aspect <= shapes.ASPECT_TOL
        if ratio is not None:
            assert 1 / shapes.HEAD_RATIO_TOL <= s.head_ratio / ratio <= shapes.HEAD_RATIO_TOL
        assert s.params == shapes.non_embedding(s.n_layer, s.n_head, s.d_model)
    assert derived >= 5


def test_the_closed_form_count_is_the_built_models():
    s = shapes.derive(150_080, 7.5, None, 16, 1)
    built = count_parameters(
        ModelConfig(
            n_layer=s.n_layer,
            n_head=s.n_head,
            d_model=s.d_model,
            vocab_size=2049,
            context_length=128,
        )
    )
    assert built.non_embedding == s.params


@pytest.mark.parametrize("name", ["tiny-3", "tiny-4", "andrea-50m", "andrea-12m"])
def test_a_named_sizes_own_aspect_gives_back_its_shape(name):
    z = next(z for z in SHAPES if z.name == name)
    target = shapes.non_embedding(z.n_layer, z.n_head, z.d_model)
    s = shapes.derive(
        target, z.d_model / z.n_layer, None, z.d_model // z.n_head, z.head_dim_multiple
    )
    assert (s.n_layer, s.n_head, s.d_model) == (z.n_layer, z.n_head, z.d_model)


def test_deeper_is_narrower_at_a_fixed_target():
    got = [shapes.derive(49_236_480, a, 0.5, 64, 8) for a in (15, 25, 35, 50, 75)]
    assert [s.n_layer for s in got] == sorted((s.n_layer for s in got), reverse=True)
    assert [s.d_model for s in got] == sorted(s.d_model for s in got)
    assert len({s.n_layer for s in got}) == 5


def test_head_ratio_sets_the_heads():
    s = shapes.derive(49_236_480, 64, 0.5, None, 8)
    assert (s.n_layer, s.n_head, s.d_model) == (10, 5, 640)


@pytest.mark.parametrize(
    "args,expect",
    [
        (
            (150_080, 30, None, 16, 1),
            ("size.aspect=30", "yields no valid shape", "21.3 (n_layer=3)", "39.2 (n_layer=2)"),
        ),
        ((150_080, 1000, None, 16, 1), ("size.aspect=1000", "111 (n_layer=1)")),
        ((500, 20, None, 16, 1), ("size.target_params=500", "too small for one layer")),
        ((150_080, 0, None, 16, 1), ("size.aspect=0", "> 0")),
        ((150_080, 20, -0.5, 16, 1), ("size.head_ratio=-0.5",)),
        ((150_080, 20, None, 16, 0), ("size.head_dim_multiple=0",)),
    ],
)
def test_bad_shapes_are_refused_naming_the_key(args, expect):
    with pytest.raises(shapes.ShapeError) as e:
        shapes.derive(*args)
    for text in expect:
        assert text in str(e.value)


@pytest.mark.parametrize(
    "ratio,expect",
    [
        # aspect 16 exists at tiny-3's count (n_layer 4, d_model 56); 5 heads per layer would give
        # head_dim 16 / 5 ~ 3: the head ratio is at fault, not the aspect
        (
            5,
            (
                "size.head_ratio=5 does not fit size.aspect=16",
                "aspect / head_ratio = 3.2",
                "below the smallest head_dim, 8",
                "at most 1.75",
                "1.75 (n_head=7, n_layer=4)",
            ),
        ),
        # one head is the fewest: n_head / n_layer >= 1/4, 25x the ratio asked (it trained,
        # n_head=1)
        (
            0.01,
            (
                "size.head_ratio=0.01 does not fit size.aspect=16",
                "n_head is at least 1",
                "at least 1 / n_layer = 0.25",
                "0.25 (n_head=1, n_layer=4)",
            ),
        ),
    ],
)
def test_a_head_ratio_no_shape_comes_near_is_refused_naming_it(ratio, expect):
    with pytest.raises(shapes.ShapeError) as e:
        shapes.derive(150_080, 16, ratio, None, 1)
    assert "size.aspect=16 yields" not in str(e.value)
    for text in expect:
        assert text in str(e.value), str(e.value)
    # the same aspect with a ratio that exists is derived, within the ratio's tolerance
    s = shapes.derive(150_080, 16, 0.5, None, 1)
    assert (s.n_layer, s.n_head) == (4, 2)


# --- resolve_run and the run directory ---------------------------------------------------------
def _spec(*overrides):
    from conftest import compose_run

    return resolve_run(compose_run(["size=tiny-3", *overrides]))


def test_resolve_run_derives_labels_and_budgets_the_target():
    wide = _spec("size.aspect=40")
    deep = _spec("size.aspect=7.5", "model=attnres_block_s2")
    plain = _spec()
    assert wide.size == "tiny-3@a40" and deep.size == "tiny-3@a7.5" and plain.size == "tiny-3"
    assert (wide.model.n_layer, deep.model.n_layer) == (2, 6)
    # C ~ 6 N D equal across cells: D counts the target, not each cell's own N
    assert wide.tokens == deep.tokens == plain.tokens
    assert wide.params_nonembedding != plain.params_nonembedding
    assert spec_summary(wide)["n_layer"] == 2
    # a finished cell is never reused as another shape's
    done = {**spec_summary(wide), "tokens": wide.tokens, "budgets": None}
    assert reuse_mismatches(done, wide) == []
    stale = reuse_mismatches(done, _spec("size.aspect=7.5"))
    assert any(s.startswith("size=") for s in stale) and any(
        s.startswith("n_layer=") for s in stale
    )


def test_resolve_run_refuses_a_bad_shape_naming_the_key():
    with pytest.raises(ConfigError, match=r"size.aspect=30 yields no valid shape"):
        _spec("size.aspect=30")
    with pytest.raises(ConfigError, match=r"size.head_ratio=0.5 applies to a derived shape"):
        _spec("size.head_ratio=0.5")
    with pytest.raises(ConfigError, match=r"size.target_params=100 is too small for one layer"):
        _spec("size.aspect=20", "size.target_params=100")
    with pytest.raises(ConfigError, match=r"size.head_ratio=0.01 does not fit size.aspect=16"):
        _spec("size.aspect=16", "size.head_ratio=0.01")


def test_run_directory_carries_the_shape_label():
    from conftest import compose_run

    cfg = compose_run(
        ["size=tiny-3", "size.aspect=40", "size.head_ratio=0.5"], return_hydra_config=True
    )
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)
    path = str(cfg.hydra.run.dir)
    assert "/tiny-3@a40_h0.5/baseline/seed0" in path and "size.aspect" not in path


def test_size_label_round_trips_through_the_analysis():
    from analysis.estimates.shape_optima import parse_size

    assert parse_size(shapes.size_label("andrea-50m", 32, 0.5, 40_000_000)) == (
        "andrea-50m",
        32.0,
        0.5,
        "4e+07",
    )
    assert parse_size(shapes.size_label("tiny-3", 7.5)) == ("tiny-3", 7.5, None, None)
    assert parse_size("tiny-3") == ("tiny-3", None, None, None)
    assert math.isclose(shapes.derive(150_080, 7.5, None, 16, 1).aspect, 7.5)
