import dataclasses
from pathlib import Path

import numpy as np
import pytest

from codesign.report import figures
from codesign.report.figures import Design
from codesign.sweep.records import LayerResult, PointResult, WorkloadResult
from hw.config import preset


def _designs(n: int = 12, seed: int = 0) -> list[Design]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        block = int(rng.choice([8, 16, 32]))
        cfg = dataclasses.replace(preset("vta"), block_out=2 * block)
        cycles = int(rng.integers(1000, 5000))
        layer = LayerResult("conv1", "conv2d", "accel", 10_000, cycles=cycles, count=2,
                            stats={"gemm_busy_cycles": cycles // 2, "compute_busy_cycles": cycles // 2 + 10,
                                   "inp_load_bytes": 400, "wgt_load_bytes": 600})
        wl = WorkloadResult("net", 1.0, 1, 2 * cycles, {}, 1.0, (layer,))
        metrics = {"latency_cycles": 2.0 * cycles, "area_mm2": float(block) / 8 + rng.random(),
                   "energy_uj": float(rng.random() + 1)}
        out.append(Design(cfg, {"block_in": block}, PointResult(f"p{i}", (wl,), metrics, {}), on_front=i < 3))
    return out


def test_effect_groups_an_objective_by_parameter_value():
    designs = _designs()
    groups = figures.effect(designs, "block_in", "area_mm2")
    assert list(groups) == sorted(groups)
    assert sum(len(v) for v in groups.values()) == len(designs)
    for value, areas in groups.items():
        assert sorted(areas) == sorted(d.metric("area_mm2") for d in designs if d.params["block_in"] == value)


@pytest.mark.parametrize("color", [None, "block_in"])
def test_pareto_figure_plots_every_design_and_names_the_front(tmp_path: Path, color):
    designs = _designs()
    fig = figures.pareto_figure(designs, "latency_cycles", "area_mm2", color)
    ax = fig.axes[0]
    dots = [c for c in ax.collections if not c.get_label().startswith("on the")]
    (rings,) = [c for c in ax.collections if c.get_label().startswith("on the")]
    assert sum(len(c.get_offsets()) for c in dots) == len(designs)
    assert len(rings.get_offsets()) == 3
    # the staircase joins the designs no other beats in both plotted objectives
    (stairs,) = ax.lines
    xs, ys = stairs.get_data()
    for x, y in zip(xs, ys, strict=True):
        assert not any(d.metric("latency_cycles") < x and d.metric("area_mm2") < y for d in designs)
    assert "12 designs, 3 on the front" in ax.get_title()
    png, svg = figures.save(fig, tmp_path, "front")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:400]


def test_pareto_legend_names_sizes_in_kib():
    designs = [dataclasses.replace(d, params={"acc_bytes": (32 << 10) * (1 + i % 2)})
               for i, d in enumerate(_designs())]
    fig = figures.pareto_figure(designs, "latency_cycles", "area_mm2", "acc_bytes")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[:2] == ["acc_bytes=32Ki", "acc_bytes=64Ki"]


def test_roofline_places_each_layer_at_its_intensity_and_rate():
    d = _designs(1)[0]
    fig = figures.roofline_figure(d.config, d.result.workloads[0], d.point_id)
    (dots,) = fig.axes[0].collections
    layer = d.result.workloads[0].layers[0]
    x, y = dots.get_offsets()[0]
    assert x == pytest.approx(10_000 / 1000)
    assert y == pytest.approx(10_000 / layer.cycles)
    assert fig.axes[0].get_title() == f"Roofline of net on {d.point_id}"
    assert [t.get_text() for t in fig.axes[0].texts] == ["conv1"]


def test_breakdown_bars_add_up_to_each_layers_cycles():
    d = _designs(1)[0]
    wl = d.result.workloads[0]
    fig = figures.breakdown_figure([("A", wl)])
    heights = [p.get_height() for p in fig.axes[0].patches if p.get_gid() == "stacked"]
    assert sum(heights) == pytest.approx(wl.layers[0].cycles * wl.layers[0].count)


def test_effects_figure_has_a_panel_per_parameter_and_objective():
    fig = figures.effects_figure(_designs(), ["block_in"], ["latency_cycles", "area_mm2"])
    assert len(fig.axes) == 2
