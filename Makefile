# EchoMQ-Python. `make test` works on a fresh machine: it builds .venv, installs the package
# with its test extras, and the test rig finds or starts a real Redis (tests/conftest.py).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
INTEROP_DIR := tests/interop
NODE_STAMP := $(INTEROP_DIR)/node_modules/.installed-stamp

.PHONY: venv test interop demo bench lint clean node-deps

$(STAMP): setup.cfg setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,hiredis,lint]'
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

bench: $(STAMP) $(NODE_STAMP)
	@for f in tests/bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check echomq tests
	$(VENV)/bin/mypy echomq

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	rm -rf $(INTEROP_DIR)/node_modules
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
