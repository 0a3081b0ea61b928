"""The ONNX-model fuzzer: a small seeded budget in every run, a large one in `make test-slow`,
the corpus of files that once broke the promise replayed, and the fuzzer's own detectors
(a foreign exception, a hang, an unbounded allocation) shown to fire."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from codesign.cli import main
from codesign.fuzz import onnx_models
from codesign.fuzz.onnx_models import (
    LARGE_BASES,
    SMALL_BASES,
    Case,
    FuzzReport,
    case_bytes,
    cases,
    check_file,
    fuzz,
    minimize,
    outcomes,
)
from compiler.quant import calibrate

CORPUS = Path(__file__).parent / "onnx_corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text())
SMALL_BUDGET = 2000
LARGE_BUDGET = 5000  # 456 s on the loaded 2-core machine (seeds 2000-6999)


def _unexpected(report: FuzzReport, out: Path) -> list[str]:
    """One line per finding, naming its minimized file in `out` (to
    add to the corpus once fixed) and how to rebuild the original."""
    lines = []
    for f in report.findings:
        small = minimize(case_bytes(f.case), f.problem)
        (out / f"{f.case.name}.onnx").write_bytes(small)
        nodes = [n.op_type for n in onnx.load_from_string(small).graph.node]
        lines.append(f"{f.case.name}: {f.problem} -- minimized to {out / f.case.name}.onnx "
                     f"({len(small)} bytes, nodes {nodes}); original: case_bytes({f.case!r})")
    return lines


def test_small_budget_keeps_the_promise(tmp_path: Path) -> None:
    report = fuzz(cases(range(SMALL_BUDGET), SMALL_BASES))
    assert report.cases == SMALL_BUDGET
    assert _unexpected(report, tmp_path) == []
    # the budget exercises both sides of the promise: some mutants still compile, most are refused
    assert report.compiled >= 100 and report.refused >= 1600


@pytest.mark.slow
def test_large_budget_keeps_the_promise(tmp_path: Path) -> None:
    report = fuzz(cases(range(SMALL_BUDGET, SMALL_BUDGET + LARGE_BUDGET), LARGE_BASES), case_seconds=300)
    assert _unexpected(report, tmp_path) == []


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.endswith(".onnx")))
def test_corpus_replays(name: str, tmp_path: Path) -> None:
    entry = EXPECTED[name]
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (tmp_path / "weights.bin").write_bytes(bytes(1024))  # what "../weights.bin" would find
    path = model_dir / name
    shutil.copy(CORPUS / name, path)
    if entry["expect"] == "xfail":
        with pytest.raises((ValueError, ArithmeticError)) as info:
            check_file(path)
        assert type(info.value).__module__ == "builtins", entry["reason"]  # not yet a WorkbenchError
        pytest.xfail(entry["reason"])
    result = check_file(path)
    assert result.startswith("refused: ")
    assert re.search(entry["match"], result), result


def test_corpus_lists_every_file() -> None:
    assert sorted(p.name for p in CORPUS.glob("*.onnx")) == sorted(n for n in EXPECTED if n.endswith(".onnx"))


def test_minimize_keeps_the_problem_and_drops_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the calibrator's old crash put back (an OverflowError on a non-finite activation,
    the forked children inherit it), a case that overflows is a finding and minimizes."""
    original = calibrate.summarize

    def old_summarize(x: np.ndarray) -> calibrate.InputSummary:
        if not np.isfinite(x).all():
            raise OverflowError("cannot convert float infinity to integer")
        return original(x)

    monkeypatch.setattr(calibrate, "summarize", old_summarize)
    case = Case(42, "tiny_conv", "initializer")  # a 3e38 weight in fc overflows float32
    (problem,) = [f.problem for f in fuzz([case]).findings]
    small = minimize(case_bytes(case), problem)
    before = onnx.load_from_string(case_bytes(case)).graph
    assert len(onnx.load_from_string(small).graph.node) < len(before.node)
    assert outcomes([small]) == [f"finding: {problem}"]


def test_cases_are_seeded() -> None:
    first, again = cases(range(20)), cases(range(20))
    assert first == again
    assert case_bytes(first[3]) == case_bytes(again[3])
    assert {c.kind for c in cases(range(200))} == set(onnx_models.MUTATIONS)


def test_a_foreign_exception_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(path: Path) -> str:
        raise KeyError("boom")

    monkeypatch.setattr(onnx_models, "check_file", explode)
    report = fuzz([Case(0, "tiny_conv", "dim")])
    assert [f.problem.split(" (at ")[0] for f in report.findings] == ["KeyError: 'boom'"]


def test_a_hang_is_a_finding_and_the_rest_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def stall(path: Path) -> str:
        if "-0.onnx" in path.name:
            time.sleep(60)
        return "compiled"

    monkeypatch.setattr(onnx_models, "check_file", stall)
    report = fuzz([Case(0, "tiny_conv", "dim"), Case(1, "tiny_conv", "dim")], case_seconds=1)
    assert [f.problem for f in report.findings] == ["hang (no result within the time limit)"]
    assert report.compiled == 1


def test_a_huge_allocation_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def hoard(path: Path) -> str:
        np.ones(1 << 34, np.uint8)  # 16 GiB
        return "compiled"

    monkeypatch.setattr(onnx_models, "check_file", hoard)
    report = fuzz([Case(0, "tiny_conv", "dim")], memory_bytes=1 << 30)
    assert [f.problem for f in report.findings] == ["out of memory (an unbounded allocation)"]


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if n.endswith(".onnx")
                                        and e["expect"] == "refused"))
def test_codesign_compile_refuses_the_corpus_in_one_line(name: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(CORPUS / name, tmp_path / name)
    code = main(["compile", str(tmp_path / name), "-o", str(tmp_path / "out.cmodel")])
    err = capsys.readouterr().err
    assert code == 2
    # one error line; a model that gets as far as calibration is warned about synthetic inputs first
    (line,) = [x for x in err.splitlines() if not x.startswith("codesign compile: warning: ")]
    assert line.startswith("codesign compile: error: ")
    assert re.search(EXPECTED[name]["match"], line), err
