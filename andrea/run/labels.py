"""A run's label: the name its run directory, W&B run, results.json `label`, tables and legends
carry (style.md: the config's variant names everywhere).

A label is the variant's config name, plus the block size S of Block AttnRes (`attnres_block_s4`;
`attnres_block_n8` when the run asked for N blocks, S = ceil(L / N)), plus the scheme's
non-default options (`Scheme.label_suffix`: `attnres_full+sigmoid`). The config builds it
(andrea/config/schema.py's `andrea_block_label` resolver, conf/model/*.yaml), the analysis
rebuilds it for a record that lacks one (a CSV without a `label` column). Both are torch-free, so
it lives here; nothing reads a label back apart: the block size is the run's `block_size`.
"""

from __future__ import annotations

from typing import Iterable

# The one scheme whose label shows its depth blocks: Block AttnRes attends over block sums of S
# sublayers, and S is what the report's block-size ablation varies (Kimi Team 2026,
# arXiv:2603.15031).
BLOCK_VARIANT = "attnres_block"


def block_label(block_size: int | None, n_blocks: int | None = None) -> str:
    """Block AttnRes' label: by blocks (attnres_block_n8) when asked by `model.n_blocks`, else
    by block size (attnres_block_s4)."""
    if n_blocks is not None and block_size is None:
        return f"{BLOCK_VARIANT}_n{n_blocks}"
    return f"{BLOCK_VARIANT}_s{block_size}"


def run_label(
    variant: str, block_size: int | None = None, n_blocks: int | None = None, suffix: str = ""
) -> str:
    """The label of a run of `variant` (its config name; Block AttnRes with S or N) followed by
    its scheme's `suffix` (`Scheme.label_suffix` of its options, '' at their defaults)."""
    if variant == BLOCK_VARIANT and (block_size is not None or n_blocks is not None):
        return block_label(None if block_size is None else int(block_size), n_blocks) + suffix
    return variant + suffix


def block_labels(labels: Iterable[str]) -> list[str]:
    """The Block AttnRes labels among `labels` (every one starts with its variant's name), in
    the order a figure's colour ramp gives them: by length, then as text (s2 < s4 < s16)."""
    return sorted({lb for lb in labels if lb.startswith(BLOCK_VARIANT)}, key=lambda s: (len(s), s))
