"""The depth-attention op, kept importable under its first name: it lives in
`andrea/residuals/depth_op.py` (the training op and its reference) and
`andrea/residuals/depth_variants.py` (two-phase Block path, the ablations' general path)."""

from andrea.residuals.depth_op import (  # noqa: F401
    SourceStack,
    _weighted_sum,
    depth_attention,
    depth_attention_reference,
    depth_attention_weights,
)
from andrea.residuals.depth_variants import (  # noqa: F401
    Phase1,
    block_phase1,
    block_phase2,
    depth_attention_general,
)
