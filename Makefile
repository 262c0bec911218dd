# The habits of this project as targets. `make demo` and `make test` work on a fresh machine.
# PYTHON: the newest Python >= 3.12 on PATH, then in pyenv's versions directory (scripts/pick_python.sh says which),
# so that .venv gets the newest supported JAX; python3 (jax 0.10.x) when there is none. `make test PYTHON=...` overrides.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell scripts/pick_python.sh)
endif
PYVER  := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   := build/demo

.PHONY: install install-test demo test test-fast test-setup test-compat test-cross test-serve test-tpu tpu-build \
	test-tpu-deviceless test-cuda-deviceless test-gpu gpu-build lint bench clean

# `install`: what running jaxport needs, nothing more (extras stay opt-in: `pip install -e '.[iree]'`).
# `install-test`: the test, lint and optional-runtime tools on top (IREE, flax, equinox, pytest, ruff, mypy), never
# anything that pins JAX (libtpu, JAX's CUDA plugin: they get environments of their own), so the JAX `make install`
# chose stays (`make test-setup` checks it).
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# A .venv of another Python (an older checkout's, or PYTHON changed) is rebuilt.
$(VENV)/.installed: pyproject.toml $(VENV)/.python-$(PYVER)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.python-$(PYVER):
	@if [ -x $(BIN)/python ] && [ "$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$(PYVER)" ]; then \
		echo "jaxport: $(VENV) has another Python; rebuilding it with Python $(PYVER)"; rm -rf $(VENV); fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	touch $@

# keras-hub declares tensorflow-text (all of TensorFlow), which its JAX backbones never import: it is installed
# without its declared dependencies, with the two its import needs (README, "Models from the JAX ecosystem").
$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps 'keras-hub>=0.20'
	$(BIN)/python -m pip install --quiet regex tokenizers
	touch $@

demo: install
	mkdir -p $(DEMO)
	$(BIN)/jaxport export examples/mlp/model.py:predict --shapes examples/mlp/spec.yaml -o $(DEMO)/mlp.jaxport
	$(BIN)/jaxport inspect $(DEMO)/mlp.jaxport
	$(BIN)/jaxport call $(DEMO)/mlp.jaxport --inputs examples/mlp/x.npy --cache-dir $(DEMO)/cache/xla

# `test`: every test, over TEST_WORKERS pytest-xdist workers (2: this project's 2-core machines; each imports JAX).
TEST_WORKERS ?= 2

test: install-test
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

# `test-setup`: `make demo`, then the test tools, leave .venv's JAX as `make demo` installed it (issue 57: the test
# extra once pulled libtpu, which PyPI did not have for the newest JAX, and pip downgraded JAX to one it had). On a
# fresh checkout (CI) the tools are installed for the first time; where they were installed before, pip's dry run of
# their install says whether it would change JAX (scripts/same_jax.py; a few seconds).
test-setup: demo
	$(BIN)/python scripts/same_jax.py record $(DEMO)/jax-after-demo.json
	$(MAKE) install-test
	$(BIN)/python scripts/same_jax.py compare $(DEMO)/jax-after-demo.json

# `test-fast`: the inner loop, everything but the tests marked `slow` and the corpora (marked `corpus`, tests/conftest.py),
# over TEST_WORKERS pytest-xdist workers, as `make test`.
FAST         := -m "not slow and not corpus"

test-fast: install-test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(FAST)

# `test-compat`: the oldest JAX jaxport supports (pyproject.toml: jax>=0.9.1,<0.13) on Python 3.11, in a second
# environment, $(COMPAT), with jaxport and the tests' tools but no IREE (its tests skip): the fast tier there. Then the
# cross-version matrix (tests/test_cross_version.py): $(VENV)'s JAX (the newest), $(COMPAT)'s and the newest 0.10.x
# ($(COMPAT_MID), Python 3.11) each export the examples and call the artifacts every other one exported.
COMPAT_PYTHON ?= python3
COMPAT        ?= .venv-compat
COMPAT_JAX    ?= 0.9.1
COMPAT_MID    ?= .venv-compat-mid
MID_JAX       ?= 0.10.2
COMPAT_DEPS   := 'pytest>=8' 'safetensors>=0.4' 'jsonschema>=4' 'hypothesis>=6' 'flax>=0.10' 'equinox>=0.11'

