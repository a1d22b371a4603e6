# Evalsite. Quick start: `make demo` (set up, run the example suites, serve) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python >= 3.12: pyenv's 3.12.1 (pinned in .python-version) when present, else python3.12 / python3.
PYTHON ?= $(shell for p in $$HOME/.pyenv/versions/3.12.1/bin/python3 python3.12 python3.13 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
EVALSITE := $(VENV)/bin/evalsite
HOST ?= 127.0.0.1
PORT ?= 8000
# CI adds the `local` extra (llama-cpp-python builds from source in ~4 min; its multimodal library
# is not built: LLAVA_BUILD=OFF saves a minute) for the SmolLM2 judge tests.
EXTRAS ?= dev
# pytest-xdist workers for the unit/integration suite (`auto`: one per CPU; `0`: in-process).
TEST_WORKERS ?= auto
# Parallel mutant runs of `make mutation`.
MUTATION_WORKERS ?= 2

.PHONY: metrics-venv help venv install demo demo-runs serve test test-unit test-e2e lint docs docs-reference docs-serve typecheck bench bench-cluster cluster mutation screenshots clean

help:
	@echo "make demo    set up .venv, migrate, import the example sets, run the example evals, serve"
	@echo "make test    set up .venv and run lint + unit/integration tests + browser tests"
	@echo "make test-unit  the unit/integration tests alone; make test-e2e  the browser tests alone"
	@echo "make docs    build the docs site (docs/) into var/site/"
	@echo "make metrics-venv  Ragas, DeepEval and autoevals in .venv-metrics (EVALSITE_METRICS_PYTHON) for the library scorers"
	@echo "make screenshots  refresh the 1440 px screenshots of the portal's main pages in docs/screenshots/"
	@echo "make docs-reference  regenerate docs/reference/ (CLI, API, settings) from the code"
	@echo "make bench   run the benchmarks in bench/"
	@echo "make cluster the scaled setup locally: PostgreSQL, Redis, the portal and WORKERS queue workers (docs/scale.md)"
	@echo "make mutation  mutation testing of the scorers, stats, gates, splits, report and queries (slow)"

$(PY):
	@if [ -z "$(PYTHON)" ]; then echo "error: Python >= 3.12 not found (install it, e.g. 'pyenv install 3.12.1', or set PYTHON=...)" >&2; exit 1; fi
	@echo "using $(PYTHON)"
	@echo "[1/3] creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "[2/3] upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-$(EXTRAS): $(PY) pyproject.toml setup.py
	@echo "[3/3] installing Evalsite and its Python packages into $(VENV): about 90 s with pip's cache warm,"
	@echo "      about 4 minutes with an empty cache (downloads); pip's progress follows"
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAVA_BUILD=OFF" \
	PYTHONWARNINGS="ignore:Editable installation" \
		$(PY) -m pip install --progress-bar on -e ".[$(EXTRAS)]"
	@echo "installed into $(VENV)"
	@touch $@

install: $(VENV)/.installed-$(EXTRAS)

demo: install demo-runs serve

# Idempotent: a second `make demo` reuses the runs of the first (no duplicates, no lockbox warning),
# also after cases were captured or edited in the portal; --keep-edited never overwrites an edited case.
demo-runs: install
	$(EVALSITE) migrate --verbosity 0
	$(EVALSITE) import --keep-edited examples/sets/gsm8k_test.jsonl examples/sets/hotpotqa_dev100.jsonl examples/sets/bfcl_*.jsonl
	$(EVALSITE) demo
	@echo; echo "== one case's trace =="
	$(EVALSITE) trace --latest
	@echo; echo "demo accounts (local only):"; $(EVALSITE) demo_users

serve: install
	@echo; echo "Portal: log in as admin/admin, member/member or viewer/viewer (port busy? make demo PORT=8001)"
	$(EVALSITE) serve --host $(HOST) --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/mypy
	$(PY) scripts/import_cycles.py evalcore apps evalsite
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The docs site (docs/, mkdocs.yml) into var/site/; docs-serve serves it with live reload.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The generated reference pages (docs/reference/cli.md, api.md, settings.md) from the commands'
# parsers, the OpenAPI schema and the EVALSITE_* names the code reads; tests/test_docs_reference.py
# fails while a committed page differs from what this writes.
docs-reference: install
	$(PY) scripts/gen_reference.py

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve -a 127.0.0.1:8001

# The browser tests run even when the unit suite fails (a failure there must not hide theirs);
# `make test` then fails with the status of the last call that failed.
test: install lint
	@rc=0; $(MAKE) --no-print-directory test-unit || rc=$$?; \
	$(MAKE) --no-print-directory test-e2e || rc=$$?; exit $$rc

# The unit and integration suite alone (pytest-xdist, TEST_WORKERS); the library scorers' tests
# run Ragas, DeepEval and autoevals from .venv-metrics (metrics-venv). --dist worksteal: each
# worker starts on a contiguous half of the tests (a module's fixtures are made once, not on both
# workers) and an idle worker takes tests from the other's queue (no long tail on one worker).
test-unit: install metrics-venv
	@bash scripts/ensure-system-packages.sh
	EVALSITE_METRICS_PYTHON=$(CURDIR)/$(METRICS_VENV)/bin/python $(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# The metric libraries run as scorers (Ragas, DeepEval, autoevals; docs/metric-libraries.md) in a
# virtualenv of their own: Ragas and DeepEval pin openai < 3 and rich < 15, below Evalsite's. Its
# 120 pinned packages go in with uv (a wheel from PyPI), which fetches them in parallel: ~15 s
# measured here with empty caches, where pip took 3 min 13 s with its cache warm (one index
# request after the other, ~1.5 s each).
METRICS_VENV := .venv-metrics
$(METRICS_VENV)/.installed: scripts/metrics-requirements.txt
	@if [ -z "$(PYTHON)" ]; then echo "error: Python >= 3.12 not found" >&2; exit 1; fi
	$(PYTHON) -m venv $(METRICS_VENV)
	$(METRICS_VENV)/bin/python -m pip install --quiet "uv>=0.9,<1"
	$(METRICS_VENV)/bin/uv pip install --quiet --python $(METRICS_VENV)/bin/python -r scripts/metrics-requirements.txt
	@touch $@

metrics-venv: $(METRICS_VENV)/.installed

# The Playwright browser tests alone, as their own pytest call (see tests/e2e/conftest.py), on
# E2E_WORKERS pytest-xdist workers: each starts its own `evalsite serve` on its own port and
# database; a file's tests stay on one worker, in order (--dist loadfile). `0`: in one process.
E2E_WORKERS ?= 2
test-e2e: install
	@bash scripts/ensure-system-packages.sh
	$(PY) -m pytest -q tests/e2e -p no:cacheprovider -o addopts="" -n $(E2E_WORKERS) --dist loadfile

# 1440 px screenshots of the portal's main pages into docs/screenshots/ (scripts/screenshots.py).
screenshots: install
	@bash scripts/ensure-system-packages.sh
	$(PY) scripts/screenshots.py

typecheck: install
	$(VENV)/bin/mypy

bench: install
	$(PY) bench/run_all.py

bench-cluster: install
	@bash scripts/ensure-system-packages.sh
	$(PY) bench/bench_cluster.py

# The scaled setup on this machine (docs/scale.md): PostgreSQL in a temp dir, Redis, the portal on
# PORT and WORKERS RQ workers; Ctrl-C stops it all (the dev extra has rq and psycopg).
WORKERS ?= 2
cluster: install
	@bash scripts/ensure-system-packages.sh
	PYTHON=$(PY) bash scripts/cluster.sh -w $(WORKERS) -p $(PORT)

# Mutation testing, not part of `make test`. mutmut 3 copies the code into mutants/, mutates the
# modules listed in [tool.mutmut] (pyproject.toml), runs the tests that reach each mutated
# function (one forked pytest session per mutant), and keeps results there: a second run only
# retests what changed (`rm -rf mutants` for a fresh one). EVALSITE_MUTATION_DB=1 makes those
# sessions copy one migrated SQLite file instead of migrating each time (tests/support/mutation_db.py).
# The score per module is printed at the end; it fails below 85%. `$(VENV)/bin/mutmut show NAME`
# prints a surviving mutant's diff.
mutation: install
	@mkdir -p mutants
	env -u PYTHONPATH -u DATABASE_URL EVALSITE_MUTATION_DB=1 $(VENV)/bin/mutmut run --max-children $(MUTATION_WORKERS) \
		> mutants/run.log 2>&1 || { tail -c 3000 mutants/run.log; exit 1; }
	$(PY) scripts/mutation_score.py --min 85

clean:
	rm -rf $(VENV) $(METRICS_VENV) var mutants
