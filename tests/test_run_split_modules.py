"""What every held-out split of public runs parted by model (bench/run_splits.by_model: Gadre et
al.'s, GPT-3's, OPT's, the OLMo ladder's, Gemstones', the Marin ladder's and Alabdulmohsin et
al.'s) owes the commands that score it, one test per rule over all of them: held out for the
planner and named by its alias in every scoring command, no benchmark fitter, a model that is
neither pool nor target refused, a missing file one error. Each module's own file
(tests/test_gadre.py, test_gpt3.py, test_opt.py, test_olmo_ladder.py, test_gemstones.py,
test_marin.py, test_alabdulmohsin.py) checks its data, its pool and target and the
point query on a sweep of known truth; the replay and --coverage of each run in
tests/test_heldout_script.py, whose smoke run reads their tables."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import pytest

from bench import (
    alabdulmohsin_splits,
    gadre_splits,
    gemstones_splits,
    gpt3_splits,
    marin_splits,
    olmo_ladder_splits,
    opt_splits,
    point_query,
)
from bench.scalebench_splits import (
    BAND_DEV,
    DEV,
    PLANNER_DEV,
    RUN_SPLITS,
    SPLITS,
    SplitError,
    aliases,
    load_split,
)
from tests.test_marin import synthetic


@dataclass(frozen=True)
class Case:
    module: ModuleType
    alias: str  # `--splits ALIAS` names every split of the module
    stranger: str  # a model of the source that is neither pool nor target
    # why the band is dev on its splits (BAND_DEV's reason contains it); None: held out
    band_dev: str | None
    # for runs not shipped: writes a synthetic file of them under a folder, read as --source
    source: Callable | None = None


CASES = {
    "gadre": Case(gadre_splits, "gadre", "open_lm_3b", "design and compare the candidate band"),
    "gpt3": Case(gpt3_splits, "gpt3", "1.3b", "drift is not adopted"),
    "opt": Case(opt_splits, "opt", "66b", "drift is not adopted"),
    "olmo_ladder": Case(olmo_ladder_splits, "olmo_ladder", "7B", None),
    "gemstones": Case(gemstones_splits, "gemstones", "512x11", "design and compare the band rule"),
    # d256-L4: no such shape in the source
    "marin": Case(
        marin_splits, "marin", "d256-L4", "sizes is adopted", lambda d: synthetic(d) and d
    ),
    # 262M: the source's name for the 262 M model on its BIG-Bench rows, not an LM curve
    "alabdulmohsin": Case(alabdulmohsin_splits, "alabdulmohsin", "262M", None),
}


def test_every_module_parted_by_model_is_a_case_here():
    by_model = {m for m in RUN_SPLITS if hasattr(m, "POOL_MODELS")}
    assert by_model == {c.module for c in CASES.values()}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_its_splits_are_held_out_for_the_planner_named_by_the_alias_and_not_benchmark_fitted(
    case, tmp_path
):
    names = set(case.module.SPLITS)
    for score in ("replay", "coverage", "point_query"):
        assert set(aliases(score)[case.alias]) == names
    for name in names:
        assert name in SPLITS and not {name} & (set(DEV) | set(PLANNER_DEV))
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")
        assert (name in BAND_DEV) == (case.band_dev is not None)
        assert case.band_dev is None or case.band_dev in BAND_DEV[name]
    # the marks a loaded split carries (loading an _auto twin would choose its law: not here)
    source = case.source(tmp_path) if case.source else None
    base = load_split(sorted(names)[0], source=source)
    assert (base.mark, base.band_mark) == ("held-out", "dev" if case.band_dev else "held-out")
    # the point query asks each split once: not its _auto twin, which repeats its runs
    assert set(point_query.names_of(case.alias, ())) == {n for n in names if "_auto" not in n}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_a_model_neither_pool_nor_target_is_an_error_and_a_missing_file_too(case, tmp_path):
    pool_model = case.module.POOL_MODELS[0]
    with pytest.raises(ValueError, match=f"neither pool nor target: {case.stranger}$"):
        case.module.in_pool([pool_model, case.stranger])
    with pytest.raises(SplitError, match="runs.csv: no such file"):
        load_split(next(iter(case.module.SPLITS)), tmp_path)


def test_the_point_query_refuses_an_unknown_split(capsys):
    assert point_query.main(["--splits", "olmo_ladder_nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --splits")
