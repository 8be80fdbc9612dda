"""The network: ANDREA (transformer.py), its FLOPs (flops.py), and the residual schemes
(residuals/, one module per scheme, registered by name in residuals/registry.py).

The stable API: `from andrea.model import ModelConfig, ANDREA`.
"""

from andrea.model.transformer import ANDREA, ModelConfig, ParamCount, count_parameters  # noqa: F401
