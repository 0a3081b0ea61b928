"""`ReadArbiter`: the one read master shared by all read clients, with bursts kept in flight."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from hw.rtl import bus


class ReadArbiter(wiring.Component):
    """Round-robin arbitration of `clients` read clients (`c0`, `c1`, ...) onto `mem`.

    AR: each cycle one requesting client is granted (round-robin, held while the bus stalls the
    request so address and length stay stable); its id is queued in an in-order FIFO of depth
    `inflight`, which bounds the read requests outstanding.  R: beats go to the client at the head
    of that FIFO; its `r_ready` is the bus's; `r_last` pops the head.  Zero cycles are added on
    either path (combinational routing).  A client must drain its R beats without waiting on any
    other client, otherwise the in-order bus could deadlock.
    """

    def __init__(self, *, clients: int, bus_bits: int, inflight: int):
        self.clients, self.bus_bits, self.inflight = clients, bus_bits, inflight
        members = {f"c{i}": In(bus.read_bus(bus_bits)) for i in range(clients)}
        members["mem"] = Out(bus.read_bus(bus_bits))
        super().__init__(members)

    def client(self, i: int) -> wiring.PureInterface:
        return getattr(self, f"c{i}")  # type: ignore[no-any-return]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n = self.clients
        m.submodules.ids = ids = fifo.SyncFIFO(width=max(1, (n - 1).bit_length()),
                                               depth=self.inflight)
        last = Signal(range(n), init=n - 1)  # the client granted last
        held = Signal()  # a request is on the bus and not yet accepted
        held_id = Signal(range(n))
        grant = Signal(range(n))
        any_req = Signal()
        self._pick(m, last, grant, any_req)
        sel = Signal(range(n))
        m.d.comb += sel.eq(grant)
        with m.If(held):
            m.d.comb += sel.eq(held_id)
        for i in range(n):
            c = self.client(i)
            with m.If(sel == i):
                m.d.comb += [
                    self.mem.ar_valid.eq(c.ar_valid & ids.w_rdy),
                    self.mem.ar_addr.eq(c.ar_addr), self.mem.ar_len.eq(c.ar_len),
                    c.ar_ready.eq(self.mem.ar_ready & ids.w_rdy),
                ]
        fire = self.mem.ar_valid & self.mem.ar_ready
        m.d.comb += [ids.w_en.eq(fire), ids.w_data.eq(sel)]
        with m.If(fire):
            m.d.sync += [last.eq(sel), held.eq(0)]
        with m.Elif(self.mem.ar_valid):
            m.d.sync += [held.eq(1), held_id.eq(sel)]
        self._route(m, ids)
        return m

    def _pick(self, m: Module, last: Signal, grant: Signal, any_req: Signal) -> None:
        """Round-robin: the first requesting client after `last`, wrapping around."""
        n = self.clients
        for lst in range(n):
            with m.If(last == lst):
                order = [(lst + k) % n for k in range(1, n + 1)]
                for i in reversed(order):  # later assignments win: first in order has priority
                    with m.If(self.client(i).ar_valid):
                        m.d.comb += [grant.eq(i), any_req.eq(1)]

    def _route(self, m: Module, ids: fifo.SyncFIFO) -> None:
        head = ids.r_data
        for i in range(self.clients):
            c = self.client(i)
            m.d.comb += [
                c.r_valid.eq(self.mem.r_valid & ids.r_rdy & (head == i)),
                c.r_data.eq(self.mem.r_data), c.r_last.eq(self.mem.r_last),
            ]
            with m.If(head == i):
                m.d.comb += self.mem.r_ready.eq(ids.r_rdy & c.r_ready)
        m.d.comb += ids.r_en.eq(self.mem.r_valid & self.mem.r_ready & self.mem.r_last)
