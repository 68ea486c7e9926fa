# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create or update the virtualenv in .venv from pyproject.toml first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test venv java-check browser-deps bench

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

java-check:
	@$(BIN)/python scripts/check_java.py

# Debian's Chromium for the Dagster UI test (apt only where unavoidable: no PyPI build exists).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else echo "delta-ops: the UI test needs Chromium: sudo apt-get install -y chromium" >&2; exit 1; fi; }

demo: venv java-check
	$(BIN)/python scripts/demo.py

test: venv java-check browser-deps
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python benchmarks/run_all.py
