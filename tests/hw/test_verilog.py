"""hw/verilog.py: Verilog generation and its cache (on a small stand-in design)."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import verilog
from hw.config import preset


class Counter(wiring.Component):
    """A few registers whose width follows the config: enough to see Verilog and its ports."""

    def __init__(self, cfg):
        self.cfg = cfg
        super().__init__({"start": In(1), "count": Out(cfg.bus_bits)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.start):
            m.d.sync += self.count.eq(self.count + 1)
        return m


def test_module_is_named_accel_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    cfg = preset("tiny")
    path = verilog.verilog_for(cfg, Counter)
    assert path.is_relative_to(tmp_path / "verilog")
    assert path.name == "accel.v"
    text = path.read_text()
    assert "module accel(" in text and "output [63:0] count;" in text

    def fail(*args):
        raise AssertionError("regenerated a cached config")

    monkeypatch.setattr(verilog, "generate", fail)
    assert verilog.verilog_for(cfg.with_params(dram_latency_cycles=3, name="x"), Counter) == path


def test_key_follows_hardware_and_design(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    cfg = preset("tiny")
    wide = cfg.with_params(bus_bits=128)
    assert verilog.cache_key(cfg, Counter) != verilog.cache_key(wide, Counter)
    assert verilog.cache_key(cfg, Counter).startswith(cfg.fingerprint() + "-")
    assert "output [127:0] count;" in verilog.verilog_for(wide, Counter).read_text()


def test_hw_verilog_command(tmp_path, monkeypatch, capsys):
    from codesign.cli import main

    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    monkeypatch.setattr(verilog, "default_design", lambda: Counter)
    out = tmp_path / "a.v"
    assert main(["hw", "verilog", "--config", "tiny", "--set", "bus_bits=256", "-o", str(out)]) == 0
    assert "output [255:0] count;" in out.read_text()
    assert main(["hw", "verilog", "--config", "tiny"]) == 0
    assert "module accel(" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["truncated", "empty", "another config's"])
def test_a_damaged_verilog_file_is_regenerated(tmp_path, monkeypatch, how):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    cfg, wide = preset("tiny"), preset("tiny").with_params(bus_bits=128)
    path = verilog.verilog_for(cfg, Counter)
    good = path.read_text()
    if how == "another config's":
        other = verilog.verilog_for(wide, Counter)
        path.write_text(other.read_text())
        (path.parent / ".accel.v.sha256").write_text((other.parent / ".accel.v.sha256").read_text())
    else:
        path.write_text(good[:40] if how == "truncated" else "")
    assert verilog.verilog_for(cfg, Counter) == path and path.read_text() == good
