"""The conformance suite's timing-relevant checks on the timing backend.

The timing model computes no tensor values, so a case passes when the model runs it (or
raises the error the case expects, a deadlock for instance), reports a positive cycle count,
and its functional counters equal both the case's expected counters and fsim's, exactly.
"""

from __future__ import annotations

from sim.backend import Backend
from sim.conformance import CASES, Case, CaseResult, SuiteReport, attempt
from sim.fsim import FunctionalSimulator


def run_timing_case(backend: Backend, case: Case) -> CaseResult:
    outcome = attempt(backend, case)
    if isinstance(outcome, CaseResult):
        return outcome
    built, result = outcome
    stats = result.stats
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


def run_timing_suite(backend: Backend, names: list[str] | None = None) -> SuiteReport:
    selected = [c for c in CASES if names is None or c.name in names]
    return SuiteReport(backend.name, backend.config.name,
                       [run_timing_case(backend, c) for c in selected])
