"""`gated_domain`: a clock domain that ticks only in the cycles a unit has work (clock gating)."""

from __future__ import annotations

from amaranth import ClockDomain, ClockSignal, Module, Signal
from amaranth.hdl import ValueLike


def gated_domain(m: Module, name: str, enable: ValueLike) -> None:
    """Add domain `name`: the `sync` clock, with an edge only in cycles where `enable` is high.

    An integrated clock gate: `enable` is sampled on the falling edge (so it is stable while
    the clock is high) and ANDed with the clock.  A register in `name` therefore behaves like a
    `sync` register with `enable` as its write enable.  The point is simulation speed as well
    as power: Verilator evaluates the logic behind a gated clock only when that clock ticks, so
    an idle unit (the GEMM array between micro-ops) costs nothing.
    """
    gate = f"{name}_gate"
    m.domains += [ClockDomain(gate, clk_edge="neg", reset_less=True),
                  ClockDomain(name, reset_less=True)]
    latched = Signal(name=f"{name}_enable")
    m.d[gate] += latched.eq(enable)
    m.d.comb += [ClockSignal(gate).eq(ClockSignal()), ClockSignal(name).eq(ClockSignal() & latched)]