$(COMPAT)/.installed-$(COMPAT_JAX): pyproject.toml
	test -x $(COMPAT)/bin/python || $(COMPAT_PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/bin/python -m pip install --quiet -e . jax==$(COMPAT_JAX) jaxlib==$(COMPAT_JAX) $(COMPAT_DEPS)
	touch $@

$(COMPAT_MID)/.installed-$(MID_JAX): pyproject.toml
	test -x $(COMPAT_MID)/bin/python || $(COMPAT_PYTHON) -m venv $(COMPAT_MID)
	$(COMPAT_MID)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT_MID)/bin/python -m pip install --quiet -e . jax==$(MID_JAX) jaxlib==$(MID_JAX) 'pytest>=8'
	touch $@

test-compat: install-test $(COMPAT)/.installed-$(COMPAT_JAX)
	$(COMPAT)/bin/python -m pytest -q $(FAST)
	$(MAKE) test-cross

# `test-cross`: only the cross-version matrix (three JAX releases, each calling the others' artifacts; the golden
# serializations of jax 0.4.35 - 0.12.0.1 imported under each; `--for-jax` exports of the newest called under the older
# two; their artifacts upgraded by the newest).
test-cross: install-test $(COMPAT)/.installed-$(COMPAT_JAX) $(COMPAT_MID)/.installed-$(MID_JAX)
	JAXPORT_COMPAT_PYTHON=$(abspath $(COMPAT))/bin/python:$(abspath $(COMPAT_MID))/bin/python \
		$(BIN)/python -m pytest -q tests/test_cross_version.py

# `test-serve`: `jaxport serve` (kserve) queried by tritonclient, and the Ray Data, Beam and Spark adapters
# (tests/serve/), in their own environment $(SERVE_VENV): these engines pin numpy, ml_dtypes and protobuf below what
# $(VENV) has (about 4 minutes to install on 2 cores). Without them installed, tests/serve skips.
SERVE_VENV ?= .venv-serve

$(SERVE_VENV)/.installed: pyproject.toml
	test -x $(SERVE_VENV)/bin/python || $(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SERVE_VENV)/bin/python -m pip install --quiet -e '.[serve-test,sign]' 'pytest>=8' 'jsonschema>=4'
	touch $@

test-serve: $(SERVE_VENV)/.installed
	$(SERVE_VENV)/bin/python -m pytest -q tests/serve tests/sign/test_adapters.py

# `test-tpu`: the TPU tier (tests/tpu) where JAX sees a TPU; elsewhere every test skips, saying why. It runs in one
# process (one process at a time holds the chip) with $(TPU_PYTHON): .venv's where there is one, else python3 (a TPU
# machine with JAX preinstalled and jaxport's wheel on PYTHONPATH: ../shared/TPU.md). It reads what `make tpu-build`
# made on a machine without a TPU ($(TPU_BUILD), or $$JAXPORT_TPU_BUILD): copy that directory there.
TPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
TPU_BUILD  ?= build/tpu

test-tpu:
	JAXPORT_TPU_BUILD=$${JAXPORT_TPU_BUILD:-$(TPU_BUILD)} $(TPU_PYTHON) -m pytest -q -p no:cacheprovider tests/tpu

# `tpu-build`: on a machine without a TPU, the artifacts and executables the TPU tier runs (scripts/tpu_build.py),
# exported and compiled (deviceless, for tpu-v5e) by the JAX the TPU machine runs, $(MID_JAX), with its libtpu.
tpu-build: $(COMPAT_MID)/.installed-$(MID_JAX)
	$(COMPAT_MID)/bin/python -m pip install --quiet 'jax[tpu]==$(MID_JAX)'
	$(COMPAT_MID)/bin/python scripts/tpu_build.py $(TPU_BUILD)

# `test-tpu-deviceless`: compiling for a TPU on this CPU-only machine, the tests marked `libtpu` (warmup and check
# --target tpu-v5e of the examples, libtpu's start-up settings refused, its start-up lines kept out of the command line
# and of Python scripts that import jaxport, the README's TPU section), in their own environment $(TPU_VENV) with the
# extra `tpu`: libtpu, and the newest JAX that PyPI has a libtpu for (jax 0.12.0.1 while jax 0.12.1's libtpu 0.0.53
# is not out; pip chooses). Never in $(VENV): libtpu there would make pip change the user's JAX to fit it, and every
# JAX process start it. Without libtpu, those tests skip, saying so.
TPU_VENV  ?= .venv-tpu
TPU_TESTS := tests/run/test_targets.py tests/run/test_gpu_targets.py tests/foundation/test_startup.py tests/test_readme.py

