"""The shared fuzzer's own detectors, shown to fire: a foreign exception, a refusal over several
lines, a hang, an unbounded allocation, a native crash, and code a data file ran; and cases,
mutations and minimization seeded and deterministic."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from codesign.fuzz import engine
from codesign.fuzz.engine import Case, Kind, case_bytes, cases, fuzz, minimize, outcomes, run_cli, strict_json
from codesign.fuzz.mutators import mutate_bytes, pickled_member
from hw.errors import InputError


def _kind(check: engine.Check) -> Kind:
    return Kind("probe", ".bin", {"b": lambda: b"line one\nline two\nline three\n"},
                {"bytes": mutate_bytes}, check)


def _problems(kind: Kind, memory_bytes: int = engine.MEMORY_BYTES) -> list[str]:
    report = fuzz(kind, cases(kind, range(1)), memory_bytes=memory_bytes)
    return [f.problem.split(" (at ")[0] for f in report.findings]


def test_a_foreign_exception_is_a_finding() -> None:
    def explode(path: Path) -> str:
        raise KeyError("boom")
    assert _problems(_kind(explode)) == ["KeyError: 'boom'"]


def test_a_refusal_over_several_lines_is_a_finding() -> None:
    def two_lines(path: Path) -> str:
        raise InputError("first\nsecond")
    want = "AssertionError: InputError message is not one line: 'first\\nsecond'"
    assert _problems(_kind(two_lines)) == [want]


def test_a_one_line_refusal_is_not_a_finding() -> None:
    def refuse(path: Path) -> str:
        raise InputError(f"{path.name}: no")
    report = fuzz(_kind(refuse), cases(_kind(refuse), range(3)))
    assert (report.refused, report.findings) == (3, ())


def test_a_hang_is_a_finding_and_the_rest_still_run() -> None:
    def stall(path: Path) -> str:
        if path.name.endswith("-0.bin"):
            time.sleep(60)
        return "accepted"
    kind = _kind(stall)
    report = fuzz(kind, cases(kind, range(2)), case_seconds=1)
    assert [f.problem for f in report.findings] == ["hang (no result within the time limit)"]
    assert report.accepted == 1


def test_a_huge_allocation_is_a_finding() -> None:
    def hoard(path: Path) -> str:
        np.ones(1 << 34, np.uint8)  # 16 GiB
        return "accepted"
    assert _problems(_kind(hoard), memory_bytes=1 << 30) == ["out of memory (an unbounded allocation)"]


def test_a_native_crash_is_a_finding() -> None:
    def crash(path: Path) -> str:
        os.kill(os.getpid(), signal.SIGSEGV)
        return "accepted"
    assert _problems(_kind(crash)) == ["the process died (exit status -11)"]


def test_code_a_data_file_runs_is_a_finding() -> None:
    """A reader that unpickles (np.load with allow_pickle=True) runs the planted payload."""
    def unpickle(path: Path) -> str:
        np.load(io.BytesIO(pickled_member()), allow_pickle=True)
        return "accepted"
    assert _problems(_kind(unpickle)) == ["code execution (a data file ran code)"]


def test_minimize_keeps_the_problem_and_drops_the_rest() -> None:
    def needs_two(path: Path) -> str:
        if b"two" in path.read_bytes():
            raise KeyError("two")
        return "accepted"
    kind = _kind(needs_two)
    (result,) = outcomes(kind, [b"line one\nline two\nline three\n"])
    small = minimize(kind, b"line one\nline two\nline three\n", result.removeprefix("finding: "))
    assert small == b"line two\n"


def test_cases_are_seeded() -> None:
    kind = _kind(lambda path: "accepted")
    assert cases(kind, range(20)) == cases(kind, range(20))
    case = Case("probe", 7, "b", "bytes")
    assert case_bytes(kind, case) == case_bytes(kind, case)


def test_run_cli_gives_a_refusal_in_one_line(tmp_path: Path) -> None:
    assert run_cli(["config", "show", str(tmp_path / "nope.json")])[0].startswith(
        f"refused: '{tmp_path / 'nope.json'}' is neither a preset")
    result, out = run_cli(["config", "show", "tiny", "--json"])
    assert result == "accepted" and strict_json(out)["name"] == "tiny"  # type: ignore[index]


def test_strict_json_refuses_nan() -> None:
    with pytest.raises(AssertionError, match="the output is not JSON: it holds NaN"):
        strict_json('{"x": NaN}')
