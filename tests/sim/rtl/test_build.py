"""sim/rtl/build.py: the Verilator library cache survives damaged entries (no Verilator needed:
the build itself is replaced by a stub; the cache logic around it is the real one)."""

from __future__ import annotations

import os

import pytest

from hw.config import PRESETS
from sim.rtl import build

TINY = PRESETS["tiny"]


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path / "cache"))
    verilog = tmp_path / "accel.v"
    verilog.write_text("module accel; endmodule\n")
    monkeypatch.setattr(build, "verilator_version", lambda: "Verilator 5.006")
    monkeypatch.setattr(build, "verilog_for", lambda cfg, design=None: verilog)
    monkeypatch.setattr(build, "check_ports", lambda text, cfg: None)
    calls: list = []

    def stub(cfg, text, tmp):
        calls.append(cfg.name)
        (tmp / build.LIBRARY_NAME).write_bytes(f"library of {cfg.fingerprint()}".encode())

    monkeypatch.setattr(build, "_build", stub)
    return calls


@pytest.mark.parametrize("how", ["truncated", "empty", "another config's"])
def test_a_damaged_library_is_rebuilt(fake, how):
    path = build.library_for(TINY)
    other = PRESETS["vta"]
    if how == "another config's":  # the whole entry of vta, renamed onto tiny's key
        other_path = build.library_for(other)
        path.parent.rename(path.parent.with_name("old"))
        other_path.parent.rename(path.parent)
    else:
        path.write_bytes(path.read_bytes()[:5] if how == "truncated" else b"")
    os.utime(path, ns=(1, 1))
    assert build.library_for(TINY) == path
    assert path.read_bytes() == f"library of {TINY.fingerprint()}".encode()
    assert fake.count("tiny") == 2
