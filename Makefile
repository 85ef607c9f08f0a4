# One task runner for people and CI. `make demo` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest wheel-check bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,fleet]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dreaming demo --dir demo-state

lint: $(STAMP)
	$(BIN)/ruff check dreaming tests bench
	$(BIN)/ruff format --check dreaming tests bench

typecheck: $(STAMP)
	$(BIN)/mypy dreaming

pytest: $(STAMP)
	$(BIN)/pytest -q -n auto

# The package must work from a built wheel (templates and jobs included), outside the tree.
wheel-check: $(STAMP)
	rm -rf dist .wheel-venv
	$(BIN)/python -m build -q --wheel --outdir dist . >/dev/null
	$(PYTHON) -m venv .wheel-venv
	.wheel-venv/bin/python -m pip install -q dist/*.whl
	cd /tmp && $(CURDIR)/.wheel-venv/bin/dreaming --help >/dev/null
	cd /tmp && $(CURDIR)/.wheel-venv/bin/dreaming demo --dir $$(mktemp -d) >/dev/null
	rm -rf .wheel-venv
	@echo "wheel-check: ok"

test: lint typecheck pytest wheel-check

bench: $(STAMP)
	$(BIN)/python bench/ingest.py

clean:
	rm -rf $(VENV) .wheel-venv dist demo-state
