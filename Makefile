# OpScope: every target sets itself up. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.opscope-installed

.PHONY: run test lint bench clean-venv

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python tools/check_env.py
	@touch $(STAMP)

## The main job: the desktop app, running the bundled demo transformer live.
run: $(STAMP)
	$(BIN)/opscope

## Lint, architecture contracts, then the whole test suite (headless).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/harness_overhead.py
	$(BIN)/python bench/variants.py
	$(BIN)/python bench/store_insert.py
	$(BIN)/python bench/store_open.py

clean-venv:
	rm -rf $(VENV)
