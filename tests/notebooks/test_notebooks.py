"""Every notebook under notebooks/ executed as a reader would run it: its jupytext source made a
notebook, each cell run in a fresh kernel (nbclient) in a scratch folder where it writes its
figures. A cell that raises, its closing assertions included, fails the test."""

from __future__ import annotations

import ast
import shutil
import time
from pathlib import Path

import pytest

jupytext = pytest.importorskip("jupytext", reason="jupytext is a dev extra: pip install -e '.[dev]'")
nbclient = pytest.importorskip("nbclient", reason="nbclient is a dev extra: pip install -e '.[dev]'")

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("[0-9][0-9]_*.py"))
# the notebooks that run the Verilated RTL
RTL = {"01_cosimulate", "03_latency_hiding", "04_codesign_sweep"}
CELL_TIMEOUT_S = 600


def execute(source: Path | str, cwd: Path) -> object:
    """The notebook of a jupytext percent-format file (or its text), executed in `cwd`;
    raises nbclient's CellExecutionError at the first failing cell."""
    nb = jupytext.read(source) if isinstance(source, Path) else jupytext.reads(source, fmt="py:percent")
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return nb


def test_there_are_five_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_holds_no_library_logic_and_ends_with_assertions(path: Path):
    nb = jupytext.read(path)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    tree = ast.parse("\n".join(code))
    defined = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert not defined, f"{path.name} defines {defined}: library code belongs in the package"
    imports = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "codesign" in imports
    last = ast.parse(code[-1]).body
    asserts = [s for s in last if isinstance(s, ast.Assert)]
    assert len(asserts) >= 2 and isinstance(last[-1], ast.Assert), f"{path.name} ends with assertions"
    assert all(not c.get("outputs") for c in nb.cells), "sources hold no outputs"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem, marks=[pytest.mark.rtl] if p.stem in RTL else [])
                                  for p in NOTEBOOKS])
def test_notebook_runs_and_its_assertions_hold(path: Path, tmp_path: Path):
    if path.stem in RTL and shutil.which("verilator") is None:
        pytest.skip("verilator is not installed (make verilator): this notebook runs the RTL")
    start = time.perf_counter()
    execute(path, tmp_path)
    figures = sorted(p.name for p in tmp_path.rglob("*.png"))
    assert figures, f"{path.name} drew no figure"
    print(f"{path.stem}: {time.perf_counter() - start:.1f} s, figures {figures}")


def test_a_failing_assertion_fails_the_notebook(tmp_path: Path):
    source = "# %%\nfrom codesign import plots\n\n# %%\nassert plots.number(2000) == '3k'\n"
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="AssertionError"):
        execute(source, tmp_path)
