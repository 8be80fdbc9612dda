"""The PreNorm baseline for the export (`residual_andrea.py`): x = x + f(x). Imports torch only."""

RESIDUAL_ATTRIBUTE = None


def build_residual(config):
    return None


def residual_forward(x, model, module):
    for f in model.sublayers():
        x = x + f(x)
    return x


def residual_ln_eps(config, layer: int) -> float:
    return config.ln_eps
