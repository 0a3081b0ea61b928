"""The timing model's fidelity to the RTL, pinned: MAPE and maximum error on a fixed corpus.

The corpus API is tested without Verilator; the comparisons need it (rtl marker).  The full
corpus runs in `codesign bench fidelity`; here a fixed, modest one keeps `make test` fast.
"""

from __future__ import annotations

import pytest

from hw.config import PRESETS
from sim import fidelity
from sim.fidelity import CorpusProgram, FidelityReport, ProgramFidelity
from sim.workloads import GemmTiling
from tests.sim.rtl.stub_accel import needs_verilator
from tests.sim.test_timing import STRESS

MAPE_LIMIT = 0.03
MAX_ERROR_LIMIT = 0.10
BUSY_LIMIT = 0.05


def test_corpus_has_every_class_and_spreads_the_dram_models():
    cfg = PRESETS["tiny"]
    programs = fidelity.corpus(cfg, extra={"random": lambda c: fidelity.random_programs(c, 40)})
    classes = {p.klass for p in programs}
    assert classes == {"conformance", "random"}
    random = [p for p in programs if p.klass == "random"]
    assert len(random) == 40
    assert {p.dram_latency_cycles for p in random} == set(fidelity.LATENCIES)
    assert {p.dram_bytes_per_cycle for p in random} == {1, 4, 8, 16}
    assert not any(p.program is None for p in programs)
    assert all(c.name != "deadlock" for c in programs)  # no cycles to compare


def test_extra_sources_join_and_classes_select():
    cfg = PRESETS["tiny"]
    gemm = {"gemm": lambda c: fidelity.gemm_programs(c, {"g": GemmTiling(4, 4, 4, 2, 2, 2, 2)})}
    programs = fidelity.corpus(cfg, classes=["gemm"], extra=gemm)
    assert [(p.name, p.klass, p.long) for p in programs] == [("g", "gemm", True)]
    with pytest.raises(ValueError, match=r"unknown program class\(es\) nope; known: conformance, gemm"):
        fidelity.corpus(cfg, classes=["nope"], extra=gemm)


def _row(name, klass, rtl, timing, *, long=False, seconds=(1.0, 0.01)):
    busy = dict.fromkeys(fidelity.BUSY, (timing - rtl) / rtl)
    return ProgramFidelity(name, klass, rtl, timing, busy, True, seconds[0], seconds[1], long, 8, 8)


def test_report_summaries():
    report = FidelityReport("tiny", [
        _row("a", "random", 100, 103), _row("b", "random", 200, 190),
        _row("g", "gemm", 1000, 1000, long=True, seconds=(2.0, 0.004)),
    ])
    assert report.classes()["random"] == {"count": 2, "mape": pytest.approx(0.04), "max_error": 0.05}
    assert report.mape == pytest.approx(0.08 / 3) and report.max_error == pytest.approx(0.05)
    assert report.speed_ratio == pytest.approx(500.0)
    assert report.busy_errors() == dict.fromkeys(fidelity.BUSY, 0.0)  # long programs only
    out = report.to_json()
    assert {"programs", "mape", "max_error", "speed_ratio"} <= set(out) and len(out["programs"]) == 3
    assert out["programs"][1]["error"] == pytest.approx(-0.05)


def _fixed_corpus(cfg) -> list[CorpusProgram]:
    programs = fidelity.conformance_programs(cfg)
    programs += fidelity.random_programs(cfg, 40, seed=1000)
    t = GemmTiling(16, 8, 4, 8, 4, 2, 2) if cfg.block_in >= 8 else GemmTiling(32, 16, 8, 8, 8, 4, 2)
    programs += fidelity.gemm_programs(cfg, {"gemm_vt2": t})
    return programs


@pytest.mark.parametrize("cfg", [PRESETS["vta"], PRESETS["tiny"], PRESETS["rect"], STRESS],
                         ids=["vta", "tiny", "rect", "stress"])
@pytest.mark.rtl
@needs_verilator[1]
def test_fidelity_on_a_fixed_corpus(cfg):
    report = fidelity.compare(cfg, _fixed_corpus(cfg), timing_repeats=1)
    worst = max(report.programs, key=lambda r: abs(r.error))
    assert report.mape <= MAPE_LIMIT, f"MAPE {report.mape:.4f}; worst {worst.name}: {worst.error:.4f}"
    assert report.max_error <= MAX_ERROR_LIMIT, f"worst {worst.name}: {worst.error:.4f}"
    assert report.functional_mismatches() == []
    assert all(e <= BUSY_LIMIT for e in report.busy_errors().values()), report.busy_errors()


@pytest.mark.slow
@pytest.mark.rtl
@needs_verilator[1]
def test_timing_is_a_hundred_times_faster_than_rtl_on_the_long_gemm():
    from codesign.bench.fidelity import long_gemms

    cfg = PRESETS["vta"]
    conv2 = long_gemms(cfg)[0]
    row = fidelity.compare_one(cfg, conv2, timing_repeats=5)
    assert row.cycles_timing == row.cycles_rtl
    assert row.seconds_rtl / row.seconds_timing >= 100