$(TPU_VENV)/.installed: pyproject.toml
	test -x $(TPU_VENV)/bin/python || $(PYTHON) -m venv $(TPU_VENV)
	$(TPU_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TPU_VENV)/bin/python -m pip install --quiet -e '.[tpu]' 'pytest>=8' 'jsonschema>=4'
	touch $@

test-tpu-deviceless: $(TPU_VENV)/.installed
	$(TPU_VENV)/bin/python -m pytest -q -p no:cacheprovider -m libtpu $(TPU_TESTS)

# `test-cuda-deviceless`: compiling for NVIDIA GPUs on this CPU-only machine (tests/cuda: warmup and check --target
# cuda-h200 of the examples, the Pallas Triton and Mosaic GPU kernels included, the GPU's memory, the records' keys;
# and tests/run/test_gpu_targets.py with the plugin installed),
# in its own environment $(CUDA_VENV) with the extra `cuda`: JAX's CUDA plugin of $(VENV)'s JAX release, ptxas and
# libdevice from PyPI (about 500 MB to download, no driver, cuBLAS or cuDNN). Never in $(VENV): a CUDA plugin there
# would change how every JAX process starts. Without the plugin installed, tests/cuda skips.
CUDA_VENV ?= .venv-cuda

$(CUDA_VENV)/.installed: pyproject.toml $(VENV)/.installed
	test -x $(CUDA_VENV)/bin/python || $(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_VENV)/bin/python -m pip install --quiet --upgrade pip
	v=$$($(BIN)/python -c 'import jax; print(jax.__version__)') && \
		$(CUDA_VENV)/bin/python -m pip install --quiet -e '.[cuda]' "jax==$$v" "jaxlib==$$v" 'pytest>=8' 'jsonschema>=4'
	touch $@

test-cuda-deviceless: $(CUDA_VENV)/.installed
	$(CUDA_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/cuda tests/run/test_gpu_targets.py

# `test-gpu`: the GPU tier (tests/gpu) where JAX sees an NVIDIA GPU; elsewhere every test skips, saying why. It runs
# in one process with $(GPU_PYTHON): .venv's where there is one, else python3 (a GPU machine with JAX and its CUDA
# plugin preinstalled and jaxport's wheel on PYTHONPATH: ../shared/GPU.md). It reads what `make gpu-build` made on a
# machine without a GPU ($(GPU_BUILD), or $$JAXPORT_GPU_BUILD): copy that directory there (scripts/gpu_run.sh does).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_BUILD  ?= build/gpu
# `gpu-build`: on a machine without a GPU, the artifacts, CPU goldens and executables the GPU tier runs
# (scripts/gpu_build.py), exported and compiled (deviceless, for cuda-h200) by the JAX the GPU machine runs,
# $(GPU_JAX), with its CUDA plugin, in $(GPU_BUILD_VENV).
GPU_JAX        ?= 0.11.2
GPU_BUILD_VENV ?= .venv-cuda-$(GPU_JAX)

test-gpu:
	JAXPORT_GPU_BUILD=$${JAXPORT_GPU_BUILD:-$(GPU_BUILD)} $(GPU_PYTHON) -m pytest -q -p no:cacheprovider tests/gpu

$(GPU_BUILD_VENV)/.installed: pyproject.toml
	test -x $(GPU_BUILD_VENV)/bin/python || $(PYTHON) -m venv $(GPU_BUILD_VENV)
	$(GPU_BUILD_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(GPU_BUILD_VENV)/bin/python -m pip install --quiet -e '.[cuda]' jax==$(GPU_JAX) jaxlib==$(GPU_JAX)
	touch $@

gpu-build: $(GPU_BUILD_VENV)/.installed
	$(GPU_BUILD_VENV)/bin/python scripts/gpu_build.py $(GPU_BUILD)

# ruff, mypy, and the import-layer contract (scripts/check_layers.py: layers, no cycles, no lazy or private imports).
lint: install-test
	$(BIN)/ruff check jaxport cli tests benchmarks scripts
	$(BIN)/mypy jaxport
	$(BIN)/python scripts/check_layers.py

bench: install-test
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) $(COMPAT) $(COMPAT_MID) $(SERVE_VENV) $(TPU_VENV) $(CUDA_VENV) $(GPU_BUILD_VENV) .pytest_cache \
		.ruff_cache .mypy_cache
