"""The analysis logged to W&B: the fit table and the figures as one job_type=analysis run of the
sweep's group, under the keys `analysis.dashboard` reads (`andrea.run.logkeys`). The analysis on
disk is the product; W&B holds a copy of it."""

from __future__ import annotations

from pathlib import Path


def log_analysis(project, group, mode, out, rows, report, figures) -> str:
    """One job_type=analysis run in the sweep's `group` of W&B `project` (`mode`: offline,
    online, disabled; `out`: where it writes), under the keys the dashboard reads; the line that
    says where it went."""
    try:
        import wandb
    except ImportError:
        return "W&B: wandb is not installed; skipped"
    from andrea.run import logkeys as keys

    image_keys = {
        "scaling": keys.ANALYSIS_SCALING,
        "multiplier": keys.ANALYSIS_MULTIPLIER,
        "ablation": keys.ANALYSIS_ABLATION,
        "dynamics": keys.ANALYSIS_DYNAMICS,
    }
    try:
        run = wandb.init(
            project=project,
            group=group,
            job_type=keys.JOB_ANALYSIS,
            mode=mode,
            dir=str(out),
            config=report["settings"],
            tags=[keys.JOB_ANALYSIS] + sorted(report["fits"]),
            settings=wandb.Settings(init_timeout=30, silent=True),
        )
        cols = list(rows[0])
        table = wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in rows])
        run.log(
            {
                keys.ANALYSIS_FIT_TABLE: table,
                **{
                    image_keys[p.stem]: wandb.Image(str(p))
                    for p in figures
                    if p.suffix == ".png" and p.stem in image_keys
                },
            }
        )
        for m in report["multipliers"]["at_c_ref"]:
            run.summary[f"multiplier/{m['variant']}@{m['c_ref_pflops_days']:.3g}"] = m["multiplier"]
        for label, f in report["fits"].items():
            run.summary[f"alpha/{label}"] = f["alpha"]
            run.summary[f"A/{label}"] = f["A"]
        where = Path(run.dir).parent if mode == "offline" and run.dir else None
        run.finish()
    except Exception as e:  # the analysis on disk is the product; W&B is a copy of it
        return f"W&B: logging failed ({type(e).__name__}: {e}); outputs on disk are complete"
    msg = f"W&B: logged to project {project}, group {group} (mode {mode})"
    if where:
        msg += f"; upload later with `wandb sync {where}`"
    return msg


# --- main, in phases: check -> collect -> choose the law -> fit -> estimate -> fit the chosen law
# -> write -> draw -> log -> print ---------------------------------------------------------------
