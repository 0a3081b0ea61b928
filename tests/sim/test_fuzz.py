"""The program fuzzer: fsim, the timing model and the RTL agree on mutated programs.

`make test` runs FAST_CASES cases on tiny (all three backends when Verilator is installed, else
fsim and timing); `make test-slow` runs SLOW_CASES more over four configs.  A failure names
the minimal case; add it to tests/sim/fuzz_corpus (`sim.fuzz.save`) once fixed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from hw.config import PRESETS
from sim.fuzz import FuzzCase, Fuzzer, Outcome, apply, build, judge, make_case, outcome, save
from sim.random_programs import random_program

TINY = PRESETS["tiny"]
CORPUS = Path(__file__).with_name("fuzz_corpus")
HAVE_RTL = shutil.which("verilator") is not None
FAST_CASES = 500
SLOW_CASES = 10_000


@pytest.fixture(scope="module")
def fuzzer() -> Fuzzer:
    return Fuzzer(TINY, rtl=HAVE_RTL)


def _failures(report) -> str:
    return "\n".join(f"{json.dumps(case.to_json())}: {why}" for case, why in report.failures[:5])


def test_mutated_programs_agree_on_the_three_backends(fuzzer):
    report = fuzzer.run(range(FAST_CASES))
    assert report.cases == FAST_CASES
    assert not report.failures, _failures(report)
    assert report.outcomes["ok"] > FAST_CASES // 5 and report.outcomes["refused"] > FAST_CASES // 5
    assert set(report.by_kind) == {"bits", "uop", "flip", "truncate", "swap"}
    assert report.max_cycle_error <= 0.10  # the fidelity corpus's bound (tests/sim/test_fidelity.py)


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.json")), ids=lambda p: p.stem)
def test_every_input_that_once_failed_now_agrees(fuzzer, path):
    case = FuzzCase.from_json(json.loads(path.read_text()))
    why, runs, _ = fuzzer.check(case)
    assert why is None, why
    assert "crash" not in {o.kind for o in runs.values()}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny", "vta", "rect"])
def test_many_mutated_programs_agree(name):
    cases = SLOW_CASES // 3 + 1
    report = Fuzzer(PRESETS[name], rtl=HAVE_RTL).run(range(10**6, 10**6 + cases))
    assert not report.failures, _failures(report)


def test_cases_are_plain_data_and_replay_identically():
    case = make_case(TINY, 17)
    assert make_case(TINY, 17) == case
    again = FuzzCase.from_json(json.loads(json.dumps(case.to_json())))
    assert again == case
    a, b = build(case, TINY), build(again, TINY)
    assert np.array_equal(a.program.insns, b.program.insns)


def test_apply_edits_exactly_the_named_bits():
    program = random_program(TINY, 3).program
    changed = apply(program, TINY, ({"kind": "bits", "insn": 1, "offset": 64, "width": 16,
                                     "value": 0xABCD},))
    assert int(changed.insns[1, 1]) & 0xFFFF == 0xABCD
    assert np.array_equal(np.delete(changed.insns, 1, axis=0), np.delete(program.insns, 1, axis=0))
    flipped = apply(program, TINY, ({"kind": "flip", "target": "insns", "bit": 130},))
    assert int(flipped.insns[1, 0]) ^ int(program.insns[1, 0]) == 4
    shorter = apply(program, TINY, ({"kind": "truncate", "count": 2},))
    assert len(shorter.insns) == 2 and shorter.insn_region.shape == (2, 2)


def test_the_oracle_catches_a_wrong_output_and_a_crash(fuzzer):
    rp = random_program(TINY, 5)
    good = outcome(fuzzer.backends["fsim"], rp)
    assert good.kind == "ok"
    wrong_dram = good.dram.copy()
    region = rp.program.region("C")
    wrong_dram[region.offset] ^= 1
    outputs = rp.program.read_outputs(wrong_dram)
    wrong = Outcome("ok", outputs=outputs, dram=wrong_dram, stats=good.stats)
    why, _ = judge(rp, TINY, {"fsim": good, "timing": good, "rtl": wrong}, fuzzer.seeded)
    assert why is not None and why.startswith("output 'C', DRAM byte")
    crash = Outcome("crash", "IndexError: boom")
    why, _ = judge(rp, TINY, {"fsim": good, "timing": crash, "rtl": good}, [])
    assert why == "timing crash: IndexError: boom"
    refused = Outcome("refused", "instruction #3: x", 3)
    why, _ = judge(rp, TINY, {"fsim": refused, "timing": good, "rtl": good}, [])
    assert why is not None and why.startswith("refusals differ")


def test_minimize_keeps_only_the_mutations_that_matter(fuzzer, monkeypatch):
    culprit = {"kind": "flip", "target": "insns", "bit": 7}
    case = FuzzCase("tiny", 1, ({"kind": "truncate", "count": 99}, culprit,
                                {"kind": "swap", "a": 0, "b": 0}))

    def check(c):
        return ("bad" if culprit in c.mutations else None), {}, False

    monkeypatch.setattr(fuzzer, "check", check)
    assert fuzzer.minimize(case).mutations == (culprit,)


def test_save_names_a_case_by_its_content(tmp_path):
    case = make_case(TINY, 3)
    path = save(case, tmp_path, "why it failed\nmore")
    assert path == save(case, tmp_path, "why it failed")
    data = json.loads(path.read_text())
    assert FuzzCase.from_json(data) == case and data["why"] == "why it failed"
