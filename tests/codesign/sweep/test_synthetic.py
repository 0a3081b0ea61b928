import dataclasses

import numpy as np

from codesign.sweep import synthetic
from codesign.sweep.pareto import non_dominated
from codesign.sweep.space import Point, load_space, resolve_space_path
from hw.config import resolve


def vta(**changes):
    return dataclasses.replace(resolve("vta", []), **changes)


def test_a_wider_core_is_faster_and_larger():
    narrow = synthetic.metrics(vta(block_in=8, block_out=8, wgt_bytes=8192, acc_bytes=32768))
    wide = synthetic.metrics(vta(block_in=32, block_out=32, wgt_bytes=131072, acc_bytes=32768))
    assert wide["latency_cycles"] < narrow["latency_cycles"] / 4
    assert wide["area_mm2"] > narrow["area_mm2"]


def test_larger_buffers_cost_area_and_save_dram_energy_on_a_narrow_core():
    small = synthetic.metrics(vta(block_in=16, block_out=16, wgt_bytes=32 * 1024, acc_bytes=16 * 1024))
    large = synthetic.metrics(vta(block_in=16, block_out=16, wgt_bytes=256 * 1024, acc_bytes=128 * 1024))
    assert large["area_mm2"] > small["area_mm2"]
    assert large["latency_cycles"] < small["latency_cycles"]


def test_the_metrics_are_consistent_and_the_small_space_trades_them_off():
    space = load_space(resolve_space_path("small"))
    values = []
    for point in space:
        m = synthetic.metrics(point.config)
        assert m["latency_ms"] == m["latency_cycles"] / (point.config.clock_mhz * 1e3)
        assert m["edp"] == m["energy_uj"] * m["latency_ms"] and min(m.values()) > 0
        values.append([m[k] for k in space.metrics])
    front = non_dominated(np.array(values))
    assert 10 <= front.sum() < len(values)  # a real three-way trade-off, not one winner


def test_evaluate_gives_the_points_result():
    point = Point(vta())
    result = synthetic.evaluate(point)
    assert result.point_id == point.id and result.metrics == synthetic.metrics(point.config)
    assert set(result.fidelity.values()) == {"estimate"}


def test_the_proxy_leaves_costs_out_so_it_never_exceeds_the_stand_in():
    for point in load_space(resolve_space_path("small")):
        cheap, full = synthetic.proxy_metrics(point.config), synthetic.metrics(point.config)
        assert 0 < cheap["latency_cycles"] <= full["latency_cycles"]
        assert 0 < cheap["energy_uj"] < full["energy_uj"]
        assert cheap["edp"] == cheap["energy_uj"] * cheap["latency_ms"]
