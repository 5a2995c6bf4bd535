# Two commands matter: `make run` and `make test`. Both set everything up first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python
WAREHOUSE ?= warehouse
CONFIG ?= config/pipeline.yml

.PHONY: setup run test test-fast test-explore bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/sqlcdc run --config $(CONFIG) --warehouse $(WAREHOUSE)

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not e2e"

# Property tests with fresh random examples, 20x as many (about 30 min); CI's are fixed.
test-explore: setup
	HYPOTHESIS_PROFILE=explore SQLCDC_PROPERTY_SCALE=20 $(PY) -m pytest -q tests/test_apply_changes_properties.py

bench: setup
	$(PY) benchmarks/bench_apply_changes.py

clean:
	rm -rf $(WAREHOUSE) .pytest_cache
