"""What every held-out split of public runs parted by model (bench/run_splits.by_model: Gadre et
al.'s, GPT-3's, OPT's, the OLMo ladder's, Gemstones', the Marin ladder's, Alabdulmohsin et
al.'s, Pandey's, Li, Kudugunta & Zettlemoyer's and OpenEuroLLM's) owes the commands that score
it, one test per rule over all of them: held out for the planner (but where a candidate of the
planner was scored on it: misfit's and oellm's, PLANNER_DEV) and named by its alias in every
scoring command, no benchmark fitter, a model that is neither pool nor target refused, a missing
file one error. Each module's own file (tests/test_gadre.py, test_gpt3.py, test_opt.py,
test_olmo_ladder.py, test_gemstones.py, test_marin.py, test_alabdulmohsin.py, test_pandey.py,
test_misfit.py, test_oellm.py) checks
its data, its pool and target and the point query on a sweep of known truth; the replay and
--coverage of each run in tests/test_heldout_script.py, whose smoke run reads their tables. Beck
et al. 2025's xlstm splits and Llama 3's llama3 split, parted by isoFLOP budget, not by model, owe
the same where it applies (their own tests below; tests/test_xlstm.py, tests/test_llama3.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

import pytest

from bench import (
    alabdulmohsin_splits,
    gadre_splits,
    gemstones_splits,
    gpt3_splits,
    llama3_splits,
    marin_splits,
    misfit_splits,
    oellm_splits,
    olmo_ladder_splits,
    opt_splits,
    pandey_splits,
    point_query,
    xlstm_splits,
)
from bench.scalebench_splits import (
    BAND_DEV,
    DEV,
    LAW_CHOICE_DEV,
    PLANNER_DEV,
    RUN_SPLITS,
    SPLITS,
    SplitError,
    aliases,
    load_split,
)
from tests.conftest import REPO
from tests.test_llama3 import synthetic as llama3_synthetic
from tests.test_marin import synthetic
from tests.test_misfit import synthetic as misfit_synthetic
from tests.test_oellm import synthetic as oellm_synthetic
from tests.test_xlstm import synthetic as xlstm_synthetic


@dataclass(frozen=True)
class Case:
    module: ModuleType
    alias: str  # `--splits ALIAS` names every split of the module
    stranger: str  # a model of the source that is neither pool nor target
    # why the band is dev on its splits (BAND_DEV's reason contains it); None: held out
    band_dev: str | None
    # why the law choice is dev on its splits (LAW_CHOICE_DEV's reason contains it); None: held
    # out (a sweep not yet scored by the candidate law choices' adoption rules)
    law_choice_dev: str | None
    # for runs not shipped: writes a synthetic file of them under a folder, read as --source
    source: Callable | None = None
    # why the planner is dev on its splits (PLANNER_DEV's reason contains it); None: held out
    planner_dev: str | None = None


DESIGNED = "used to design the candidate law choice monotone"
SCORED = "monotone was scored on it by its adoption rule"
CASES = {
    # dev for the planner: its default first budget, cheapest, was designed on these rows
    "gadre": Case(
        gadre_splits,
        "gadre",
        "open_lm_3b",
        "design and compare the candidate band",
        DESIGNED,
        planner_dev="was designed on its planner rows",
    ),
    "gpt3": Case(gpt3_splits, "gpt3", "1.3b", "drift is not adopted", DESIGNED),
    "opt": Case(opt_splits, "opt", "66b", "drift is not adopted", DESIGNED),
    "olmo_ladder": Case(olmo_ladder_splits, "olmo_ladder", "7B", None, SCORED),
    "gemstones": Case(
        gemstones_splits, "gemstones", "512x11", "design and compare the band rule", SCORED
    ),
    # d256-L4: no such shape in the source
    "marin": Case(
        marin_splits,
        "marin",
        "d256-L4",
        "sizes is adopted",
        SCORED,
        lambda d: synthetic(d) and d,
    ),
    # 262M: the source's name for the 262 M model on its BIG-Bench rows, not an LM curve
    "alabdulmohsin": Case(
        alabdulmohsin_splits, "alabdulmohsin", "262M", None, "monotone and sizes were scored"
    ),
    # 1024x32: the authors' FSDP script's shape, not a run of this file
    # dev for the planner: its default first budget, cheapest, failed its rule on these rows
    "gzip": Case(
        pandey_splits,
        "gzip",
        "1024x32",
        None,
        "monotone and sizes were scored",
        planner_dev="scored on it by its rule and failed",
    ),
    # misfitting_150m: a size of the authors' sweep configuration with no run in the file;
    # scored: held out for the band, dev for the law choice and the planner (the candidates
    # monotone and --pilot cheapest scored on it by their rules, and passed them)
    "misfit": Case(
        misfit_splits,
        "misfit",
        "misfitting_150m",
        None,
        "monotone changed its choice",
        lambda d: misfit_synthetic(d) and d,
        "which --pilot cheapest passed",
    ),
    # 1.3B: a size of OpenEuroLLM's reference models (open-sci-ref), not in this grid; scored:
    # held out for the band, dev for the law choice (monotone and sizes scored on it, both said
    # nothing) and the planner (--pilot cheapest passed on it, its third deciding sweep: adopted)
    "oellm": Case(
        oellm_splits,
        "oellm",
        "1.3B",
        None,
        "both chose chinchilla, as the default did",
        lambda d: oellm_synthetic(d) and d,
        "its third deciding sweep, which it passed: adopted",
    ),
}


def test_every_module_parted_by_model_is_a_case_here():
    by_model = {m for m in RUN_SPLITS if hasattr(m, "POOL_MODELS")}
    assert by_model == {c.module for c in CASES.values()}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_its_splits_are_held_out_for_the_planner_named_by_the_alias_and_not_benchmark_fitted(
    case, tmp_path
):
    """Held out for the planner unless a candidate of the planner was decided on it
    (PLANNER_DEV: misfit's and oellm's, where --pilot cheapest was scored by its rule)."""
    names = set(case.module.SPLITS)
    for score in ("replay", "coverage", "point_query"):
        assert set(aliases(score)[case.alias]) == names
    for name in names:
        assert name in SPLITS and name not in DEV
        assert (name in PLANNER_DEV) == (case.planner_dev is not None)
        assert case.planner_dev is None or case.planner_dev in PLANNER_DEV[name]
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")
        assert (name in BAND_DEV) == (case.band_dev is not None)
        assert case.band_dev is None or case.band_dev in BAND_DEV[name]
        assert (name in LAW_CHOICE_DEV) == (case.law_choice_dev is not None)
        assert case.law_choice_dev is None or case.law_choice_dev in LAW_CHOICE_DEV[name]
    # the marks a loaded split carries (loading an _auto twin would choose its law: not here)
    source = case.source(tmp_path) if case.source else None
    base = load_split(sorted(names)[0], source=source)
    assert base.mark == ("dev" if case.planner_dev else "held-out")
    assert base.band_mark == ("dev" if case.band_dev else "held-out")
    assert base.law_choice_mark == ("dev" if case.law_choice_dev else "held-out")
    # the point query asks each split once: not its _auto twin, which repeats its runs
    assert set(point_query.names_of(case.alias, ())) == {n for n in names if "_auto" not in n}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_a_model_neither_pool_nor_target_is_an_error_and_a_missing_file_too(case, tmp_path):
    pool_model = case.module.POOL_MODELS[0]
    with pytest.raises(ValueError, match=f"neither pool nor target: {case.stranger}$"):
        case.module.in_pool([pool_model, case.stranger])
    with pytest.raises(SplitError, match="runs.csv: no such file"):
        load_split(next(iter(case.module.SPLITS)), tmp_path)


def test_the_splits_parted_by_budget_are_held_out_named_by_the_alias_and_not_benchmark_fitted(
    tmp_path,
):
    """Beck et al.'s xlstm splits (bench/xlstm_splits.py: no POOL_MODELS, so no Case above),
    scored once: what a Case checks, where it applies to a split parted by budget. Held out for
    the planner and the band, dev for the law choice (monotone and sizes scored on it by their
    rules, monotone dropped); every split named by the alias in every score; no benchmark fitter;
    a budget neither pool nor target refused; a missing file one error."""
    assert not hasattr(xlstm_splits, "POOL_MODELS")
    names = set(xlstm_splits.SPLITS)
    assert len(names) == 6
    for score in ("replay", "coverage", "point_query"):
        assert set(aliases(score)[xlstm_splits.ALIAS]) == names
    for name in names:
        assert name in SPLITS and name not in DEV
        assert name not in PLANNER_DEV and name not in BAND_DEV
        assert "monotone's third deciding sweep" in LAW_CHOICE_DEV[name]
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")
    # the marks a loaded split carries (loading an _auto twin would choose its law: not here)
    source = xlstm_synthetic(tmp_path / "source") and tmp_path / "source"
    for name in sorted(n for n in names if "_auto" not in n):
        split = load_split(name, source=source)
        assert (split.mark, split.band_mark, split.law_choice_mark) == (
            "held-out",
            "held-out",
            "dev",
        ), name
    # the point query asks each split once: not its _auto twin, which repeats its runs
    assert point_query.names_of(xlstm_splits.ALIAS, ()) == [
        "xlstm_ctx2048",
        "xlstm_ctx8192",
        "xlstm_ctx16384",
    ]
    with pytest.raises(ValueError, match="neither pool nor target: 3e20$"):
        xlstm_splits.in_pool(["1e19", "3e20"], 8192)
    with pytest.raises(SplitError, match="runs.csv: no such file"):
        load_split("xlstm_ctx8192", tmp_path)


def test_the_llama3_split_parted_by_budget_is_held_out_named_by_the_alias_and_not_benchmark_fitted(
    tmp_path,
):
    """Llama 3's isoFLOP split (bench/llama3_splits.py: no POOL_MODELS, so no Case above),
    scored once: what a Case checks, where it applies to a split parted by budget. Dev for the
    planner (--pilot spread scored on it by its rule, a failure) and the law choice (sizes scored
    on it by its rule, said nothing), held out for the band; named by the alias in every score; no
    benchmark fitter; a budget neither pool nor target refused; a missing file one error."""
    assert not hasattr(llama3_splits, "POOL_MODELS")
    names = set(llama3_splits.SPLITS)
    assert names == {"llama3", "llama3_auto"}
    for score in ("replay", "coverage", "point_query"):
        assert set(aliases(score)[llama3_splits.ALIAS]) == names
    for name in names:
        assert name in SPLITS and name not in DEV and name not in BAND_DEV
        assert "--pilot spread by its rule" in PLANNER_DEV[name]
        assert "sizes was scored on it" in LAW_CHOICE_DEV[name]
        assert SPLITS[name].no_benchmark_fit.startswith("not a ScaleBench split")
    # the marks a loaded split carries (loading the _auto twin would choose its law: not here)
    llama3_synthetic(tmp_path / "source")
    split = load_split("llama3", source=tmp_path / "source")
    assert (split.mark, split.band_mark, split.law_choice_mark) == ("dev", "held-out", "dev")
    # the point query asks the split once: not its _auto twin, which repeats its points
    assert point_query.names_of(llama3_splits.ALIAS, ()) == ["llama3"]
    with pytest.raises(ValueError, match="neither pool nor target: 1e23$"):
        llama3_splits.in_pool(["1e21", "1e23"])
    with pytest.raises(SplitError, match="runs.csv: no such file"):
        load_split("llama3", tmp_path)


def test_the_point_query_refuses_an_unknown_split(capsys):
    assert point_query.main(["--splits", "olmo_ladder_nope"]) == 2
    assert capsys.readouterr().err.startswith("error: --splits")


def test_every_scored_public_sweep_and_scalebench_split_is_dev_for_the_law_choice():
    """LAW_CHOICE_DEV names real splits, each with its reason; Porian's and Brandfonbrener's
    (not parted by model, so no Case above) carry monotone's dev figures; ScaleBench's own
    splits were used to design monotone too (docs/laws.md, its dev figures). A sweep not yet
    scored by the candidates' adoption rules (a Case whose law_choice_dev is None) is held out."""
    from bench import l2l_splits, porian_splits

    assert set(LAW_CHOICE_DEV) <= set(SPLITS)
    for name in (*porian_splits.SPLITS, *l2l_splits.SPLITS):
        assert "monotone's dev figures" in LAW_CHOICE_DEV[name]
    held_out = {c.module for c in CASES.values() if c.law_choice_dev is None}
    for module in RUN_SPLITS:
        if module in held_out:
            assert not set(module.SPLITS) & set(LAW_CHOICE_DEV), module.__name__
        else:
            assert set(module.SPLITS) <= set(LAW_CHOICE_DEV), module.__name__
    assert "to design the candidate law choice monotone" in LAW_CHOICE_DEV["moe"]
    assert load_split("moe").law_choice_mark == "dev"
    assert load_split("farseer").law_choice_mark == "dev"  # DEV: the planner's settings


