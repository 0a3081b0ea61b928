"""`Sequencer`: the token handshake every module runs around each instruction."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.rtl import bus


class Sequencer(wiring.Component):
    """Pop tokens, start, wait for completion, push tokens: VTA's per-instruction protocol.

    The head instruction is offered with `valid`, its token flags `pop_req`/`push_req` (one bit
    per port `pop<i>`/`push<i>`) and an extra `can_start` condition.  When every requested pop
    queue has a token, the sequencer pops them and pulses `start` (the module consumes the
    instruction and latches its fields in that cycle).  Then it waits for `done`, pushes the
    requested tokens (waiting for room) and pulses `retire`; the next instruction can start in
    the following cycle.  `busy` marks start/execute/push cycles, `stall` cycles spent waiting
    for a token or for room.
    """

    def __init__(self, *, pops: int, pushes: int):
        self.pops, self.pushes = pops, pushes
        members = {
            "valid": In(1), "can_start": In(1), "pop_req": In(max(1, pops)),
            "push_req": In(max(1, pushes)), "done": In(1),
            "start": Out(1), "busy": Out(1), "stall": Out(1), "retire": Out(1),
        }
        members.update({f"pop{i}": Out(bus.token_pop()) for i in range(pops)})
        members.update({f"push{i}": Out(bus.token_push()) for i in range(pushes)})
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        pushes = Signal(max(1, self.pushes))
        pop_ports = [getattr(self, f"pop{i}") for i in range(self.pops)]
        push_ports = [getattr(self, f"push{i}") for i in range(self.pushes)]
        pops_ok = Signal(init=1)
        room_ok = Signal(init=1)
        for i, p in enumerate(pop_ports):
            with m.If(self.pop_req[i] & ~p.avail):
                m.d.comb += pops_ok.eq(0)
        for i, p in enumerate(push_ports):
            with m.If(pushes[i] & ~p.room):
                m.d.comb += room_ok.eq(0)

        # `free`: no instruction holds the sequencer after this cycle, so the next can start now
        # (back to back: an instruction may start in the cycle the previous one retires).
        free = Signal()
        state = Signal(range(3))  # 0 WAIT, 1 EXEC, 2 PUSH
        finishing = Signal()
        m.d.comb += finishing.eq(((state == 1) & self.done) | (state == 2))
        with m.If(finishing):
            with m.If(room_ok):
                m.d.comb += [p.push.eq(pushes[i]) for i, p in enumerate(push_ports)]
                m.d.comb += [self.retire.eq(1), free.eq(1)]
                m.d.sync += state.eq(0)
            with m.Else():
                m.d.comb += self.stall.eq(1)
                m.d.sync += state.eq(2)
        m.d.comb += self.busy.eq((state == 1) | self.retire)
        with m.If(state == 0):
            m.d.comb += free.eq(1)
        with m.If(free & self.valid & self.can_start):
            with m.If(pops_ok):
                m.d.comb += [self.start.eq(1), self.busy.eq(1)]
                m.d.comb += [p.pop.eq(self.pop_req[i]) for i, p in enumerate(pop_ports)]
                m.d.sync += [pushes.eq(self.push_req), state.eq(1)]
            with m.Else():
                m.d.comb += self.stall.eq(1)
        return m
