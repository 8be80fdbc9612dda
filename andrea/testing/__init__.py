"""What a residual scheme's tests need, importable from an installed andrea: andrea's own tests
and a plug-in's tests outside andrea use the same helpers (docs/residual_schemes.md).

- `andrea.testing.schemes`: the tiny model (`BASE`, `idx`) and the shared checks (the formula
  in fp64, causality, determinism, one compiled graph, counts, recompute, one stream, resume);
- `andrea.testing.runs`: the tiny CPU run (`TINY_RUN`), `compose_run`, `spec_for`,
  `train_tiny`, `final_weights`;
- `andrea.testing.flops`: `measured_forward_per_token` (FlopCounterMode, CPU kernels counted);
- `andrea.testing.export`: a fake run directory (`fake_run`, `save_small_tokenizer`) and the
  export's modeling file loaded standalone (`import_modeling`);
- `andrea.testing.plugins`: `require_plugin`, the first line of a plug-in's test module.

None of them imports pytest at import time (pytest is a dev dependency): only `require_plugin`
calls it, when it skips or fails."""
