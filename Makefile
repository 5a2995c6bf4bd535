# Two commands matter: `make run` and `make test`. Both set everything up first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python
WAREHOUSE ?= warehouse
CONFIG ?= config/pipeline.yml

.PHONY: setup run test test-fast bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/sqlcdc run --config $(CONFIG) --warehouse $(WAREHOUSE)

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not e2e"

bench: setup
	$(PY) benchmarks/bench_apply_changes.py

clean:
	rm -rf $(WAREHOUSE) .pytest_cache
