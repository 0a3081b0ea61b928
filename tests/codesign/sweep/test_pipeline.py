"""The pipeline's area model is the analytical model's, computed once per config."""

import dataclasses

from codesign.ppa import area
from codesign.sweep import pipeline
from hw.config import PRESETS


def test_the_area_is_the_models_and_each_config_is_computed_once(monkeypatch):
    calls = []
    model = area.area_model

    def counted(cfg, **kwargs):
        calls.append(cfg)
        return model(cfg, **kwargs)

    monkeypatch.setattr(area, "area_model", counted)
    area_mm2 = pipeline.make_area()
    cfg, other = PRESETS["tiny"], dataclasses.replace(PRESETS["tiny"], wgt_bytes=8192)
    values = [area_mm2(cfg), area_mm2(other), area_mm2(cfg), area_mm2(dataclasses.replace(other))]
    assert values[0] == values[2] == model(cfg).total_mm2 and values[1] == values[3] != values[0]
    assert calls == [cfg, other]


def test_the_proxy_estimates_the_evaluations_workloads_and_a_stand_in_has_none(tiny_space):
    from types import SimpleNamespace

    from codesign.sweep.proxy import Proxy

    workloads = ["prepared"]
    proxy = pipeline.make_proxy(SimpleNamespace(evaluator=SimpleNamespace(workloads=workloads)), tiny_space)
    assert isinstance(proxy, Proxy) and proxy.workloads == workloads
    assert proxy.batch_policy == tiny_space.batch_policy
    assert pipeline.make_proxy(lambda point: None, tiny_space) is None


def test_calibration_configs_are_a_fixed_draw_of_the_spaces_feasible_points(tiny_space):
    feasible = {p.config.fingerprint() for p in tiny_space}
    drawn = pipeline.calibration_configs(tiny_space)
    assert len(drawn) == 8 == len({c.fingerprint() for c in drawn})
    assert {c.fingerprint() for c in drawn} <= feasible  # 9 of the 18 break the SRAM budget
    assert pipeline.calibration_configs(tiny_space) == drawn
    assert pipeline.calibration_configs(tiny_space, seed=1) != drawn
    every = pipeline.calibration_configs(tiny_space, count=100)
    assert {c.fingerprint() for c in every} == feasible


def test_calibration_configs_leave_the_area_budget_aside(tiny_space):
    tight = dataclasses.replace(tiny_space.constraints, max_area_mm2=1e-9)  # no area model to check it
    budgeted = dataclasses.replace(tiny_space, constraints=tight)
    drawn = pipeline.calibration_configs(budgeted, count=3)
    assert drawn == pipeline.calibration_configs(tiny_space, count=3)
