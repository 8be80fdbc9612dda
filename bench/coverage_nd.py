"""Coverage when loss depends on N and D separately: `python -m bench.coverage_nd`

`bench.coverage` draws sweeps from laws written in compute, so every point of a variant lies on
one curve. Real sweeps do not: with several budgets per run a larger size's early cooldown point
can sit above a smaller size's final one, because loss depends on the parameters N and the tokens
D separately. Here the truth is Chinchilla's L(N, D) = E + A/N^a + B/D^b (Hoffmann et al. 2022,
Approach 3 fit, and Besiroglu et al. 2024's refit, `TRUTHS`), the variant is the baseline with N and
D both scaled by sqrt(M) (L_v(N, D) = L(sqrt(M)·N, sqrt(M)·D)), so at every compute and along every
tokens-per-parameter ray it reaches the baseline's loss with M times less compute: the C-law
multiplier, the compute-optimal L(N, D) multiplier and the multiplier of the final points all
equal M. Seed noise is Student-t with 3 degrees of freedom (heavy tails), scaled to the measured
run noise (`analysis.inputs.synthetic.simulate_runs`).

Estimators, each analysed as `python -m analysis.fit` would (seed bootstrap, expanded percentile
level, default C_ref of the primary fit):
- `claw`:    L = A·C^-alpha on every point of every run (the primary today);
- `final`:   the same law on each run's final point only (one tokens-per-parameter ray);
- `chin`:    the compute-optimal multiplier of L(N, D) (`--chinchilla-bootstrap`), same C_ref.

    python -m bench.coverage_nd --reps 100 --bootstrap 400       # demo-like and GPU-like designs

Past the data (`--factors 3 10 30`): the same sweeps (`--truths kaplan`: from Kaplan et al.
2020's L(N, D), which neither law below contains), each fitted with a law of the registry
(`--laws`: today's C power law on the final points, Chinchilla's L(N, D) on every point), then
asked at f times the largest compute of the data for (1) the baseline's loss on the design's
final tokens-per-parameter ray, against the true (noise-free) L(N, D) there, with the interval
`analysis.predict` gives, and (2) the multiplier, against M, with the interval of
`analysis.fit --at-compute`. Neither law is the truth's form with these parameters; the power law
in C is not even its family. The rule built on this table
(`analysis.estimates.law_fits.COVERED_UP_TO`): an interval is given up to the largest factor at
which every measured coverage of that law held >= 90 %, and withheld past it.

    python -m bench.coverage_nd --factors 1 3 10 30 --designs nd-gpu --truths kaplan \\
        --reps 100 --bootstrap 200

Quantity `pi`: the prediction interval of `analysis.predict` (pi_lo/pi_hi), the split-conformal
band of `analysis.estimates.conformal` calibrated on the sweep's own rollouts
(`analysis.estimates.rollouts`), scored against a new run's loss at the query (the truth with a
run's seed noise); a sweep with too few residuals counts as a miss. `pi_c` (laws in (params,
tokens)): the same band at a `compute` query, as `analysis.predict` answers it (the law's
compute-optimal loss), against a new run at the truth's compute-optimal (N, D); `pi_run`: the
band asked at the law's own compute-optimal (N̂, D̂) there, the run a user would launch, against
a new run at that (N̂, D̂). `mult_pi`: the
multiplier's prediction interval of `analysis.fit --at-compute` (the rollouts' paired gap band),
against the true multiplier; `mult_pi_bonf`: two loss bands at the Bonferroni level instead, for
comparison (`bench.coverage_pi`). The `withheld` column: the sweeps that gave no interval (they
count as misses); `if given`: the coverage among the rest. Design `nd-gpu6` has the rollouts the
paired gap band needs (nd-gpu's 6 pairs are too few):

    python -m bench.coverage_nd --factors 1 3 10 30 --designs nd-gpu6 --truths kaplan besiroglu \
        --reps 40 --bootstrap 100

`--band-rule log|drift` (with `--factors`): the loss band (`pi`, `pi_c`, `pi_run`) calibrated by
another rule of docs/laws.md than the default `sizes`; the multiplier's bands keep `log`.

`--quick`: 2 sweeps, 10 resamples, a smoke test.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings

import numpy as np

from analysis.estimates import law_fits
from analysis.estimates.band_intervals import joint_level
from analysis.estimates.conformal import (
    DEFAULT_RULE,
    RULES,
    band_calibrate,
    calibrate,
    gap_band,
    residuals_of,
    sweep_rollout,
)
from analysis.estimates.estimate import default_c_ref, fit_variants, points_for
from analysis.estimates.extra_fits import fit_chinchilla_replicates
from analysis.estimates.multiplier import boot_multipliers, multiplier_at, ratio
from analysis.fits import law_registry
from analysis.fits.bootstrap import percentile_ci
from analysis.fits.replicates import arrange, seed_bootstrap
from analysis.fits.settings import FitSettings
from analysis.inputs.collect import FLOPS_PER_PFLOPS_DAY, final_points
from analysis.inputs.synthetic import chinchilla_law, simulate_runs
from bench.coverage_pi import (
    Tally,
    new_run,
    optimal_loss,
    score_mult_pi,
    score_pi,
    score_pi_c,
    score_pi_run,
)

# E, A, a, B, b. Hoffmann et al. 2022's Approach 3 fit, and Besiroglu et al. 2024's refit of the
# same data, whose steeper, larger data term puts a larger size's early cooldown point above a
# smaller size's final one at the demo's 3 tokens per parameter, as the demo's own points do
TRUTHS = {
    "hoffmann": (1.69, 406.4, 0.34, 410.7, 0.28),
    "besiroglu": (1.8172, 482.01, 0.3478, 2085.43, 0.3658),
}
M_TRUE = 1.25
# name → (non-embedding N per size, seeds, budgets, tokens per parameter at budget 1)
DESIGNS = {
    # the CPU demo (sweeps/demo.yaml): tiny-1..3, 4 seeds, cooldowns at 1/4, 1/2, 1, 3 tokens/param
    "nd-demo": ((25.5e3, 56.6e3, 150e3), (0, 1, 2, 3), (0.25, 0.5, 1.0), 3.0),
    # GPU-like: five sizes 10M..200M non-embedding, 3 seeds, 4 budgets around 20 tokens/param
    "nd-gpu": ((10e6, 21e6, 45e6, 95e6, 200e6), (0, 1, 2), (0.25, 0.5, 1.0, 2.0), 20.0),
    # the same with a sixth size, 420M: two rollout cuts per variant, 30 residuals pooled, enough
    # for the 95 % bands a multiplier's prediction interval pairs (nd-gpu's 12 are not: 19 needed)
    "nd-gpu6": (
        (10e6, 21e6, 45e6, 95e6, 200e6, 420e6),
        (0, 1, 2),
        (0.25, 0.5, 1.0, 2.0),
        20.0,
    ),
}
ESTIMATORS = ("claw", "final", "chin")


def design_compute(N, tpp):
    """Budget-1 compute per size (PFLOP/s-days) for `simulate_runs`, which recovers N from it."""
    return [6.0 * tpp * n * n / FLOPS_PER_PFLOPS_DAY for n in N]


# Kaplan et al. 2020 (arXiv 2001.08361, eq. 1.5 and table 2): L = ((N_c/N)^(a_N/a_D) + D_c/D)^a_D,
# a family neither the C power law nor Chinchilla's sum of powers contains (no irreducible term,
# N and D coupled), for measuring intervals under a law no fit assumes (`--factors`)
KAPLAN = (0.076, 0.095, 8.8e13, 5.4e13)  # a_N, a_D, N_c, D_c


def kaplan_law(a_n, a_d, n_c, d_c):
    return lambda N, D: np.power(
        np.power(n_c / np.asarray(N, float), a_n / a_d) + d_c / np.asarray(D, float), a_d
    )


def laws(truth: str = "besiroglu", M: float = M_TRUE) -> dict:
    base = kaplan_law(*KAPLAN) if truth == "kaplan" else chinchilla_law(*TRUTHS[truth])
    s = math.sqrt(M)
    return {"baseline": base, "variant": lambda N, D: base(s * np.asarray(N), s * np.asarray(D))}


def _chin_interval(runs, c_ref, n_boot, seed, ci=0.95):
    """(multiplier, lo, hi) of the compute-optimal L(N, D) multiplier, as
    analysis.estimates.extra_fits."""
    reps = arrange(runs)
    boot, _ = seed_bootstrap(reps, sorted(reps), n_boot, seed, "baseline")
    fits = {
        label: fit_chinchilla_replicates(label, rep, boot[label], ci, huber_delta=None)
        for label, rep in reps.items()
    }
    b, v = fits["baseline"], fits["variant"]
    m = float(ratio(b, v, c_ref))
    lo, hi = percentile_ci(boot_multipliers(b, v, c_ref), v.level)
    return m, lo, hi


def _replicates(design, reps, true_laws, rng, noise, sigma_run, rho, sigma_point):
    """Each replicate's simulated sweep of `design` and the seed of its bootstrap, both drawn
    from `rng` in this order, so a caller's own draws never shift the replicates."""
    N, seeds, budgets, tpp = DESIGNS[design]
    compute = design_compute(N, tpp)
    for _ in range(reps):
        runs = simulate_runs(
            true_laws,
            compute,
            seeds,
            budgets,
            sigma_run,
            rho,
            sigma_point,
            rng,
            tokens_per_param=tpp,
            of_nd=True,
            noise=noise,
        )
        yield runs, int(rng.integers(1 << 30))


