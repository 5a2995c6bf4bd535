# Two commands matter: `make run` and `make test`. Both set everything up first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python
WAREHOUSE ?= warehouse
CONFIG ?= config/pipeline.yml

.PHONY: setup run test test-fast test-explore coverage bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/sqlcdc run --config $(CONFIG) --warehouse $(WAREHOUSE)

# Two worker processes that take whole files (one SparkSession each; docs/testing.md has the figures),
# in collection order (--no-loadscope-reorder: xdist would otherwise hand out the files with the most
# tests first, and the few-test e2e files -- minutes each -- last).
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

test: setup
	$(PYTEST)

test-fast: setup
	$(PYTEST) -m "not e2e"

# Line coverage of src/sqlcdc (in the test processes; the `spark-pipelines` subprocesses are not traced).
coverage: setup
	$(PYTEST) --cov=sqlcdc --cov-report=term --cov-report=json:coverage.json

# Property tests with fresh random examples, 20x as many (about 30 min); CI's are fixed.
test-explore: setup
	HYPOTHESIS_PROFILE=explore SQLCDC_PROPERTY_SCALE=20 $(PY) -m pytest -q tests/test_apply_changes_properties.py

bench: setup
	$(PY) benchmarks/bench_apply_changes.py

clean:
	rm -rf $(WAREHOUSE) .pytest_cache
