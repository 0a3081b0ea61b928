import pytest

from codesign.ppa.area import FEATURE_COMPONENT, area_model, coefficients, logic_features, logic_ge
from codesign.ppa.sram import sram_cost
from codesign.ppa.table import PpaError
from hw.config import PRESETS

BASE = PRESETS["rect"]


@pytest.mark.parametrize("field, value", [
    ("batch", 4), ("block_in", 16), ("block_out", 32), ("uop_bytes", 8192), ("inp_bytes", 16384),
    ("wgt_bytes", 65536), ("acc_bytes", 65536), ("bus_bits", 256), ("mem_inflight", 16),
    ("max_burst_beats", 64), ("cmd_queue_depth", 128),
])
def test_area_grows_with_each_parameter(field, value):
    assert getattr(BASE, field) < value
    bigger = BASE.with_params(**{field: value})
    assert area_model(bigger).total_mm2 > area_model(BASE).total_mm2


def test_components_add_up_and_sram_comes_from_the_table():
    est = area_model(PRESETS["vta"])
    assert est.total_mm2 == pytest.approx(sum(est.components.values()))
    assert est.sram_mm2 == pytest.approx(sum(est.components[k] for k in ("uop", "inp", "wgt", "acc", "out"))
                                         + sram_cost(512 * 16, 128).area_mm2)
    # vta's acc buffer: 128 KB of 512-bit rows, a CACTI table point (0.3913 mm²).
    assert est.components["acc"] == pytest.approx(0.3913)
    assert est.logic_kge == pytest.approx(sum(logic_ge(PRESETS["vta"]).values()) / 1000)
    assert set(est.to_json()) == {"total_mm2", "logic_kge", "sram_mm2", "components", "node_nm"}


def test_logic_mm2_is_ge_times_nand2_area():
    est = area_model(BASE)
    ge = logic_ge(BASE)
    assert est.components["gemm"] == pytest.approx(ge["gemm"] * 0.798e-6)
    assert est.components["control"] == pytest.approx(ge["control"] * 0.798e-6)


def test_node_scaling():
    at45, at28 = area_model(BASE), area_model(BASE, node_nm=28)
    assert at28.total_mm2 == pytest.approx(at45.total_mm2 * 0.377)
    assert at28.logic_kge == at45.logic_kge  # gate equivalents are node-free
    assert at28.node_nm == 28


def test_features_and_coefficients_cover_each_other():
    assert set(logic_features(BASE)) == set(FEATURE_COMPONENT)
    coef = coefficients()
    assert set(coef) == set(FEATURE_COMPONENT)
    assert all(v >= 0 for v in coef.values())


def test_unknown_node():
    with pytest.raises(PpaError, match=r"^unknown node 5 nm; choices: 65, 45, "):
        area_model(BASE, node_nm=5)