def _binomial_se(hits: int, reps: int) -> float:
    """Standard error of a coverage of hits / reps (floored so a 0 or 1 coverage is not 0)."""
    return math.sqrt(max(hits / reps * (1 - hits / reps), 1e-12) / reps)


def run_design(
    design: str,
    reps: int,
    n_boot: int,
    seed: int = 0,
    estimators=ESTIMATORS,
    noise: str = "t3",
    truth: str = "besiroglu",
    sigma_run: float = 0.012,
    rho: float = 0.3,
    sigma_point: float = 0.003,
) -> dict:
    true_laws = laws(truth)
    rng = np.random.default_rng([seed, sum(map(ord, design)), len(noise), len(truth)])
    hits = {e: 0 for e in estimators}
    width = {e: [] for e in estimators}
    bias = {e: [] for e in estimators}
    r2 = []
    for runs, bseed in _replicates(
        design, reps, true_laws, rng, noise, sigma_run, rho, sigma_point
    ):
        settings = FitSettings(n_bootstrap=n_boot, seed=bseed)
        res = fit_variants(runs, "baseline", settings)
        c_ref, _ = default_c_ref(res.fits, "baseline")
        r2.append(res.fits["baseline"].r2)
        for e in estimators:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if e == "claw":
                    m = multiplier_at(res.fits["baseline"], res.fits["variant"], c_ref)
                    est, (lo, hi) = m["multiplier"], m["ci"]
                elif e == "final":
                    rf = fit_variants(final_points(runs), "baseline", settings)
                    c_f, _ = default_c_ref(rf.fits, "baseline")
                    m = multiplier_at(rf.fits["baseline"], rf.fits["variant"], c_f)
                    est, (lo, hi) = m["multiplier"], m["ci"]
                else:
                    est, lo, hi = _chin_interval(runs, c_ref, n_boot, bseed)
            hits[e] += bool(lo <= M_TRUE <= hi)
            width[e].append(math.log(hi / lo) if lo > 0 and math.isfinite(hi) else math.inf)
            bias[e].append(math.log(est / M_TRUE) if est > 0 else math.nan)
    return {
        "design": design,
        "truth": truth,
        "reps": reps,
        "noise": noise,
        "r2_baseline": float(np.median(r2)),
        "coverage": {e: hits[e] / reps for e in estimators},
        "se": {e: _binomial_se(hits[e], reps) for e in estimators},
        "median_log_width": {e: float(np.median(width[e])) for e in estimators},
        "median_log_bias": {e: float(np.nanmedian(bias[e])) for e in estimators},
    }


