"""`Fetch`: streams the instructions from DRAM and routes them to the three command queues."""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.decode import insn_struct, log2
from hw.rtl.dma import BurstRequester, Unpacker

INSN_BYTES = isa.INSN_BITS // 8


class Fetch(wiring.Component):
    """Reads `insn_count` 128-bit instructions from byte address `insn_addr` after `go`.

    Bursts are only requested when the beat buffer has room for all their beats (credits), so
    the fetch client never holds the shared in-order read bus even when a command queue is
    full.  Each instruction is routed by `hw.isa.module_of`'s rule into the load, compute or
    store queue (SyncFIFOs of `cfg.cmd_queue_depth`); a full destination stalls fetch.
    Throughput: one instruction per cycle at most, and one bus beat per cycle.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        self.burst = min(cfg.max_burst_beats, 16)
        self.buffer_beats = 2 * self.burst
        cmd = stream.Signature(isa.INSN_BITS)
        super().__init__({
            "go": In(1), "insn_addr": In(bus.ADDR_BITS), "insn_count": In(32),
            "bus": Out(bus.read_bus(cfg.bus_bits)),
            "load_cmd": Out(cmd), "compute_cmd": Out(cmd), "store_cmd": Out(cmd),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.req = req = BurstRequester(
            elem_bytes=INSN_BYTES, bus_bytes=cfg.bus_bytes, max_burst_beats=self.burst, x_bits=32
        )
        m.submodules.beats = beats = fifo.SyncFIFO(width=cfg.bus_bits, depth=self.buffer_beats)
        m.submodules.unpack = unpack = Unpacker(elem_bits=isa.INSN_BITS, bus_bits=cfg.bus_bits)
        m.d.comb += [
            req.start.eq(self.go), req.dram_base.eq(self.insn_addr >> log2(INSN_BYTES)),
            req.y_size.eq(1), req.x_size.eq(self.insn_count), req.x_stride.eq(0),
        ]
        self._credits(m, req, beats)
        m.d.comb += [
            beats.w_en.eq(self.bus.r_valid), beats.w_data.eq(self.bus.r_data),
            self.bus.r_ready.eq(beats.w_rdy),
        ]
        wiring.connect(m, beats.r_stream, unpack.beat)
        self._route(m, unpack)
        return m

    def _credits(self, m: Module, req: BurstRequester, beats: fifo.SyncFIFO) -> None:
        """Issue a burst only when the beat buffer can take every beat already requested."""
        pending = Signal(range(self.buffer_beats + 1))
        beats_asked = req.req.len + 1
        fits = beats.level + pending + beats_asked <= self.buffer_beats
        m.d.comb += [
            self.bus.ar_valid.eq(req.req.valid & fits), req.req.ready.eq(self.bus.ar_ready & fits),
            self.bus.ar_addr.eq(req.req.addr), self.bus.ar_len.eq(req.req.len),
        ]
        asked = self.bus.ar_valid & self.bus.ar_ready
        got = self.bus.r_valid & self.bus.r_ready
        m.d.sync += pending.eq(pending + (asked * beats_asked) - got)

    def _route(self, m: Module, unpack: Unpacker) -> None:
        per_beat = unpack.per_beat
        count, index, first = Signal(32), Signal(32), Signal(32)
        with m.If(self.go):
            m.d.sync += [count.eq(self.insn_count), index.eq(0),
                         first.eq(self.insn_addr >> log2(INSN_BYTES))]
        m.d.comb += [unpack.idx.eq(first + index), unpack.row_last.eq(index == count - 1)]
        if per_beat == 1:
            m.d.comb += unpack.row_last.eq(0)
        depth = self.cfg.cmd_queue_depth
        queues = {}
        for name in ("load", "compute", "store"):
            q = fifo.SyncFIFO(width=isa.INSN_BITS, depth=depth)
            m.submodules[f"{name}_queue"] = queues[name] = q
            wiring.connect(m, q.r_stream, wiring.flipped(getattr(self, f"{name}_cmd")))
        insn = data.View(insn_struct(self.cfg, "mem"), unpack.elem.payload)
        is_store = insn.opcode == isa.Opcode.STORE
        is_load = (insn.opcode == isa.Opcode.LOAD) & (
            (insn.memory_type == isa.MemType.INP) | (insn.memory_type == isa.MemType.WGT)
        )
        dest = {"store": is_store, "load": is_load, "compute": ~is_store & ~is_load}
        for name, q in queues.items():
            m.d.comb += [q.w_data.eq(unpack.elem.payload),
                         q.w_en.eq(unpack.elem.valid & dest[name])]
            with m.If(dest[name]):
                m.d.comb += unpack.elem.ready.eq(q.w_rdy)
        with m.If(unpack.elem.valid & unpack.elem.ready):
            m.d.sync += index.eq(index + 1)
