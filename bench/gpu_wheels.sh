#!/usr/bin/env bash
# Wheels for the packages bench/gpu_check.sh needs that a bare CUDA image (PyTorch, numpy, scipy,
# matplotlib, tokenizers, PyYAML, cloudpickle) lacks, for a GPU machine that cannot reach a
# package index. Run here, carry the folder along, and gpu_check.sh installs it first:
#     bash bench/gpu_wheels.sh [DEST=.whl]      # ~2.5 MB, pure-Python wheels only
# Versions are the ones installed in this environment, so the GPU runs the code the tests ran.
# W&B is left out on purpose: gpu_check.sh runs with wandb.mode=disabled, which never imports it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
DEST=${1:-.whl}
# + the depth-op kernels of model.depth_backend (the `kernels` extra; triton comes with CUDA torch)
PACKAGES=(hydra-core omegaconf antlr4-python3-runtime submitit hydra-submitit-launcher
          fla-core liger-kernel flash-attn-res einops)

mapfile -t PINS < <("$PY" - "${PACKAGES[@]}" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
for name in sys.argv[1:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        sys.exit(f"gpu_wheels: {name} is not installed here; run `make env` first")
EOF
)
rm -rf "$DEST"
mkdir -p "$DEST"
# antlr4-python3-runtime 4.9.x is published as a source archive only: build its (pure) wheel here.
"$PY" -m pip wheel -q --no-deps -w "$DEST" "${PINS[@]}"
for whl in "$DEST"/*.whl; do
  case "$whl" in *-py3-none-any.whl|*-py2.py3-none-any.whl) ;;
    *) echo "gpu_wheels: $whl is not a pure-Python wheel" >&2; exit 1 ;; esac
done
echo "gpu_wheels: ${#PINS[@]} wheels in $DEST ($(du -sh "$DEST" | cut -f1)): ${PINS[*]}"
