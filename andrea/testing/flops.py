"""The forward FLOPs per token that torch's FlopCounterMode measures on CPU, to check a scheme's
`flops` against: its matmul part must equal the measurement exactly."""

from __future__ import annotations

import torch


def _mv_flop(mat_shape, vec_shape, *args, out_shape=None, **kwargs):
    return 2 * mat_shape[0] * mat_shape[1]


def _cpu_sdpa_flop(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs):
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(q_shape, k_shape, v_shape)


# FlopCounterMode counts mm/addmm/bmm/baddbmm and the CUDA SDPA kernels. On CPU,
# F.scaled_dot_product_attention runs aten._scaled_dot_product_flash_attention_for_cpu, which it
# does not know (it would count 0), and a matrix-vector product (the depth scores V @ q) lowers to
# aten.mv, also unknown. Both are registered here with torch's own formulas: SDPA with
# sdpa_flop_count (4·B·H·T·T·head_dim, full T x T -- the PaLM convention), mv with 2·m·n.
# Elementwise ops and reductions (LayerNorm, GELU, softmax, the key RMS) are never counted.
CPU_MAPPING = {
    torch.ops.aten.mv: _mv_flop,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_flop,
}


def measured_forward_per_token(model, B: int, T: int) -> int:
    """The training forward's matmul FLOPs per token of `model` on a [B, T] batch."""
    from torch.utils.flop_counter import FlopCounterMode

    idx = torch.randint(0, model.cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    model.train()  # the training path: the FLOPs on the compute axis are training FLOPs
    with torch.enable_grad(), FlopCounterMode(display=False, custom_mapping=CPU_MAPPING) as fc:
        model(idx)
    total = fc.get_total_flops()
    assert total % (B * T) == 0
    return total // (B * T)
