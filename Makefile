# OpScope: every target sets itself up. `make run` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.opscope-installed

.PHONY: run test lint bench bench-app clean-venv demo-llm

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python tools/check_env.py
	@touch $(STAMP)

## The demo LLM folder (resources/models/demo_llm/, not committed; about a second): built
## after set-up, rebuilt only when its builder, corpus or libraries changed (--if-stale
## compares their hash with demo_llm/build.sha256).
demo-llm: $(STAMP)
	$(BIN)/python resources/models/build_demo_llm.py --if-stale

## The main job: the desktop app, running the bundled demo transformer live.
run: $(STAMP) demo-llm
	$(BIN)/opscope

## Lint, architecture contracts, then the whole test suite (headless), a worker per core
## (pytest-xdist; each worker has its own caches, see tests/conftest.py). A single file:
## `.venv/bin/python -m pytest tests/test_x.py` runs in one process.
test: lint demo-llm
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -n auto --dist worksteal

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

## The window under load (headless; about 8 minutes): frame cost, then event-loop lag and
## engine throughput with the window open against `opscope bench`.
bench-app: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/plot_paint.py
	QT_QPA_PLATFORM=offscreen $(BIN)/python bench/app_responsiveness.py

clean-venv:
	rm -rf $(VENV)

## The installer for ops staff: a PyInstaller one-folder bundle (dist/opscope/) and a .deb
## (dist/opscope_<version>_<arch>.deb), built from a clean venv without torch or dev tools.
## OPSCOPE_BUNDLE_GPU=1 builds the GPU variant (see packaging/README.md).
PKG_VENV  := .venv-package
PKG_STAMP := $(PKG_VENV)/.opscope-package-installed

.PHONY: package

$(PKG_STAMP): pyproject.toml
	rm -rf $(PKG_VENV)
	$(PYTHON) -m venv $(PKG_VENV)
	$(PKG_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PKG_VENV)/bin/python -m pip install --quiet . pyinstaller
	@touch $@

package: $(PKG_STAMP) demo-llm
	$(PKG_VENV)/bin/python tools/check_env.py
	$(PKG_VENV)/bin/python -c "import importlib.util as u, sys; \
	sys.exit('package: torch is installed in $(PKG_VENV); it must not be bundled' \
	if u.find_spec('torch') else 0)"
	rm -rf dist/opscope build/pyinstaller
	$(PKG_VENV)/bin/pyinstaller --noconfirm --log-level WARN --distpath dist \
	  --workpath build/pyinstaller packaging/opscope.spec
	packaging/build_deb.sh dist/opscope dist
	@du -sh dist/opscope dist/opscope_*.deb
