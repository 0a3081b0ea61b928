"""Every fuzzed file kind (configs, npz inputs, tuning logs, sweep spaces and stores, .cmodel
files): a small seeded budget in every run, a large one in `make test-slow`, and the corpus of
files that once broke the promise replayed with the message each must give now."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from codesign.fuzz.engine import cases, fuzz, run_case

from .kinds import CORPUS, EXPECTED, KINDS, unexpected

# cases per kind in `make test` (~25 s of CPU together on the 2-core machine) and in `make test-slow`
SMALL = {"config": 300, "npz": 500, "tuning-log": 400, "cpu-tuning-log": 400, "space": 300, "store": 300,
         "cmodel": 40, "tuning-cache": 100,  # the cache: SQLite commits, ~80 ms of wall time a case
         "store-report": 6}  # `codesign report` draws its figures: ~2 s a case
LARGE = {name: 10 * n for name, n in SMALL.items()} | {"store-report": 150}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_small_budget_keeps_the_promise(name: str, tmp_path: Path) -> None:
    kind = KINDS[name]
    report = fuzz(kind, cases(kind, range(SMALL[name])))
    assert report.cases == SMALL[name]
    assert unexpected(kind, report, tmp_path) == []
    if name == "tuning-cache":  # a damaged cache is never refused: moved aside and rebuilt
        assert report.accepted == report.cases
        return
    # both sides of the promise are exercised: some mutants are read, many are refused
    assert report.accepted >= 1
    assert report.refused >= SMALL[name] // 3 or SMALL[name] < 40  # a handful may all be read


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_large_budget_keeps_the_promise(name: str, tmp_path: Path) -> None:
    kind = KINDS[name]
    report = fuzz(kind, cases(kind, range(SMALL[name], SMALL[name] + LARGE[name])), case_seconds=120)
    assert unexpected(kind, report, tmp_path) == []


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_replays(name: str, tmp_path: Path) -> None:
    entry = EXPECTED[name]
    kind = KINDS[entry["kind"]]
    shutil.copy(CORPUS / name, tmp_path / name)
    result = run_case(kind, (CORPUS / name).read_bytes(), tmp_path)
    if entry.get("expect") == "accepted":  # a damaged cache is moved aside and rebuilt
        assert result == "accepted"
        return
    assert result.startswith("refused: ")
    assert re.search(entry["match"], result), result


def test_corpus_lists_every_file() -> None:
    assert sorted(p.name for p in CORPUS.iterdir() if p.name != "expected.json") == sorted(EXPECTED)
    assert {e["kind"] for e in EXPECTED.values()} == set(KINDS)
