"""The residual schemes' code for the self-contained Hugging Face export (andrea/eval/export.py).

Each module here is written into an export folder as `residual_andrea.py`, beside the
transformer's `modeling_andrea.py` (andrea/eval/hf_modeling.py), and imports torch only: users
of an export need not install andrea. A module defines what the transformer asks of it:

- `RESIDUAL_ATTRIBUTE`: the state_dict prefix of the scheme's parameters (None: none);
- `build_residual(config)`: those parameters as one module (None without any);
- `residual_forward(x, model, module)`: the stream from the embedding to the final LayerNorm,
  calling `model.blocks` / `model.sublayers()`;
- `residual_ln_eps(config, layer)`: the LayerNorm eps in front of sublayer `layer`.

A scheme names its module as `Scheme.export` (docs/residual_schemes.md). Depth attention is
written in its plain form (every source stacked); andrea's training op computes the same
function faster, and tests/test_eval_export.py compares the logits of both for every scheme.
"""
