"""`TokenCounter`: one dependency-token queue between two modules, as an up/down counter."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from hw.rtl import bus


class TokenCounter(wiring.Component):
    """A saturating token count of `bits` bits (VTA Chisel's Semaphore).

    `consumer.avail` is high while the count is non-zero, `producer.room` while it is below
    2**bits - 1.  A pop and a push in the same cycle cancel.  Both take effect at the clock edge;
    the producer must only push with room and the consumer only pop when avail.
    """

    def __init__(self, *, bits: int):
        self.bits = bits
        super().__init__({"producer": In(bus.token_push()), "consumer": In(bus.token_pop())})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        count = Signal(self.bits)
        m.d.comb += [
            self.consumer.avail.eq(count != 0),
            self.producer.room.eq(count != (1 << self.bits) - 1),
        ]
        with m.If(self.producer.push & ~self.consumer.pop):
            m.d.sync += count.eq(count + 1)
        with m.Elif(self.consumer.pop & ~self.producer.push):
            m.d.sync += count.eq(count - 1)
        return m
