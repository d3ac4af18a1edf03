# EchoMQ-Python. `make test` works on a fresh machine: it builds .venv, installs the package
# with its test extras, and the test rig finds or starts a real Redis (tests/conftest.py).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
INTEROP_DIR := tests/interop
NODE_STAMP := $(INTEROP_DIR)/node_modules/.installed-stamp
# The Python peers tests/bench compares with (RQ, Celery, dramatiq): a virtualenv of their own,
# never the package's extras. `make bench BENCH_SCALE=large` adds the 10^5 and 10^6 scale curves.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp
BENCH_REQUIREMENTS := tests/bench/requirements.txt
BENCH_SCALE ?= small

# `make matrix`: the test subset on Python 3.10-3.13 and the lowest and newest dependencies, and on
# Redis 6.2 (tests/matrix/run.sh; MATRIX_CELLS=... picks cells). Its virtualenvs live here.
MATRIX_DIR := .venv-matrix

.PHONY: venv test coverage mutate interop demo bench lint clean node-deps matrix

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,testing,hiredis,lint]'
	touch $(STAMP)

venv: $(STAMP)

# The suite runs in TEST_WORKERS pytest-xdist processes (most tests wait on Redis, servers and
# subprocesses more than they compute, so twice the cores keeps both busy); TEST_WORKERS=0 runs
# it in this process, e.g. to debug one test. Work stealing: xdist's default hands each process
# a contiguous quarter of the suite up front, and the quarter holding the failover tests ran
# two minutes past the others; an idle process now takes half of the busiest one's queue.
TEST_WORKERS ?= 4

# `make coverage` (`make test COVERAGE=1`, as CI runs it): the same suite measured, line and
# branch of echomq/ (setup.cfg's coverage sections; the child processes it starts included), a
# report in the terminal and as HTML (build/coverage/html/index.html), and a failure under
# COVERAGE_FLOOR percent. Raise the floor as tests land (docs/coverage.md).
COVERAGE ?=
COVERAGE_FLOOR ?= 93
COVERAGE_ARGS = $(if $(COVERAGE),--cov=echomq --cov-report=term --cov-report=html --cov-fail-under=$(COVERAGE_FLOOR))

# The dashboard's browser tests drive Debian's Chromium (/usr/bin/chromium): installed here, once,
# before the pytest processes start (four of them racing for apt's lock would fail); a direct
# pytest run installs it from the browser fixture the same way (tests/support/browser.py).
test: $(STAMP)
	$(PY) -c "import sys; sys.path.insert(0, 'tests'); from support.browser import ensure_chromium; ensure_chromium()"
	$(if $(COVERAGE),rm -rf build/coverage && mkdir -p build/coverage)
	$(PY) -m pytest -m "not interop" -n $(TEST_WORKERS) --dist worksteal $(COVERAGE_ARGS) $(PYTEST_ARGS)

coverage:
	$(MAKE) test COVERAGE=1

# `make mutate MODULE=echomq/protocol/options.py`: mutation testing of one module against the
# unit tests (mutmut 3 in a scratch tree, build/mutation; tests/mutation/mutate.py), its score and
# the survivors not accepted as equivalent (tests/mutation/equivalent.txt). Without MODULE, every
# module of the pure layers in turn (docs/coverage.md has the scores). Not part of CI.
MUTATE_STAMP := $(VENV)/.mutmut-stamp
PURE_MODULES := $(sort $(wildcard echomq/protocol/*.py) echomq/worker/retry.py \
	$(wildcard echomq/schedule/cron/*.py) echomq/schedule/spec.py echomq/schedule/dates.py \
	echomq/transport/urls.py echomq/transport/refusals.py)

$(MUTATE_STAMP): $(STAMP)
	$(PY) -m pip install --quiet 'mutmut>=3.8,<4'
	touch $(MUTATE_STAMP)

mutate: $(MUTATE_STAMP)
	@for module in $(or $(MODULE),$(filter-out %/__init__.py,$(PURE_MODULES))); do \
		$(PY) tests/mutation/mutate.py $$module || exit 1; done

$(NODE_STAMP): $(INTEROP_DIR)/package.json $(INTEROP_DIR)/package-lock.json
	cd $(INTEROP_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

node-deps: $(NODE_STAMP)

interop: $(STAMP) $(NODE_STAMP)
	$(PY) -m pytest -m interop $(INTEROP_DIR) $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) -m echomq demo

$(BENCH_STAMP): $(BENCH_REQUIREMENTS)
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r $(BENCH_REQUIREMENTS)
	touch $(BENCH_STAMP)

bench: $(STAMP) $(NODE_STAMP) $(BENCH_STAMP)
	@for f in tests/bench/bench_*.py; do echo "== $$f"; BENCH_SCALE=$(BENCH_SCALE) $(PY) $$f || exit 1; done

matrix: $(STAMP)
	MATRIX_DIR=$(MATRIX_DIR) MAIN_PY=$(PY) PYTEST_ARGS="$(PYTEST_ARGS)" tests/matrix/run.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check echomq tests
	$(VENV)/bin/mypy echomq

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(MATRIX_DIR) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(INTEROP_DIR)/node_modules
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
