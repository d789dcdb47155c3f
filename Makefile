# Two commands for a fresh machine (Python 3.11, Java 17):  make demo   and   make test
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: setup demo test test-all test-unit test-spark test-e2e lint format clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[local,quality,test,connect]"
	@rm -f $(VENV)/.installed-* && touch $@

demo: setup          ## generate CDC traffic and run bronze → silver → gold on local Spark + Delta
	$(VENV)/bin/lakecdc demo

test: setup          ## the tests CI runs: decoders, Spark + Delta, real Kafka broker, Great Expectations (not the `long` variants)
	$(VENV)/bin/pytest -q -m "not long" --durations=40

test-all: setup      ## every test, the `long` variants too (CI runs a short slice of each: `make test`)
	$(VENV)/bin/pytest -q --durations=40

lint: setup          ## ruff: lint and format check (CI runs it before the tests)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup        ## ruff: fix what can be fixed and format
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test-unit: setup
	$(VENV)/bin/pytest -q tests/unit

test-spark: setup
	$(VENV)/bin/pytest -q tests/spark

test-e2e: setup
	$(VENV)/bin/pytest -q tests/e2e

clean:
	rm -rf build .pytest_cache

.PHONY: fuzz
fuzz: setup          ## fuzz every decoder, each value class, the silver batch, gold's poison property and its row options over batch boundaries longer than CI does (LAKECDC_FUZZ_EXAMPLES per case; gold: a hundredth, a pipeline run each)
	LAKECDC_FUZZ_EXAMPLES=$${LAKECDC_FUZZ_EXAMPLES:-1000} $(VENV)/bin/pytest -q tests/unit/test_fuzz_decoders.py tests/unit/test_fuzz_values.py
	LAKECDC_FUZZ_EXAMPLES=$${LAKECDC_FUZZ_EXAMPLES:-1000} $(VENV)/bin/pytest -q tests/spark/test_gold_poison.py -k property
	LAKECDC_FUZZ_EXAMPLES=$${LAKECDC_FUZZ_EXAMPLES:-1000} $(VENV)/bin/pytest -q tests/spark/test_gold_row_options_batches.py -k one_two_or_many

.PHONY: test-airflow
test-airflow:        ## the Airflow DAGs in a real DagBag, in their own virtualenv (build/airflow-venv; not .venv)
	bash scripts/airflow_check.sh

.PHONY: docs
docs: setup          ## regenerate the generated parts of README.md and docs/*.md (configuration keys, formats, layers)
	$(VENV)/bin/python scripts/generate_docs.py

.PHONY: bench bench-quick
bench: setup         ## the benchmark at full sizes (hours on 2 cores): build/bench/results.json + PNG charts, a table of figures
	$(VENV)/bin/python -m bench

bench-quick: setup   ## the benchmark at about 1% of the sizes (a few minutes): proves the harness runs
	$(VENV)/bin/python -m bench --quick
