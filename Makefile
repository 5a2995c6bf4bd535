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

# Two worker processes (one SparkSession each), each taking whole files; the files with real pipeline
# runs are one unit, started first (tests/conftest.py); --no-loadscope-reorder keeps that order
# (xdist would sort the units by their number of tests and start the e2e files last).
# Every test of 10 s or more is listed with its time (docs/testing.md: where the time goes).
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=0 --durations-min=10

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
