"""The conformance suite's timing-relevant checks on the timing backend.

The timing model computes no tensor values, so a case passes when the model runs it (or
raises the error the case expects, a deadlock for instance), reports a positive cycle count,
and its functional counters equal both the case's expected counters and fsim's, exactly.
"""

from __future__ import annotations

import re

from hw.program import ProgramError
from sim.backend import SimulationError
from sim.conformance import CASES, Case, CaseResult, SuiteReport
from sim.fsim import FunctionalSimulator
from sim.timing import TimingSimulator


def run_timing_case(backend: TimingSimulator, case: Case) -> CaseResult:
    try:
        built = case.build(backend.config)
    except (ProgramError, ValueError) as exc:
        return CaseResult(case.name, False, f"could not build: {exc}")
    try:
        stats = backend.run(built.program, built.inputs).stats
    except SimulationError as exc:
        if built.error and re.search(built.error, str(exc)):
            return CaseResult(case.name, True)
        return CaseResult(case.name, False, f"SimulationError: {exc}")
    if built.error:
        return CaseResult(case.name, False, f"expected an error matching {built.error!r}")
    if not stats.cycles or stats.cycles <= 0:
        return CaseResult(case.name, False, f"cycles is {stats.cycles}")
    got = stats.functional()
    for key, count in built.stats.items():
        if got.get(key) != count:
            return CaseResult(case.name, False, f"stat {key} is {got.get(key)}, expected {count}")
    reference = FunctionalSimulator(backend.config).run(built.program, built.inputs).stats.functional()
    for key, value in reference.items():
        if got[key] != value:
            return CaseResult(case.name, False, f"stat {key} is {got[key]}, fsim says {value}")
    return CaseResult(case.name, True)


def run_timing_suite(backend: TimingSimulator, names: list[str] | None = None) -> SuiteReport:
    selected = [c for c in CASES if names is None or c.name in names]
    return SuiteReport(backend.name, backend.config.name,
                       [run_timing_case(backend, c) for c in selected])  # fmt: skip
