# EchoMQ-Python. `make test` works on a fresh machine: it builds .venv, installs the package
# with its test extras, and the test rig finds or starts a real Redis (tests/conftest.py).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
INTEROP_DIR := tests/interop
NODE_STAMP := $(INTEROP_DIR)/node_modules/.installed-stamp
# The peers tests/bench/bench_pool.py compares with (Celery, dramatiq): a virtualenv of their own,
# never the package's extras.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp
BENCH_REQUIREMENTS := tests/bench/requirements-pool.txt

.PHONY: venv test interop demo bench lint clean node-deps

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,testing,hiredis,lint]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -m "not interop" $(PYTEST_ARGS)

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
	@for f in tests/bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check echomq tests
	$(VENV)/bin/mypy echomq

clean:
	rm -rf $(VENV) $(BENCH_VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(INTEROP_DIR)/node_modules
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
