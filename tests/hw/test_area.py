"""hw/area.py: Yosys area on the harness stub (the real design takes minutes to synthesize)."""

from __future__ import annotations

import json

import pytest

from hw import area
from hw.config import preset
from tests.sim.rtl.stub_accel import NARROW, StubAccel


def test_sram_bits_from_the_config():
    cfg = preset("tiny")
    assert area.sram_bits(cfg) == 8 * (1024 + 1024 + 4096 + 4096 + 4096 // 4)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CODESIGN_CACHE", str(cache))
        first = area.area_for(NARROW, StubAccel)
        mp.setattr(area, "synthesize", lambda *a, **k: pytest.fail("synthesized a cached config"))
        again = area.area_for(NARROW.with_params(name="again"), StubAccel)
    assert again == area.AreaReport(**{**first.to_json(), "config": "again"})
    return first


def test_report_counts_logic_fpga_and_sram(report):
    assert report.config == "tiny" and report.fingerprint == NARROW.fingerprint()
    assert 500 < report.logic_cells < 50_000
    assert report.transistors > 4 * report.logic_cells
    assert report.lut > 0 and report.ff > 6 * 64  # the six live 64-bit counters alone
    assert report.bram + report.lutram > 0  # the stub's 64-beat buffer
    assert report.sram_bits == area.sram_bits(NARROW)
    assert set(json.loads(json.dumps(report.to_json()))) >= {
        "config", "fingerprint", "logic_cells", "transistors", "lut", "ff", "dsp", "bram",
        "sram_bits", "seconds"}


def test_yosys_failure_is_reported(tmp_path):
    bad = tmp_path / "accel.v"
    bad.write_text("module accel(input clk); this is not verilog\nendmodule\n")
    with pytest.raises(area.AreaError, match=r"yosys \(generic\) failed on .*accel.v with exit "
                       r"status 1:\n.*ERROR"):
        area.synthesize(NARROW, bad)


def test_hw_area_command(tmp_path, monkeypatch, capsys):
    from codesign.cli import main
    from hw import verilog

    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    monkeypatch.setattr(verilog, "default_design", lambda: StubAccel)
    stub = area.AreaReport("tiny", NARROW.fingerprint(), 1, 2, 3, 4, 5, 0.5, 6, 7, 8.0)
    efforts = []
    monkeypatch.setattr(area, "synthesize", lambda cfg, path, effort: efforts.append(effort) or stub)
    assert main(["hw", "area", "--config", "tiny", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == stub.to_json()
    assert main(["hw", "area", "--config", "tiny"]) == 0
    assert "transistors  2" in capsys.readouterr().out
    assert main(["hw", "area", "--config", "tiny", "--effort", "full"]) == 0
    assert efforts == ["fast", "full"]  # the second fast call came from the cache


def test_unknown_effort_is_an_error():
    with pytest.raises(ValueError, match="area effort must be one of fast, full, not 'max'"):
        area.area_for(NARROW, StubAccel, effort="max")


@pytest.mark.parametrize("damage", ["", "{\"lut\": ", "[1, 2]", "{\"nope\": 1}"])
def test_a_damaged_area_report_is_synthesized_again(tmp_path, monkeypatch, damage):
    from hw import verilog

    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    monkeypatch.setattr(verilog, "default_design", lambda: StubAccel)
    stub = area.AreaReport("tiny", NARROW.fingerprint(), 1, 2, 3, 4, 5, 0.5, 6, 7, 8.0)
    calls = []
    monkeypatch.setattr(area, "synthesize", lambda cfg, path, effort: calls.append(effort) or stub)
    assert area.area_for(NARROW) == stub
    (path,) = (tmp_path / "area").glob("*.json")
    path.write_text(damage)
    assert area.area_for(NARROW) == stub and len(calls) == 2
    if damage.startswith("{\"nope"):  # a valid checksum over a wrong document is no better
        from hw.cache import write_checked

        write_checked(path, damage)
        assert area.area_for(NARROW) == stub and len(calls) == 3
