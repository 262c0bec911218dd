# The habits of this project as targets. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   := build/demo

.PHONY: install demo test test-fast lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: install
	mkdir -p $(DEMO)
	$(BIN)/jaxport export examples/mlp/model.py:predict --shapes examples/mlp/spec.yaml -o $(DEMO)/mlp.jaxport
	$(BIN)/jaxport inspect $(DEMO)/mlp.jaxport
	$(BIN)/jaxport call $(DEMO)/mlp.jaxport --inputs examples/mlp/x.npy --cache-dir $(DEMO)/cache/xla

test: install
	$(BIN)/python -m pytest

test-fast: install
	JAXPORT_FAST=1 $(BIN)/python -m pytest -q

# ruff, mypy, and the import-layer contract (scripts/check_layers.py: layers, no cycles, no lazy or private imports).
lint: install
	$(BIN)/ruff check jaxport cli tests benchmarks scripts
	$(BIN)/mypy jaxport
	$(BIN)/python scripts/check_layers.py

bench: install
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf build $(VENV) .pytest_cache .ruff_cache .mypy_cache
