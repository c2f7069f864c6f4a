# tokenmark developer entry points. `make run` and `make test` each work on a fresh clone:
# they create .venv and install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
# The demo: emulated timing, the llama3.1-8b Server preset of the newest published round,
# cut short by the `demo` profile (labelled on screen and in results.json).
RUN_ARGS ?= --benchmark llama3.1-8b --scenario Server --profile demo --qps 30

.PHONY: run test lint typecheck imports unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

run: $(STAMP)
	$(BIN)/tokenmark run $(RUN_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check tokenmark tests bench

typecheck: $(STAMP)
	$(BIN)/mypy tokenmark

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck imports unit

bench: $(STAMP)
	$(BIN)/python bench/runner_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
