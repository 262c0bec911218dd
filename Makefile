# The habits of this project as targets. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   := build/demo

.PHONY: install install-test demo test test-fast test-compat lint bench clean

# `install`: what running jaxport needs, nothing more (extras stay opt-in: `pip install -e '.[iree]'`).
# `install-test`: the test, lint and optional-runtime tools on top (IREE, flax, equinox, pytest, ruff, mypy).
install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: install
	mkdir -p $(DEMO)
	$(BIN)/jaxport export examples/mlp/model.py:predict --shapes examples/mlp/spec.yaml -o $(DEMO)/mlp.jaxport
	$(BIN)/jaxport inspect $(DEMO)/mlp.jaxport
	$(BIN)/jaxport call $(DEMO)/mlp.jaxport --inputs examples/mlp/x.npy --cache-dir $(DEMO)/cache/xla

test: install-test
	$(BIN)/python -m pytest

test-fast: install-test
	JAXPORT_FAST=1 $(BIN)/python -m pytest -q

# `test-compat`: the oldest JAX jaxport supports (pyproject.toml: jax>=0.9.1,<0.11) in a second environment, $(COMPAT),
# with jaxport and the tests' tools but no IREE (its tests skip): the fast tier there, then tests/test_cross_version.py
# (each JAX calls the artifacts the other exported). The newest JAX is $(VENV)'s.
COMPAT      ?= .venv-compat
COMPAT_JAX  ?= 0.9.1
COMPAT_DEPS := 'pytest>=8' 'jsonschema>=4' 'hypothesis>=6' 'flax>=0.10' 'equinox>=0.11'

$(COMPAT)/.installed-$(COMPAT_JAX): pyproject.toml
	test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/bin/python -m pip install --quiet -e . jax==$(COMPAT_JAX) jaxlib==$(COMPAT_JAX) $(COMPAT_DEPS)
	touch $@

test-compat: install-test $(COMPAT)/.installed-$(COMPAT_JAX)
	JAXPORT_FAST=1 $(COMPAT)/bin/python -m pytest -q
	JAXPORT_COMPAT_PYTHON=$(abspath $(COMPAT))/bin/python $(BIN)/python -m pytest -q tests/test_cross_version.py

# ruff, mypy, and the import-layer contract (scripts/check_layers.py: layers, no cycles, no lazy or private imports).
lint: install-test
	$(BIN)/ruff check jaxport cli tests benchmarks scripts
	$(BIN)/mypy jaxport
	$(BIN)/python scripts/check_layers.py

bench: install-test
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) $(COMPAT) .pytest_cache .ruff_cache .mypy_cache