def _held_out_table() -> dict[str, tuple[str, str, str]]:
    """docs/held_out.md's table of public sweeps: data folder -> its planner, band and law-choice
    marks as written ("dev" or "held out": the cell's first words, bold and notes dropped)."""
    text = (REPO / "docs" / "held_out.md").read_text()
    section = text[text.index("## 2. The public sweeps") : text.index("## 3. ")]
    rows = [x for x in section.splitlines() if x.startswith("| ") and not x.startswith("| source")]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        marks = tuple(
            "dev" if c.replace("*", "").startswith("dev") else "held out" for c in cells[5:8]
        )
        table.setdefault(cells[1].split()[0], marks)
    return table


def test_the_held_out_ledger_table_gives_every_sweep_the_marks_the_code_declares():
    """One owner for the marks: scalebench_splits' PLANNER_DEV, BAND_DEV and LAW_CHOICE_DEV.
    docs/held_out.md's table must say the same for each sweep of RUN_SPLITS (its splits, their
    `_auto` twins and Brandfonbrener's `_c80` variants aside, all dev or all held out)."""
    table = _held_out_table()
    for module in RUN_SPLITS:
        if module.DATA is not None:
            folder = module.DATA.name
        else:
            found = re.search(r"bench/data/(\w+)/", module.FETCH)
            folder = found.group(1) if found else "brandfonbrener2024"  # l2l: a checkout
        base = [n for n in module.SPLITS if not n.endswith("_auto") and "_c80" not in n]
        expected = []
        for dev in (PLANNER_DEV, BAND_DEV, LAW_CHOICE_DEV):
            marks = {n in dev or n in DEV for n in base}
            assert len(marks) == 1, (module.ALIAS, dev is PLANNER_DEV)
            expected.append("dev" if marks.pop() else "held out")
        assert table[folder] == tuple(expected), module.ALIAS


