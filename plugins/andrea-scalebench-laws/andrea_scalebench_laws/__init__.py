"""ScaleBench's laws as andrea plug-in laws (`andrea.laws`; see laws.py, docs/planner.md)."""

from andrea_scalebench_laws.laws import LAWS, LOSS_FORMS, LR_BSZ, MOE, PARALLEL, SPARSITY, VOCAB

__all__ = ["LAWS", "LOSS_FORMS", "LR_BSZ", "MOE", "PARALLEL", "SPARSITY", "VOCAB"]
