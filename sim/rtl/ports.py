"""The flat top-level port list of `accel` (hw/rtl/CONTRACT.md), as data.

The C++ harness and the signal-level simulator drive these ports by name, so a design that
misses one, or has it with another width or direction, is rejected here with a clear message
before Verilator runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hw.config import AcceleratorConfig
from hw.errors import WorkbenchError
from sim.backend import Stats

COUNTER_BITS = 64
# The Stats fields, in order; the hardware exports each as `cnt_<field>`.
COUNTER_FIELDS: tuple[str, ...] = tuple(Stats.__dataclass_fields__)


@dataclass(frozen=True)
class Port:
    name: str
    direction: str  # "in" or "out", seen from the accelerator
    width: int


def contract_ports(cfg: AcceleratorConfig) -> list[Port]:
    """Every port of `accel` except `clk` and `rst`, which Amaranth adds."""
    ports = [Port("start", "in", 1), Port("insn_addr", "in", 32), Port("insn_count", "in", 32),
             Port("done", "out", 1)]
    ports += [Port(f"cnt_{name}", "out", COUNTER_BITS) for name in COUNTER_FIELDS]
    for ch, req_dir in (("ar", "out"), ("aw", "out")):
        back = "in" if req_dir == "out" else "out"
        ports += [Port(f"mem_{ch}_valid", req_dir, 1), Port(f"mem_{ch}_ready", back, 1),
                  Port(f"mem_{ch}_addr", req_dir, 32), Port(f"mem_{ch}_len", req_dir, 8)]
    ports += [Port("mem_r_valid", "in", 1), Port("mem_r_ready", "out", 1),
              Port("mem_r_data", "in", cfg.bus_bits), Port("mem_r_last", "in", 1)]
    ports += [Port("mem_w_valid", "out", 1), Port("mem_w_ready", "in", 1),
              Port("mem_w_data", "out", cfg.bus_bits), Port("mem_w_strb", "out", cfg.bus_bytes),
              Port("mem_w_last", "out", 1)]
    return ports


class PortMismatchError(WorkbenchError):
    """The design's top-level ports differ from hw/rtl/CONTRACT.md."""


def verilog_ports(text: str, module: str = "accel") -> dict[str, tuple[str, int]]:
    """{name: (direction, width)} of the ports declared in `module` of Amaranth's Verilog."""
    match = re.search(rf"^module {re.escape(module)}\((.*?)^endmodule", text, re.S | re.M)
    if match is None:
        raise PortMismatchError(f"the Verilog has no module {module!r}")
    ports = {}
    for m in _PORT_DECL.finditer(match.group(1)):
        width = int(m.group(2)) - int(m.group(3)) + 1 if m.group(2) else 1
        ports[m.group(4)] = ("in" if m.group(1) == "input" else "out", width)
    return ports


_PORT_DECL = re.compile(
    r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?(\w+)\s*;",
    re.M,
)


def check_ports(text: str, cfg: AcceleratorConfig) -> None:
    """Raise PortMismatchError naming every missing or mis-sized port of `accel` in `text`.

    Extra ports are allowed (debug outputs; the harness holds extra inputs at 0).
    """
    actual = verilog_ports(text)
    expected = {p.name: (p.direction, p.width) for p in contract_ports(cfg)}
    expected |= {"clk": ("in", 1), "rst": ("in", 1)}
    problems = [f"missing {n} ({d} {w})" for n, (d, w) in expected.items() if n not in actual]
    problems += [
        f"{n} is {actual[n][0]} {actual[n][1]}, expected {d} {w}"
        for n, (d, w) in expected.items()
        if n in actual and actual[n] != (d, w)
    ]
    if problems:
        raise PortMismatchError(
            f"module accel for config {cfg.name} does not match the port list of "
            f"hw/rtl/CONTRACT.md: {'; '.join(problems)}"
        )