def quantities(law) -> tuple[str, ...]:
    """What `run_extrapolation` measures of a law: `pi_c` and `pi_run` only for a law in
    (params, tokens), whose compute query is its compute-optimal loss (a C law's is `pi`)."""
    nd = ("pi_c", "pi_run") if "compute" not in law.inputs else ()
    return ("loss", "multiplier", "pi", *nd, "mult_pi", "mult_pi_bonf")


def run_extrapolation(
    design: str,
    reps: int,
    n_boot: int,
    factors,
    laws_=("power", "chinchilla"),
    seed: int = 0,
    truth: str = "besiroglu",
    noise: str = "t3",
    sigma_run: float = 0.012,
    rho: float = 0.3,
    sigma_point: float = 0.003,
    band_rule: str = DEFAULT_RULE,
) -> dict:
    """Coverage of the loss and multiplier intervals at f x the largest compute (module doc);
    `band_rule`: the loss band's (`conformal.RULES`)."""
    true_laws = laws(truth)
    rng = np.random.default_rng([seed, sum(map(ord, design)), len(noise), len(truth), 0xE7])
    keys = [
        (name, f, q) for name in laws_ for f in factors for q in quantities(law_registry.get(name))
    ]
    tally = Tally(keys)
    noise_args = (sigma_run, sigma_point, noise)
    for runs, bseed in _replicates(
        design, reps, true_laws, rng, noise, sigma_run, rho, sigma_point
    ):
        for name in laws_:
            _score_law(
                tally, name, runs, bseed, n_boot, design, factors, true_laws, noise_args, band_rule
            )
    return {
        "design": design,
        "truth": truth,
        "reps": reps,
        "rows": [
            {
                "law": k[0],
                "factor": k[1],
                "quantity": k[2],
                "coverage": tally.hits[k] / reps,
                "se": _binomial_se(tally.hits[k], reps),
                "median_log_width": float(np.median(tally.width[k])),
                "withheld": tally.withheld[k] / reps,
                # among the sweeps that gave an interval
                "coverage_given": tally.hits[k] / max(reps - tally.withheld[k], 1),
            }
            for k in keys
        ],
    }


