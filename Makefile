# The two commands of the README:
#   make demo   a CPU scaling-law sweep on the built-in corpus, then the fit table and plots
#   make test   the whole test suite (Slurm end-to-end tests start a local cluster when root)
# Both create .venv and install the package into it first (once; again when pyproject changes).

PYTHON ?= python3
VENV ?= .venv
# The CPU build of PyTorch where no GPU is present. On Linux, PyPI's torch is a CUDA build
# (large, works on CPU too); add  TORCH_INDEX=https://download.pytorch.org/whl/cpu  for the
# small CPU build.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
DEMO_DIR ?= runs/demo
PYTEST_ARGS ?=
# Four pytest-xdist workers: one takes the Slurm tests in order and one the Ray tests (one shared
# cluster each; the scheduler is in tests/conftest.py), the others the rest. Most tests are one
# process waiting on another (a Slurm or Ray job, a sweep's subprocess): with two workers a clean
# clone's suite kept the 2 cores about 40 % busy. TEST_WORKERS=0 runs all in one process.
TEST_WORKERS ?= 4

# The example residual-scheme plug-ins (docs/residual_schemes.md), installed after andrea so
# that `model=kromhc` and `model=delta_attnres` exist and their tests run.
KROMHC := plugins/andrea-kromhc
DELTA_ATTNRES := plugins/andrea-delta-attnres
# ScaleBench's laws whose inputs are not (params, tokens), as plug-in laws (`andrea.laws`):
# bench.scalebench fits them (docs/planner.md).
SCALEBENCH_LAWS := plugins/andrea-scalebench-laws

BIN := $(VENV)/bin
STAMP := $(VENV)/.andrea-installed

.PHONY: demo test test-quick lint format env clean-demo

env: $(STAMP)

# The `kernels` extra (model.depth_backend's fused kernels) goes in without its dependencies:
# triton (a 286 MB wheel; `du -sh` of its installed folder: 999M) runs the kernels only on
# CUDA, and torch stays the build above; 2 MB of wheels (22 MB installed), for fla's and
# flash-attn-res's pure-torch references in tests/test_depth_backends.py. With triton added by
# hand, that test also runs liger's kernels under Triton's CPU interpreter.
$(STAMP): pyproject.toml $(KROMHC)/pyproject.toml $(DELTA_ATTNRES)/pyproject.toml \
		$(SCALEBENCH_LAWS)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -q -e ".[dev,hf,dashboard,eval,export,ray]"
	$(BIN)/python -m pip install -q --no-deps "fla-core>=0.6" "liger-kernel>=0.8.5" \
		"flash-attn-res>=0.1.12" "einops>=0.8"
	$(BIN)/python -m pip install -q -e $(KROMHC)
	$(BIN)/python -m pip install -q -e $(DELTA_ATTNRES)
	$(BIN)/python -m pip install -q -e $(SCALEBENCH_LAWS)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python sweep.py -m sweeps=demo out_dir=$(dir $(DEMO_DIR))
	$(BIN)/python -m analysis.fit $(DEMO_DIR) --out $(DEMO_DIR)/analysis
	$(BIN)/python -m analysis.domains $(DEMO_DIR) --out $(DEMO_DIR)/analysis
	@echo "Plots and tables: $(DEMO_DIR)/analysis/   W&B offline runs: $(DEMO_DIR)/<size>/<variant>/seed<N>/wandb/"
	@echo "(upload them with: .venv/bin/wandb sync $(DEMO_DIR)/*/*/seed*/wandb/offline-run-*)"

test: $(STAMP) lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

test-quick: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slow and not slurm" $(PYTEST_ARGS)

# ruff (pyproject's [tool.ruff]): lint, and the formatting checked; `make format` applies both
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean-demo:
	rm -rf $(DEMO_DIR)