def _candidate_entries() -> dict[str, str]:
    """docs/held_out.md section 1's `- **Candidate `X`**` entries: X -> the entry's text."""
    text = (REPO / "docs" / "held_out.md").read_text()
    section = text[: text.index("## 2. The public sweeps")]
    entries = re.split(r"\n(?=- \*\*)", section)
    found = [re.match(r"- \*\*Candidate `([^`]+)`\*\*", e) for e in entries]
    return {m.group(1): " ".join(e.split()) for m, e in zip(found, entries) if m}


def test_the_ledger_names_the_live_candidates_the_code_declares():
    """One owner for which candidates a new sweep still scores: law_choice.CANDIDATES and
    design.CANDIDATE_PILOTS (bench/heldout.sh HELDOUT_SCORE runs them). docs/held_out.md's entry
    of each other law choice says it was dropped, and no live candidate's says so."""
    from analysis.estimates.design import CANDIDATE_PILOTS
    from analysis.estimates.law_choice import CANDIDATES, LAW_CHOICES

    entries = _candidate_entries()
    for rule in LAW_CHOICES[1:]:
        dropped = "**Status: dropped as a candidate**" in entries[rule]
        assert dropped == (rule not in CANDIDATES), rule
    for pilot in CANDIDATE_PILOTS:
        status = entries[f"--pilot {pilot}"].split("**Status: ")[1]
        assert status.startswith("not returned, a candidate"), pilot
