from types import SimpleNamespace

import pytest

from codesign import plots
from codesign.plots.layers import PARTS, LayerCycles
from codesign.sweep.records import LayerResult


def _stats(cycles: int) -> dict:
    return {"cycles": cycles, "gemm_busy_cycles": cycles // 2, "compute_busy_cycles": cycles // 2 + 100,
            "compute_stall_cycles": cycles // 4, "load_busy_cycles": cycles // 3, "store_busy_cycles": 50}


def test_the_parts_add_up_to_the_cycles_and_load_store_are_kept_beside():
    layer = LayerCycles.of("conv", 1000, _stats(1000), count=3)
    assert (layer.gemm_busy, layer.other_compute, layer.compute_stall) == (1500, 300, 750)
    assert layer.gemm_busy + layer.other_compute + layer.compute_stall + layer.compute_idle == 3000
    assert (layer.load_busy, layer.store_busy) == (999, 150)


def test_missing_counters_count_as_zero_and_nothing_goes_negative():
    layer = LayerCycles.of("x", 100, {"gemm_busy_cycles": 80, "compute_stall_cycles": 90})
    assert layer.gemm_busy == 80 and layer.other_compute == 0
    assert layer.compute_stall == 20 and layer.compute_idle == 0  # stall capped by what is left


def test_from_steps_takes_accelerator_steps_of_every_record_kind():
    steps = [SimpleNamespace(name="a", where="accel", cycles=10, stats=_stats(10)),
             SimpleNamespace(name="h", where="host", cycles=None, stats=None),
             LayerResult("b", "conv2d", "accel", 5, cycles=20, stats=_stats(20), count=2),
             LayerResult("c", "conv2d", "host", 5, reason="shallow")]
    layers = plots.from_steps(steps)
    assert [(x.name, x.cycles) for x in layers] == [("a", 10), ("b", 40)]


def test_layers_figure_stacks_each_layer_to_its_cycles(tmp_path):
    layers = [LayerCycles.of(f"layer{i}", c, _stats(c)) for i, c in enumerate((1000, 4000, 2500))]
    fig = plots.layers_figure([("vta", layers), ("variant", layers[:2])], title="t")
    top, bottom = fig.axes
    stacked = [p for p in top.patches if p.get_gid() == "stacked"]
    assert len(stacked) == len(PARTS) * 3
    for i, layer in enumerate(layers):
        assert sum(p.get_height() for p in stacked[i::3]) == pytest.approx(layer.cycles)
    beside = [p.get_height() for p in top.patches if p.get_gid() == "beside"]
    assert beside == pytest.approx([x.load_busy for x in layers] + [x.store_busy for x in layers])
    assert fig.get_supylabel() == "cycles per inference" and "7,500 accelerator cycles" in top.get_title()
    assert top.get_ylabel() == bottom.get_ylabel() == ""  # one label for the shared scale
    assert top.get_ylim() == bottom.get_ylim()  # designs compare on one scale
    assert len(fig.legends[0].get_texts()) == 6
    path = plots.save_as(fig, tmp_path / "sub" / "layers.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_alternatives_are_titled_without_a_total_and_the_unit_can_change():
    layers = [LayerCycles.of(name, 1000, _stats(1000)) for name in ("default", "tile_h=2")]
    fig = plots.layers_figure([("three schedules", layers)], summary=False, ylabel="cycles per run")
    (ax,) = fig.axes
    assert ax.get_title() == "three schedules" and ax.get_ylabel() == "cycles per run"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["default", "tile_h=2"]
