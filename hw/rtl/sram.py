"""`Scratchpad`: one on-chip SRAM with a write port and synchronous read ports."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from hw.rtl import bus


class Scratchpad(wiring.Component):
    """`depth` elements of `width` bits, one write port `wr` and `read_ports` read ports `rd<i>`.

    Timing: a write is visible to a read issued in the next cycle; each read port returns
    mem[addr] one cycle after `addr` is presented.  With `transparent`, a read issued in the
    same cycle as a write to the same address returns the new data (write-first), which is what
    the compute pipeline relies on to forward accumulators without stalling.  `read_domain`
    clocks the read ports (a gated domain: data changes only in the cycles it ticks).
    """

    def __init__(self, *, depth: int, width: int, read_ports: int = 1, transparent: bool = False,
                 read_domain: str = "sync"):
        self.depth, self.width, self.read_ports = depth, width, read_ports
        self.transparent, self.read_domain = transparent, read_domain
        self.addr_bits = max(1, (depth - 1).bit_length())
        members = {"wr": In(bus.sram_write(self.addr_bits, width))}
        for i in range(read_ports):
            members[f"rd{i}"] = In(bus.sram_read(self.addr_bits, width))
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[])
        wp = mem.write_port()
        m.d.comb += [wp.en.eq(self.wr.en), wp.addr.eq(self.wr.addr), wp.data.eq(self.wr.data)]
        for i in range(self.read_ports):
            rp = mem.read_port(domain=self.read_domain,
                               transparent_for=(wp,) if self.transparent else ())
            port = getattr(self, f"rd{i}")
            m.d.comb += [rp.addr.eq(port.addr), port.data.eq(rp.data)]
        return m
