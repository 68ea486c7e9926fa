# Entry points for a fresh machine: `make demo` (the pipeline and its maintenance on a local
# warehouse) and `make check` (every gate CI runs). Both create or update .venv first; `make check`
# runs `make setup` (every install the tests need) before its gates, and `make test` installs
# nothing: it says which set-up is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo demo-delta-spark demo-airflow ui setup setup-done check gates lint typecheck contracts docs doctest test soak fuzz venv java-check browser-deps bench bench-setup reference

venv: $(STAMP)

$(STAMP): pyproject.toml package.json
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@command -v npm >/dev/null 2>&1 || { echo "delta-ops: the object-store tests need Node.js (npm) for Azurite" >&2; exit 1; }
	npm ci --no-audit --no-fund --silent  # Azurite, the Azure Blob emulator the tests start
	@touch $(STAMP)

java-check:
	@$(BIN)/python scripts/check_java.py

# The reference engine the tests judge our writes with: Delta Spark in a virtualenv of its own
# (its pyspark is older than the product's; pins in tests/reference/requirements.txt, with what
# delta-ops needs to run on Delta Spark's session from the repository), its jars from Maven
# Central cached in build/ivy by a warm-up run (the first run downloads them).
REF_VENV ?= .venv-reference
REF_STAMP := $(REF_VENV)/.installed-stamp
IVY_CACHE ?= build/ivy

reference: venv java-check $(REF_STAMP)

$(REF_STAMP): tests/reference/requirements.txt tests/reference/delta_spark_server.py
	@test -x $(REF_VENV)/bin/python || $(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(REF_VENV)/bin/python -m pip install --quiet -r tests/reference/requirements.txt
	$(REF_VENV)/bin/python tests/reference/delta_spark_server.py --ivy $(IVY_CACHE) --warm
	@touch $(REF_STAMP)

# Debian's Chromium for the Dagster UI test (apt only where unavoidable: no PyPI build exists).
# Set-up only (`make setup`): never a dependency of `make test`.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else echo "delta-ops: the UI test needs Chromium: sudo apt-get install -y chromium" >&2; exit 1; fi; }

demo: venv java-check
	DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/python scripts/demo.py

# The same demo with the pipeline on a Delta Spark session (DELTA_OPS_DEMO_ENGINE=delta-spark,
# definitions.py): a virtualenv of its own, the reference engine's PySpark and delta-spark pins
# (tests/reference/requirements.txt) with delta-ops' demo extra, Delta's jars from Maven Central
# into build/ivy on the first run. Its warehouse is build/delta-spark-warehouse.
DELTA_DEMO_VENV ?= .venv-delta-spark
DELTA_DEMO_STAMP := $(DELTA_DEMO_VENV)/.installed-stamp

$(DELTA_DEMO_STAMP): pyproject.toml tests/reference/requirements.txt
	@test -x $(DELTA_DEMO_VENV)/bin/python || $(PYTHON) -m venv $(DELTA_DEMO_VENV)
	$(DELTA_DEMO_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DELTA_DEMO_VENV)/bin/python -m pip install --quiet -r tests/reference/requirements.txt \
		-e '.[demo]' -c tests/reference/requirements.txt
	@touch $(DELTA_DEMO_STAMP)

demo-delta-spark: venv java-check $(DELTA_DEMO_STAMP)
	DELTA_OPS_DEMO_ENGINE=delta-spark DELTA_OPS_WAREHOUSE=$(CURDIR)/build/delta-spark-warehouse \
		DAGSTER_HOME=$(CURDIR)/.dagster $(DELTA_DEMO_VENV)/bin/python scripts/demo.py

# The example Airflow DAG (examples/airflow/) run once on the demo warehouse with `airflow dags
# test`: Airflow's home and SQLite database in build/airflow-home, no scheduler or webserver.
demo-airflow: venv
	$(BIN)/python scripts/airflow_demo.py

# The UI on the demo's instance (runs of `make demo` included); `dagster dev -w workspace.yaml`
# opens the same code location.
ui: venv
	DAGSTER_HOME=$(CURDIR)/.dagster $(BIN)/dg dev

# Every install the gates and the tests need: the virtualenv (pip, npm ci for Azurite), Java's
# check, Debian's Chromium, the reference engine's virtualenv and jars. The only target that
# installs for the tests; `make check` runs it first.
setup: venv java-check browser-deps reference

# What `make test` needs from `make setup`, checked without installing anything.
setup-done:
	@test -f $(STAMP) || { echo "delta-ops: no virtualenv in $(VENV): run make setup (make check runs it)" >&2; exit 1; }
	@test -f $(REF_STAMP) || { echo "delta-ops: no reference engine in $(REF_VENV): run make setup (make check runs it)" >&2; exit 1; }
	@command -v chromium >/dev/null 2>&1 || { echo "delta-ops: the UI test needs Chromium: run make setup (it installs Debian's chromium)" >&2; exit 1; }

# The gates, cheapest first: lint and format, strict types, import-layer contracts, the docs
# site, then tests (the docstrings' `>>>` examples among them: tests/project/test_doctests.py). The
# set-up runs to its end before the gates start (a sub-make, so `make -j check` keeps the order).
check: setup
	@$(MAKE) --no-print-directory gates

gates: lint typecheck contracts docs test

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

contracts: venv
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml, docs/): strict, so a warning or an API page naming a module
# that was renamed or removed fails. `$(BIN)/mkdocs serve` previews it.
DOCS_SITE ?= build/site
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(DOCS_SITE)