def _score_law(
    tally, name, runs, bseed, n_boot, design, factors, true_laws, noise_args, band_rule=DEFAULT_RULE
):
    """One sweep's intervals under law `name` at each factor, into `tally`; `band_rule`: the
    loss band's (`conformal.RULES`: pi, pi_c, pi_run; the multiplier's bands keep "log")."""
    _, _, budgets, tpp = DESIGNS[design]
    ray = tpp * max(budgets)  # tokens per parameter of each run's final point
    c_max = max(r.compute for r in runs)
    law = law_registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_variants(
            points_for(law, runs, final_points(runs)),
            "baseline",
            FitSettings(n_bootstrap=n_boot, seed=bseed),
            law,
        )
        ro = sweep_rollout(law, runs, final_points(runs))
    base, var = res.fits["baseline"], res.fits["variant"]
    residuals = residuals_of(ro)
    band, _ = band_calibrate(ro, law, runs, final_points(runs), rule=band_rule)
    bands = {
        "mult_pi": gap_band(ro, runs, "baseline")[0],
        "mult_pi_bonf": calibrate(*residuals, joint_level())[0],
    }
    new = np.random.default_rng(bseed)  # a new run's noise at each query (as before pi_c)
    new_c = np.random.default_rng([bseed, 1])  # and at the compute-optimal ones, apart
    new_r = np.random.default_rng([bseed, 2])  # and at the law's recommended runs (pi_run)
    for f in factors:
        c = f * c_max
        n_f = math.sqrt(c * FLOPS_PER_PFLOPS_DAY / (6.0 * ray))
        X = {"compute": np.array([c]), "params": np.array([n_f]), "tokens": np.array([ray * n_f])}
        true_loss = float(true_laws["baseline"](n_f, ray * n_f))
        tally.score((name, f, "loss"), *(float(v[0]) for v in base.interval(X)), true_loss)
        score_pi(tally, (name, f, "pi"), band, base, X, new_run(true_loss, new, *noise_args))
        if (name, f, "pi_c") in tally.hits:
            best = new_run(optimal_loss(true_laws["baseline"], c), new_c, *noise_args)
            score_pi_c(tally, (name, f, "pi_c"), band, base, c, best)
            truth = true_laws["baseline"]
            score_pi_run(tally, (name, f, "pi_run"), band, base, c, truth, new_r, noise_args)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            m = law_fits.multiplier(base, var, c)
            tally.score((name, f, "multiplier"), *m["ci"], M_TRUE)
            for q, b in bands.items():
                score_mult_pi(tally, (name, f, q), b, base, var, c, m["multiplier"], M_TRUE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=100)
    p.add_argument("--bootstrap", type=int, default=400)
    p.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    p.add_argument("--estimators", nargs="+", default=list(ESTIMATORS), choices=ESTIMATORS)
    p.add_argument("--noise", default="t3", choices=["normal", "t3"])
    p.add_argument(
        "--truths",
        nargs="+",
        default=list(TRUTHS),
        choices=[*TRUTHS, "kaplan"],
        help="kaplan: Kaplan et al. 2020's L(N, D), a family no law here assumes",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--factors",
        nargs="+",
        type=float,
        default=None,
        metavar="F",
        help="measure the intervals at F x the largest compute instead (module doc)",
    )
    p.add_argument(
        "--laws",
        nargs="+",
        default=["power", "chinchilla"],
        help="laws of the registry for --factors (default: %(default)s)",
    )
    p.add_argument(
        "--band-rule",
        default=DEFAULT_RULE,
        choices=RULES,
        help="with --factors: the loss band's rule (pi, pi_c, pi_run; default %(default)s, "
        "andrea's; drift, sizes: the candidates declared in docs/laws.md)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a few sweeps, few resamples: a smoke test in seconds (no coverage to quote)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.bootstrap = 2, 10
    if args.reps < 1 or args.bootstrap < 10:
        print("error: need --reps >= 1 and --bootstrap >= 10", file=sys.stderr)
        return 2
    if args.band_rule != DEFAULT_RULE and args.factors is None:
        print(
            "error: --band-rule is the prediction band's, asked for with --factors", file=sys.stderr
        )
        return 2
    if args.factors is not None:
        try:
            for name in args.laws:
                law_registry.get(name)
        except ValueError as e:
            print(f"error: --laws: {e}", file=sys.stderr)
            return 2
        if any(not f >= 1 for f in args.factors):
            print("error: --factors are multiples of the largest compute, >= 1", file=sys.stderr)
            return 2
        return _extrapolation_main(args)
    return _print_tables(
        args,
        f"{'design':<8} {'truth':<10} {'estimator':<9} {'coverage':>8} {'±se':>6} "
        f"{'median log-width':>16} {'median log bias':>15} {'R² (C-law)':>10}",
        lambda d, truth: run_design(
            d, args.reps, args.bootstrap, args.seed, args.estimators, args.noise, truth
        ),
        lambda d, truth, r: (
            f"{d:<8} {truth:<10} {e:<9} {r['coverage'][e]:>8.1%} {r['se'][e]:>6.1%} "
            f"{r['median_log_width'][e]:>16.3f} {r['median_log_bias'][e]:>+15.3f} "
            f"{r['r2_baseline']:>10.3f}"
            for e in args.estimators
        ),
    )


def _extrapolation_main(args) -> int:
    return _print_tables(
        args,
        f"{'design':<8} {'truth':<10} {'law':<11} {'factor':>6} {'quantity':<10} "
        f"{'coverage':>8} {'±se':>6} {'median log-width':>16} {'withheld':>8} {'if given':>8}",
        lambda d, truth: run_extrapolation(
            d,
            args.reps,
            args.bootstrap,
            args.factors,
            args.laws,
            args.seed,
            truth,
            args.noise,
            band_rule=args.band_rule,
        ),
        lambda d, truth, r: (
            f"{d:<8} {truth:<10} {row['law']:<11} {row['factor']:>5g}x "
            f"{row['quantity']:<10} {row['coverage']:>8.1%} {row['se']:>6.1%} "
            f"{row['median_log_width']:>16.3f} {row['withheld']:>8.1%} "
            f"{row['coverage_given']:>8.1%}"
            for row in r["rows"]
        ),
    )


def _print_tables(args, header: str, measure, lines) -> int:
    """The preamble and `header`, then for each design and truth `measure(design, truth)`'s
    `lines(design, truth, result)` as they come, and its time on stderr."""
    print(
        f"truth L(N, D), variant N, D x sqrt({M_TRUE}); {args.noise} seed noise; {args.reps} "
        f"replicates, {args.bootstrap} resamples; nominal 95 %; ±se: binomial standard error"
        + ("" if args.band_rule == DEFAULT_RULE else f"; prediction band rule {args.band_rule}")
    )
    print(header)
    for d in args.designs:
        for truth in args.truths:
            t0 = time.time()
            r = measure(d, truth)
            for line in lines(d, truth, r):
                print(line, flush=True)
            print(f"{'':<8} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
