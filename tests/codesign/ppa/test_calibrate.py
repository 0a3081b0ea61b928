import json

import pytest

from codesign.ppa import calibrate
from codesign.ppa.area import FEATURE_COMPONENT, logic_features
from codesign.ppa.sample import FIT, HELD_OUT
from codesign.ppa.yosys_sample import cell_ge, gate_equivalents


def synthetic(cfg, coef):
    ge = sum(coef[k] * v for k, v in logic_features(cfg).items())
    return {"fingerprint": cfg.fingerprint(), "params": cfg.hardware_params(), "ge": ge,
            "cells": {}, "transistors": 0, "seconds": 0.0, "effort": "fast"}


COEF = {name: float(i + 1) * 10 for i, name in enumerate(FEATURE_COMPONENT)}


def test_fit_recovers_a_linear_model():
    measurements = [synthetic(cfg, COEF) for cfg in FIT + HELD_OUT]
    assert calibrate.fit(measurements) == pytest.approx(COEF, rel=1e-3)


def test_recalibrate_measures_each_config_once_and_keeps_the_split(tmp_path):
    path = tmp_path / "cal.json"
    calls = []

    def measure(cfg):
        calls.append(cfg.name)
        return synthetic(cfg, COEF)

    data = calibrate.recalibrate(path=path, measure=measure, log=lambda _: None)
    assert sorted(calls) == sorted(c.name for c in FIT + HELD_OUT)
    assert json.loads(path.read_text()) == data
    split = {m["name"]: m["split"] for m in data["measurements"]}
    assert {n for n, s in split.items() if s == "held_out"} == {c.name for c in HELD_OUT}
    assert data["coefficients"] == pytest.approx(COEF, rel=1e-3)
    calls.clear()
    calibrate.recalibrate(path=path, measure=measure, log=lambda _: None)
    assert calls == []  # all measured already, on this design
    calibrate.recalibrate(path=path, measure=measure, log=lambda _: None, remeasure=True)
    assert len(calls) == len(FIT + HELD_OUT)


def test_committed_calibration_is_the_fit_of_its_own_measurements():
    data = calibrate.load()
    fitted = [m for m in data["measurements"] if m["split"] == "fit"]
    held = [m for m in data["measurements"] if m["split"] == "held_out"]
    assert len(held) >= 8
    assert not {m["fingerprint"] for m in fitted} & {m["fingerprint"] for m in held}
    assert data["coefficients"] == pytest.approx(calibrate.fit(fitted), abs=1e-3)
    for m in data["measurements"]:
        assert m["ge"] == pytest.approx(gate_equivalents(m["cells"]), abs=0.01)


def test_sample_sizes():
    assert len(HELD_OUT) >= 8
    assert not {c.fingerprint() for c in FIT} & {c.fingerprint() for c in HELD_OUT}


def test_cell_weights():
    # energy_area.md §5.3 (2): Nangate45 X1 area over NAND2_X1.
    assert cell_ge("$_NAND_") == 1.0
    assert cell_ge("$_XOR_") == 2.0
    assert cell_ge("$_MUX_") == 2.33
    assert cell_ge("$_DFF_P_") == 5.67
    assert cell_ge("$_DFFE_PP_") == 8.0
    assert cell_ge("$_SDFF_PP0_") == 7.0
    assert cell_ge("$_SDFFE_PP0P_") == 9.3
    assert gate_equivalents({"$_NAND_": 3, "$_DFF_P_": 2, "$mem_v2": 5, "$scopeinfo": 9}) == \
        pytest.approx(3 + 2 * 5.67)
    with pytest.raises(KeyError):
        cell_ge("$_FANCY_")


@pytest.mark.slow
def test_measure_reproduces_the_committed_tiny_measurement():
    from codesign.ppa.yosys_sample import measure

    tiny = next(c for c in FIT if c.name == "s1x4x4")
    committed = next(m for m in calibrate.load()["measurements"] if m["name"] == "s1x4x4")
    assert measure(tiny)["cells"] == committed["cells"]
