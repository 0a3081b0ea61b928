import pytest

from codesign.ppa.area import area_model
from codesign.ppa.energy import energy_model
from codesign.ppa.table import PpaError
from codesign.sweep.metrics import point_metrics
from codesign.sweep.records import WorkloadResult
from hw.config import PRESETS

CFG = PRESETS["tiny"].with_params(clock_mhz=200.0)
STATS_A = {"cycles": 4000, "gemm_uops": 100, "alu_uops": 20, "inp_load_bytes": 256,
           "wgt_load_bytes": 512, "out_store_bytes": 64, "load_insns": 4, "compute_insns": 6,
           "store_insns": 2}
STATS_B = {"cycles": 1000, "gemm_uops": 10, "alu_uops": 0, "inp_load_bytes": 64,
           "load_insns": 2, "compute_insns": 1, "store_insns": 1}


def workload(name, weight, batch, cycles, stats, fidelity="timing"):
    return WorkloadResult(name=name, weight=weight, batch=batch, cycles=cycles, stats=stats,
                          offloaded_macs_fraction=1.0, layers=(), fidelity=fidelity)


def test_weighted_per_inference_metrics():
    a = workload("a", 3.0, 2, 4000, STATS_A)  # 2000 cycles per inference
    b = workload("b", 1.0, 1, 1000, STATS_B)
    metrics, fidelity = point_metrics(CFG, [a, b])
    assert metrics["latency_cycles"] == pytest.approx(0.75 * 2000 + 0.25 * 1000)
    assert metrics["latency_ms"] == pytest.approx(1750 / 200e3)
    energy_a = energy_model(STATS_A, CFG).total_pj * 1e-6 / 2
    energy_b = energy_model(STATS_B, CFG).total_pj * 1e-6
    assert metrics["energy_uj"] == pytest.approx(0.75 * energy_a + 0.25 * energy_b)
    assert metrics["edp"] == pytest.approx(metrics["energy_uj"] * metrics["latency_ms"])
    assert metrics["area_mm2"] == pytest.approx(area_model(CFG).total_mm2)
    parts = [k for k in metrics if k.startswith("energy_uj.")]
    assert {"energy_uj.mac", "energy_uj.dram", "energy_uj.leakage"} <= set(parts)
    assert sum(metrics[k] for k in parts) == pytest.approx(metrics["energy_uj"])
    area_parts = [k for k in metrics if k.startswith("area_mm2.")]
    assert {"area_mm2.gemm", "area_mm2.wgt"} <= set(area_parts)
    assert sum(metrics[k] for k in area_parts) == pytest.approx(metrics["area_mm2"])
    assert fidelity["latency_cycles"] == fidelity["latency_ms"] == "timing"
    assert fidelity["area_mm2"] == fidelity["energy_uj"] == fidelity["edp"] == "estimate"
    assert set(fidelity) == set(metrics)


def test_weights_are_normalised():
    one = point_metrics(CFG, [workload("a", 1.0, 1, 500, STATS_B)])[0]
    scaled = point_metrics(CFG, [workload("a", 7.0, 1, 500, STATS_B)])[0]
    assert one == pytest.approx(scaled)


def test_latency_fidelity_is_the_lowest_of_the_workloads():
    _, fidelity = point_metrics(CFG, [workload("a", 1, 1, 10, STATS_B, "rtl"),
                                      workload("b", 1, 1, 10, STATS_B, "timing")])
    assert fidelity["latency_cycles"] == "timing"


def test_node_and_dram_pass_through():
    w = [workload("a", 1.0, 1, 1000, STATS_A)]
    at45, at7 = point_metrics(CFG, w)[0], point_metrics(CFG, w, node_nm=7, dram="hbm2")[0]
    assert at7["area_mm2"] == pytest.approx(at45["area_mm2"] * 0.059)
    assert at7["energy_uj.dram"] == pytest.approx(at45["energy_uj.dram"] * 3.9 / 8)


def test_refusals():
    with pytest.raises(PpaError, match=r"^a point needs at least one workload result to have metrics$"):
        point_metrics(CFG, [])
    with pytest.raises(PpaError, match=r"^workload weights must be non-negative with a positive sum, "
                                       r"not a=0.0, b=0.0$"):
        point_metrics(CFG, [workload("a", 0.0, 1, 1, STATS_B), workload("b", 0.0, 1, 1, STATS_B)])
    with pytest.raises(PpaError, match=r"^workload weights must be non-negative with a positive sum, "
                                       r"not a=-1.0, b=2.0$"):
        point_metrics(CFG, [workload("a", -1.0, 1, 1, STATS_B), workload("b", 2.0, 1, 1, STATS_B)])
