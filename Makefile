# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create or update the virtualenv in .venv from pyproject.toml first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test venv java-check bench

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

java-check:
	@$(BIN)/python scripts/check_java.py

demo: venv java-check
	$(BIN)/python scripts/demo.py

test: venv java-check
	$(BIN)/python -m pytest

bench: venv
	$(BIN)/python benchmarks/run_all.py