# Only the docstrings' `>>>` examples (`make test` runs them too).
doctest: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/project/test_doctests.py

# The Airflow tests run in a process of their own: importing Airflow configures the process's
# logging (a handler on the root logger) and sys.path for the rest of its life. The reference
# tier (tests/reference/) talks to Delta Spark in .venv-reference (`make reference`).
# Two pytest-xdist workers (PYTEST_WORKERS), one per core: the tests that need a JVM share one
# worker as the `jvm` group (tests/conftest.py), so a run never has two Spark sessions at once.
# The 25 slowest tests are printed, so the CI record shows where the suite's time goes.
PYTEST_WORKERS ?= 2
test: setup-done java-check
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --durations=25 --ignore=tests/airflow
	$(BIN)/python -m pytest tests/airflow

# The reliability suite with the long profile (hypothesis' soak profile, every crash point);
# SOAK_SECONDS bounds it (default 1 h). The run's seed is printed at the end
# (RELIABILITY_SEED=N make soak replays it).
SOAK_SECONDS ?= 3600
# RACE_WRITES: Delta Spark's writes per race scenario (tests/reference/test_races.py; 5 in check)
RACE_WRITES ?= 60
soak: venv fuzz reference
	HYPOTHESIS_PROFILE=soak RACE_WRITES=$(RACE_WRITES) timeout --signal=INT $(SOAK_SECONDS) \
		$(BIN)/python -m pytest -x \
		tests/reliability/test_model.py tests/reliability/test_crashes.py \
		tests/reliability/test_concurrency.py tests/reference/test_races.py \
		|| test $$? -eq 124

# The coverage-guided log fuzzer (atheris, tests/support/log_fuzz.py) for FUZZ_SECONDS; its working corpus
# in build/fuzz-corpus, an input it fails on saved to tests/data/fuzz_corpus/ (commit it: the
# tests replay it). The hypothesis side runs in `make test` and, longer, in `make soak`.
FUZZ_SECONDS ?= 600
fuzz: venv
	$(BIN)/python -m tests.support.log_fuzz --seconds $(FUZZ_SECONDS) --corpus build/fuzz-corpus

# SeaweedFS (Apache-2.0), the S3 server bench_s3.py measures on: built from its Go module (the Go
# module proxy) with the machine's Go >= 1.26, in the module's own folder so its go.mod's replace
# line holds (`go install pkg@version` refuses modules with one). Benchmarks only: the store tests
# keep moto.
SEAWEEDFS_VERSION ?= v0.0.0-20261109003541-7506e5f91cd6
WEED := build/seaweedfs/weed

bench-setup: venv $(WEED)

$(WEED):
	@command -v go >/dev/null 2>&1 || { echo "delta-ops: bench_s3.py builds SeaweedFS with Go >= 1.26: install Go, then make bench-setup" >&2; exit 1; }
	go mod download github.com/seaweedfs/seaweedfs@$(SEAWEEDFS_VERSION)
	mkdir -p $(dir $(WEED))
	cd "$$(go env GOMODCACHE)/github.com/seaweedfs/seaweedfs@$(SEAWEEDFS_VERSION)" && \
		GOFLAGS=-buildvcs=false go build -o $(CURDIR)/$(WEED).tmp ./weed
	mv $(WEED).tmp $(WEED)

bench: bench-setup
	$(BIN)/python benchmarks/run_all.py
