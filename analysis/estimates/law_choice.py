"""`--law auto`: the law chosen by how it extrapolates in compute.

Every law is rolled out (`analysis.estimates.rollouts`: expanding-window compute cuts per variant,
each holding out at least 5 runs or the top 20 % of them, the law fitted below the cut and scored
at the held-out runs' own inputs), and the law with the smallest root-mean-square log error over
every held-out run of every cut and variant wins: scaling-law work picks a form by how it
extrapolates, not by how it interpolates (OLMo-core's `ScalingLawRollout`; Li et al. 2026, "Spend
Less, Fit Better", arXiv 2604.22753, score laws on the held-out high-compute runs). A law whose
fit on all runs is absurd inside the measured range (`analysis.estimates.in_range`) is refused,
however well it rolled out. Every law is fitted as the fit table fits
(`analysis.estimates.estimate.fit_variants`), on its own points (`points_for`), without a
bootstrap. Every law is scored on the same cuts: those below which each law has the points it
needs (a law of many parameters can drop the lower cuts of a small sweep for all; one that cannot
be fitted below any cut is not rolled out). With too few runs for one cut, no law is ranked and
the caller's default stands.

`rule` (LAW_CHOICES): "rollouts", the default, as above; "monotone", declared a candidate in
docs/laws.md, dropped as one after three unseen sweeps (one pass; docs/held_out.md) and kept as
an option that reproduces its figures: a law of scale alone (every input among params, tokens and
compute) is also refused where its fit on all runs predicts a loss that rises with one of its
inputs at a measured point, the input raised by RISE_STEP with the others held. Such a law is
meant to fall in each (Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models",
arXiv 2203.15556; Kaplan et al. 2020, arXiv 2001.08361); one that rises with params inside the
sweep predicts a larger model worse at the same tokens, and past the sweep more so (Farseer on
OPT's and Gadre et al.'s pools, docs/laws.md, "Why --law auto chose Farseer on OPT's and Gadre's
pools"). A law with other inputs (a learning rate, a batch size, unique tokens) is not checked:
with those held, a larger model or more tokens can rightly cost loss (a learning rate too high
for the larger model). "sizes", a candidate declared in docs/laws.md and not the default: the
laws are ranked the same way, with the same refusals as the default's, but over the size
rollouts (`rollouts.size_plan`, `rollouts.size_rollout`: the cuts rule on the configurations'
params, the same MIN_HELD, TOP_FRAC, MIN_FIT and N_CUTS, the law fitted on every point of the
sizes at or below a params cut and scored at the final point of every run of the sizes above
it) instead of the compute ones: the question a user asks is a larger model, and on a pool of
public runs (each run its own configuration) or an isoFLOP design the compute cuts hold out the
longer runs of sizes already fitted below them, so they rank laws by how they extrapolate in
tokens at seen sizes (docs/laws.md, "Why --law auto chose Farseer"). Every law is scored on the
same params cuts (those below which each has the points it needs). Where no size rollout can
be made (a variant without params, or too few sizes: no params cut holds out enough runs and
fits MIN_FIT sizes below it) or no law rolled out by size is kept, the default rule chooses, and
the selection lines say so (`sel["fallback"]`).

The verdicts (refused or kept) that decide the choice, the winner's and those of the refused
laws that rolled out better than it, are checked again with every loss moved by NUDGE = 1e-9 of
itself times a normal draw, in NUDGES patterns: where one changes, the choice rests on the last
digits of the losses and on the machine's floating point, and the selection lines say so
(`sel["unstable"]`). The choice itself is not changed. Found on public pools where the choice
flipped between machines, the Marin ladder's nemotron mix, Alabdulmohsin et al.'s pool and GPT-3's
(docs/laws.md, "A law choice that rests on the last digits"): Farseer's nine parameters, fitted
to them, stop short of an optimum at the solver's evaluation limit, and with ten times the limit
they converge to optima that nearly tie, so a converged fit is checked too.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from analysis.estimates import rollouts
from analysis.estimates.estimate import fit_variants, inputs_of, points_for, why_unusable
from analysis.estimates.in_range import absurd
from analysis.fits.laws import Law
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import Run

LAW_CHOICES = ("rollouts", "monotone", "sizes")  # `rule` (module docstring); the first the default
# the rules still judged, by their declared adoption rules, on each new unseen sweep
# (docs/held_out.md; HELDOUT_SCORE=ALIAS bench/heldout.sh runs them): monotone was dropped after
# its third deciding sweep
CANDIDATES = ("sizes",)
RISE_STEP = 0.01  # the relative step an input is raised by to see the loss fall (module docstring)
FALLING_IN = ("params", "tokens", "compute")  # a law in these alone must fall in each
NUDGE = 1e-9  # the relative move of every loss a deciding verdict is checked under (docstring)
NUDGES = 8  # the patterns of moves tried (docs/laws.md: four missed a pool read from a CSV)


def rising(fit, points: list[Run]) -> str:
    """Where `fit`, of a law of scale alone (its inputs among FALLING_IN), predicts a loss that
    rises with one of its inputs at one of these measured points (that input raised by RISE_STEP,
    the others held), or "" (also for a law with other inputs: module docstring)."""
    if not set(fit.law.inputs) <= set(FALLING_IN):
        return ""
    X = {k: v for k, v in inputs_of(points).items() if k in fit.law.inputs}
    with np.errstate(all="ignore"):
        base = np.asarray(fit.predict(X), float)
        for k in [k for k in FALLING_IN if k in X]:
            up = np.asarray(fit.predict({**X, k: X[k] * (1 + RISE_STEP)}), float)
            bad = np.flatnonzero(up > base)
            if len(bad):
                i = int(bad[0])
                at = ", ".join(f"{j} {X[j][i]:.3g}" for j in X)
                return (
                    f"its loss rises with {k} at {len(bad)} of the {len(base)} measured points "
                    f"(first at {at}: {base[i]:.4g} -> {up[i]:.4g} at {k} x{1 + RISE_STEP:g})"
                )
    return ""


def _verdict(law: Law, runs: list[Run], c_law_runs: list[Run], settings: FitSettings, rule: str):
    """(why `law` fitted on every run is refused, or ""; whether every such fit converged)."""
    pts = points_for(law, runs, c_law_runs)
    converged = True
    for label in sorted({r.label for r in pts}):
        mine = [r for r in pts if r.label == label]
        res = fit_variants(mine, label, settings.but(n_bootstrap=0), law)
        if label not in res.fits:
            return f"not fitted to all of {label}'s runs ({res.skipped.get(label, '')})", True
        converged = converged and bool(res.fits[label].converged)
        why = absurd(res.fits[label], mine)
        if not why and rule == "monotone":
            why = rising(res.fits[label], mine)
        if why:
            return f"fitted to all of {label}'s runs, {why}", converged
    return "", converged


def nudged(runs: list[Run], pattern: int) -> list[Run]:
    """The runs with every loss moved by NUDGE of itself times a standard normal draw that
    `pattern` and the point pick (a point moves alike wherever it is listed)."""
    out = []
    for r in runs:
        z = np.random.default_rng([pattern, zlib.crc32(f"{r.source}:{r.point}".encode())])
        out.append(replace(r, val_loss=r.val_loss * (1 + NUDGE * z.standard_normal())))
    return out


def _instability(law, runs, c_law_runs, settings, rule, why: str, converged: bool) -> str:
    """Why `law`'s verdict (refused: `why`; kept: "") is unstable: it changes with the losses
    nudged (module docstring); else ""."""
    for k in range(NUDGES):
        other, _ = _verdict(law, nudged(runs, k), nudged(c_law_runs, k), settings, rule)
        if bool(other) != bool(why):
            cause = (
                "stops at the solver's evaluation limit, short of an optimum"
                if not converged
                else "lands on one of optima that nearly tie"
            )
            return (
                f"{'refused' if why else 'kept'} here, {'kept' if why else 'refused'} with every "
                f"loss moved by {NUDGE:g} of itself (its fit on all runs {cause}): the choice can "
                "differ on another machine"
            )
    return ""


def _rank(sel, law, runs, c_law_runs, settings, shared, rule="rollouts") -> bool:
    """Roll `law` out on the shared cuts (by params where `sel["by"]` says so); rank it, or say
    why it is skipped or refused. Whether its fit on all runs converged (True where skipped)."""
    roll = rollouts.size_rollout if sel["by"] == "params" else rollouts.rollout
    ro = roll(law, runs, c_law_runs, settings, shared)
    sel["rollouts"][law.name] = ro
    if ro.failed:
        sel["skipped"][law.name] = "; ".join(f"{w}: {y}" for w, y in ro.failed.items())
        return True
    refused, converged = _verdict(law, runs, c_law_runs, settings, rule)
    if refused:
        sel["refused"][law.name] = refused
    else:
        sel["ranking"].append(
            {"law": law.name, "rms_log_pct": 100 * ro.rms, "n": len(ro.residuals)}
        )
    return converged


def _check_decisive(sel, laws, converged, runs, c_law_runs, settings, rule) -> None:
    """The stability check (module docstring) on the verdicts that decide the choice: the
    winner's (refused, another law wins) and each refused law's that rolled out better than the
    winner (kept, it would win); with no winner, every refused law's. `converged`: per law name,
    whether its fit on all runs converged (`_rank`)."""
    by_name = {law.name: law for law in laws}
    best = sel["ranking"][0]["rms_log_pct"] if sel["ranking"] else float("inf")
    decisive = [r["law"] for r in sel["ranking"][:1]] + [
        name for name in sel["refused"] if 100 * sel["rollouts"][name].rms < best
    ]
    for name in decisive:
        why = sel["refused"].get(name, "")
        unstable = _instability(
            by_name[name], runs, c_law_runs, settings, rule, why, converged[name]
        )
        if unstable:
            sel["unstable"][name] = unstable


def select_law(
    laws: list[Law],
    runs: list[Run],
    c_law_runs: list[Run],
    settings: FitSettings = FitSettings(),
    rule: str = "rollouts",
    nudge: bool = True,
) -> dict:
    """Roll out each law (module docstring): {"ranking": [{"law", "rms_log_pct", "n"}, ...] best
    first, "skipped": {law: why not rolled out}, "refused": {law: why absurd}, "unstable": {law:
    why its verdict rests on the losses' last digits}, "cuts": [rollouts.Cut], "rollouts": {law:
    rollouts.Rollout}, "n_runs", "by": "compute" or "params" (the cuts')}; "why" when nothing
    could be ranked; "fallback" (why) where rule "sizes" fell back to the default rule. Every
    variant is rolled out alone. `rule`: LAW_CHOICES (module docstring). `nudge`: whether the
    verdicts that decide the choice are checked for stability (module docstring; it never changes
    the choice, so a caller that reads no lines can skip its fits)."""
    if rule not in LAW_CHOICES:
        raise ValueError(f"law choice {rule!r}: not among {', '.join(LAW_CHOICES)}")
    if rule != "sizes":
        return _select(laws, runs, c_law_runs, settings, rule, False, nudge)
    sel = _select(laws, runs, c_law_runs, settings, "rollouts", True, nudge)
    if sel["ranking"]:
        return sel
    out = _select(laws, runs, c_law_runs, settings, "rollouts", False, nudge)
    out["fallback"] = (
        "no params cut holds out enough runs and fits enough sizes below it"
        if sel.get("why") == "too few runs"
        else "no law could be rolled out by size and kept"
    )
    return out


def _select(laws, runs, c_law_runs, settings, rule, by_params: bool, nudge: bool = True) -> dict:
    """`select_law` by compute cuts (`rollouts.plan`) or by params cuts (`rollouts.size_plan`)."""
    planned = rollouts.size_plan(runs) if by_params else rollouts.plan(runs)
    n_runs = len({r.run_id for r in runs})
    sel: dict = {
        "ranking": [],
        "skipped": {},
        "refused": {},
        "unstable": {},
        "cuts": planned,
        "rollouts": {},
    }
    sel["n_runs"], sel["by"] = n_runs, "params" if by_params else "compute"
    if not planned:
        sel["why"] = "too few runs"
        return sel
    usable = {}
    for law in laws:
        why = why_unusable(law, runs)
        fit_at = [] if why else rollouts.fittable(law, runs, c_law_runs, planned, by_params)
        if not why and not fit_at:
            why = f"{law.needs} points needed below a cut; the highest cut leaves fewer"
        if why:
            sel["skipped"][law.name] = why
        else:
            usable[law] = fit_at
    # every law is scored on the same cuts: those the most demanding law can be fitted below
    shared = [c for c in planned if all(c in at for at in usable.values())]
    sel["cuts"] = shared
    converged = {
        law.name: _rank(sel, law, runs, c_law_runs, settings, shared, rule) for law in usable
    }
    sel["ranking"].sort(key=lambda r: r["rms_log_pct"])
    if nudge:
        _check_decisive(sel, list(usable), converged, runs, c_law_runs, settings, rule)
    if not sel["ranking"]:
        sel["why"] = "no law could be rolled out and kept"
    return sel


def _cut_lines(cuts: list[rollouts.Cut], by: str = "compute") -> list[str]:
    unit, what = ("params", "params") if by == "params" else ("PF-days", "compute")
    return [
        f"  cut {c.label} at {c.cut:.3g} {unit}: {c.n_fitted} runs fitted, {c.n_held} held "
        f"out, reaching {c.reach:.2g}x past the {what} fitted"
        for c in cuts
    ]


def selection_lines(sel: dict, default: str) -> list[str]:
    """What --law auto prints: which law won, by how much, each cut (runs fitted and held out,
    how far it reached), the laws refused and why; or the one line that says why `default`.
    Where rule "sizes" fell back to the default rule (`sel["fallback"]`), a first line says so."""
    first = []
    if sel.get("fallback"):
        first = [
            f"--law auto (--law-choice sizes): {sel['fallback']} (a size rollout's cut holds out "
            f">= {rollouts.MIN_HELD} of a variant's runs, or its top {rollouts.TOP_FRAC:.0%}, of "
            f"the sizes above it and fits >= {rollouts.MIN_FIT} sizes below it); the default "
            f"rule, the compute rollouts, chooses"
        ]
    if sel.get("why") == "too few runs" and sel.get("by", "compute") == "compute":
        return first + [
            f"--law auto: {sel['n_runs']} runs, fewer than needed for a compute rollout (a cut "
            f"holds out >= {rollouts.MIN_HELD} of a variant's runs, or its top "
            f"{rollouts.TOP_FRAC:.0%}, above it and fits >= {rollouts.MIN_FIT} sizes below "
            f"it); using {default}"
        ]
    kind = "size" if sel.get("by") == "params" else "compute"
    if not sel["ranking"]:
        lines = [f"--law auto: no law could be rolled out and kept; using {default}"]
        if default in sel["refused"]:
            # the fallback is no better for having been refused: say so where it is named
            lines[0] += (
                ", though it is refused below too: no law describes these runs, so read its "
                "predictions past them as unsupported"
            )
    else:
        best = sel["ranking"][0]
        lines = [
            f"--law auto: {best['law']} wins the {kind} rollouts ({len(sel['cuts'])} cut(s)): "
            f"RMS error {best['rms_log_pct']:.2f} % of the loss over {best['n']} held-out runs"
        ]
        if len(sel["ranking"]) > 1:
            nxt = sel["ranking"][1]
            lines[0] += (
                f", {nxt['rms_log_pct'] / max(best['rms_log_pct'], 1e-12):.2g}x smaller "
                f"than the runner-up {nxt['law']} ({nxt['rms_log_pct']:.2f} %)"
            )
    lines += _cut_lines(sel["cuts"], sel.get("by", "compute"))
    for r in sel["ranking"][2:]:
        lines.append(f"  also rolled out: {r['law']} {r['rms_log_pct']:.2f} %")
    for name, why in sel["refused"].items():
        lines.append(f"  refused: {name}: {why}")
    for name, why in sel["skipped"].items():
        lines.append(f"  not rolled out: {name}: {why}")
    for name, why in sel.get("unstable", {}).items():
        lines.append(f"  unstable: {name}: {why}; compare the laws by --law NAME")
    return first + lines
