# Two commands do everything on a fresh machine:
#   make demo   install into ./.venv, ingest the demo corpus, run example queries, build the
#               knowledge graph and ask a local and a global question (offline)
#   make test   install the test tools, lint, type-check, build the docs (strict) and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# A CPU build of torch; on these machines pip takes it from local disk. The Dockerfile
# pins the same version (tests/workers/test_dockerfile.py checks).
TORCH_SPEC ?= torch==2.13.0
DEMO_DIR ?= .lore/demo
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: install demo test lint typecheck docs-check docs unit clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

demo: install
	rm -rf $(DEMO_DIR)
	$(BIN)/lore --data-dir $(DEMO_DIR) ingest examples/corpus/production --meta env=production
	$(BIN)/lore --data-dir $(DEMO_DIR) ingest examples/corpus/staging --meta env=staging
	$(BIN)/python -m examples.demo_queries --data-dir $(DEMO_DIR)
	$(BIN)/lore --data-dir $(DEMO_DIR) graph build
	$(BIN)/lore --data-dir $(DEMO_DIR) ask "What does PAY-5031 mean?"
	$(BIN)/lore --data-dir $(DEMO_DIR) ask "How do the services handle database timeouts?"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

docs-check: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $$(mktemp -d)

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

unit: install
	$(BIN)/pytest -q

test: lint typecheck docs-check unit

clean:
	rm -rf $(VENV) .lore .site .pytest_cache .mypy_cache .ruff_cache
