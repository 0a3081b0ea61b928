"""The store path: `OutReader` (out SRAM to elements), `Packer` (elements to W beats with byte
strobes), `StoreDMA` (2-D strided write to DRAM) and `StoreModule` (STORE instructions)."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.decode import insn_struct, log2
from hw.rtl.dma import BurstRequester
from hw.rtl.load import addr_bits, byte_count
from hw.rtl.sequencer import Sequencer

AW_AHEAD = 4  # bursts whose AW is accepted but whose W beats are not all sent


def elem_layout(elem_bits: int, per_beat: int) -> data.StructLayout:
    return data.StructLayout({"data": elem_bits, "idx": max(1, log2(per_beat)), "row_last": 1})


class OutReader(wiring.Component):
    """Reads `x_size * y_size` consecutive out elements from `sram_base` into `elem`.

    Each element carries its position in its bus word (`idx`) and whether it ends a DRAM row.
    A 4-entry FIFO behind the 1-cycle SRAM read keeps one element per cycle flowing under
    back-pressure.  `busy` until the last element has been read (not yet consumed).
    """

    DEPTH = 4

    def __init__(self, *, elem_bits: int, addr_bits: int, per_beat: int):
        self.elem_bits, self.addr_bits, self.per_beat = elem_bits, addr_bits, per_beat
        self.layout = elem_layout(elem_bits, per_beat)
        super().__init__({
            "start": In(1), "sram_base": In(16), "dram_base": In(32), "y_size": In(16),
            "x_size": In(16), "x_stride": In(16), "busy": Out(1), "pending": Out(1),
            "sram": Out(bus.sram_read(addr_bits, elem_bits)),
            "elem": Out(stream.Signature(self.layout)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.buf = buf = fifo.SyncFIFO(width=self.layout.size, depth=self.DEPTH)
        addr, x, x_size, rows_left = Signal(self.addr_bits), Signal(16), Signal(16), Signal(16)
        row_elem, stride, busy = Signal(32), Signal(16), Signal()
        with m.If(self.start):
            m.d.sync += [addr.eq(self.sram_base), x.eq(0), x_size.eq(self.x_size),
                         rows_left.eq(self.y_size), row_elem.eq(self.dram_base),
                         stride.eq(self.x_stride),
                         busy.eq((self.x_size != 0) & (self.y_size != 0))]
        in_flight = Signal()
        flags = Signal(self.layout)
        issue = busy & (buf.level + in_flight < self.DEPTH)
        m.d.sync += in_flight.eq(issue)
        m.d.comb += [self.sram.addr.eq(addr), self.busy.eq(busy),
                     self.pending.eq(busy | in_flight | buf.r_rdy)]
        with m.If(issue):
            m.d.sync += [addr.eq(addr + 1), x.eq(x + 1),
                         flags.idx.eq(row_elem + x), flags.row_last.eq(x == x_size - 1)]
            with m.If(x == x_size - 1):
                m.d.sync += [x.eq(0), rows_left.eq(rows_left - 1), row_elem.eq(row_elem + stride)]
                with m.If(rows_left == 1):
                    m.d.sync += busy.eq(0)
        out = Signal(self.layout)
        m.d.comb += [out.eq(flags), out.data.eq(self.sram.data),
                     buf.w_en.eq(in_flight), buf.w_data.eq(out)]
        wiring.connect(m, buf.r_stream, wiring.flipped(self.elem))
        return m


class Packer(wiring.Component):
    """Elements in, W beats out: several sub-word elements merged into one beat with byte
    strobes, or one element split into several beats.

    `beat` payload carries the data, the strobes and `row_end` (the last beat of a DRAM row).
    One output register: a beat per cycle when the consumer is ready.  `pending` while any
    element or beat is held.
    """

    def __init__(self, *, elem_bits: int, bus_bits: int):
        self.elem_bits, self.bus_bits = elem_bits, bus_bits
        self.per_beat = max(1, bus_bits // elem_bits)
        self.beat_layout = data.StructLayout({"data": bus_bits, "strb": bus_bits // 8,
                                              "row_end": 1})
        super().__init__({
            "elem": In(stream.Signature(elem_layout(elem_bits, self.per_beat))),
            "beat": Out(stream.Signature(self.beat_layout)), "pending": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        ob = Signal(self.beat_layout)
        ob_valid = Signal()
        ob_free = ~ob_valid | self.beat.ready
        m.d.comb += [self.beat.valid.eq(ob_valid), self.beat.payload.eq(ob)]
        with m.If(self.beat.ready):
            m.d.sync += ob_valid.eq(0)
        held = Signal()
        m.d.comb += self.pending.eq(ob_valid | held | self.elem.valid)
        if self.elem_bits < self.bus_bits:
            self._merge(m, ob, ob_valid, ob_free, held)
        elif self.elem_bits > self.bus_bits:
            self._split(m, ob, ob_valid, ob_free, held)
        else:
            m.d.comb += self.elem.ready.eq(ob_free)
            with m.If(self.elem.valid & ob_free):
                m.d.sync += [ob.data.eq(self.elem.payload.data), ob.strb.eq(-1),
                             ob.row_end.eq(self.elem.payload.row_last), ob_valid.eq(1)]
        return m

    def _merge(self, m: Module, ob: Signal, ob_valid: Signal, ob_free, held: Signal) -> None:  # type: ignore[no-untyped-def]
        eb, n = self.elem_bits, self.per_beat
        acc_data, acc_strb = Signal(self.bus_bits), Signal(self.bus_bits // 8)
        e = self.elem.payload
        merged_data = Cat(*(Mux(e.idx == p, e.data, acc_data[p * eb : (p + 1) * eb])
                            for p in range(n)))
        ones = Const((1 << (eb // 8)) - 1, eb // 8)
        merged_strb = Cat(*(Mux(e.idx == p, ones, acc_strb[p * eb // 8 : (p + 1) * eb // 8])
                            for p in range(n)))
        flush = (e.idx == n - 1) | e.row_last
        m.d.comb += [self.elem.ready.eq(~flush | ob_free), held.eq(acc_strb != 0)]
        with m.If(self.elem.valid & self.elem.ready):
            with m.If(flush):
                m.d.sync += [ob.data.eq(merged_data), ob.strb.eq(merged_strb),
                             ob.row_end.eq(e.row_last), ob_valid.eq(1),
                             acc_data.eq(0), acc_strb.eq(0)]
            with m.Else():
                m.d.sync += [acc_data.eq(merged_data), acc_strb.eq(merged_strb)]

    def _split(self, m: Module, ob: Signal, ob_valid: Signal, ob_free, held: Signal) -> None:  # type: ignore[no-untyped-def]
        n = self.elem_bits // self.bus_bits
        sr, left, row_last = Signal(self.elem_bits), Signal(range(n + 1)), Signal()
        m.d.comb += [held.eq(left != 0),
                     self.elem.ready.eq((left == 0) | ((left == 1) & ob_free))]
        with m.If((left != 0) & ob_free):
            m.d.sync += [ob.data.eq(sr[: self.bus_bits]), ob.strb.eq(-1),
                         ob.row_end.eq((left == 1) & row_last), ob_valid.eq(1),
                         sr.eq(sr >> self.bus_bits), left.eq(left - 1)]
        with m.If(self.elem.valid & self.elem.ready):
            m.d.sync += [sr.eq(self.elem.payload.data), left.eq(n),
                         row_last.eq(self.elem.payload.row_last)]


class StoreDMA(wiring.Component):
    """2-D strided store of out elements to DRAM: `x_size * y_size` consecutive out elements
    from `sram_base` go to element addresses `dram_base + y * x_stride + x`.

    AW bursts cover each row (cut at `max_burst_beats` and at 4 KiB boundaries, as
    `BurstRequester` does) and run at most AW_AHEAD bursts ahead of the W beats; W beats of a
    burst are only sent after its AW is accepted, and `w_last` marks the beat that ends it.
    Throughput: one beat per cycle (one element per cycle for sub-word elements).  `busy` from
    the cycle after `start` until the last W beat is accepted.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        self.addr_bits = addr_bits(cfg.out_depth)
        super().__init__({
            "start": In(1), "cmd": In(insn_struct(cfg, "mem")), "busy": Out(1),
            "bus": Out(bus.write_bus(cfg.bus_bits)),
            "sram": Out(bus.sram_read(self.addr_bits, cfg.out_elem_bits)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.req = req = BurstRequester(
            elem_bytes=cfg.out_elem_bytes, bus_bytes=cfg.bus_bytes,
            max_burst_beats=cfg.max_burst_beats)
        m.submodules.pack = pack = Packer(elem_bits=cfg.out_elem_bits, bus_bits=cfg.bus_bits)
        m.submodules.reader = reader = OutReader(
            elem_bits=cfg.out_elem_bits, addr_bits=self.addr_bits, per_beat=pack.per_beat
        )
        m.d.comb += [req.start.eq(self.start), reader.start.eq(self.start)]
        for name in ("dram_base", "y_size", "x_size", "x_stride"):
            m.d.comb += [getattr(req, name).eq(getattr(self.cmd, name)),
                         getattr(reader, name).eq(getattr(self.cmd, name))]
        m.d.comb += reader.sram_base.eq(self.cmd.sram_base)
        wiring.connect(m, reader.sram, wiring.flipped(self.sram))
        wiring.connect(m, reader.elem, pack.elem)
        # the `len` of each burst whose AW is accepted and whose W beats are not all sent: the
        # W side ends a burst (w_last) after that many beats, wherever the requester cut it
        m.submodules.lens = lens = fifo.SyncFIFO(width=bus.LEN_BITS, depth=AW_AHEAD)
        b = self.bus
        m.d.comb += [
            b.aw_valid.eq(req.req.valid & lens.w_rdy), req.req.ready.eq(b.aw_ready & lens.w_rdy),
            b.aw_addr.eq(req.req.addr), b.aw_len.eq(req.req.len),
            lens.w_en.eq(b.aw_valid & b.aw_ready), lens.w_data.eq(req.req.len),
        ]
        beat_no = Signal(range(cfg.max_burst_beats))
        beat = pack.beat.payload
        m.d.comb += [
            b.w_valid.eq(pack.beat.valid & lens.r_rdy),
            pack.beat.ready.eq(b.w_ready & lens.r_rdy),
            b.w_data.eq(beat.data), b.w_strb.eq(beat.strb),
            b.w_last.eq(beat_no == lens.r_data),
            lens.r_en.eq(b.w_valid & b.w_ready & b.w_last),
        ]
        with m.If(b.w_valid & b.w_ready):
            m.d.sync += beat_no.eq(Mux(b.w_last, 0, beat_no + 1))
        m.d.comb += self.busy.eq(req.busy | reader.pending | pack.pending | lens.r_rdy)
        return m


class StoreModule(wiring.Component):
    """Pops `cmd` STORE instructions in order and runs the StoreDMA for each.

    Tokens: pop_prev pops compute->store (`c2s`), push_prev pushes store->compute (`s2c`) after
    the last W beat is accepted by memory: `writes_pending` (from the top level's register
    slices) holds the instruction until they have passed every AW and W beat on.  x_size == 0
    is a NOP.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(isa.INSN_BITS)),
            "bus": Out(bus.write_bus(cfg.bus_bits)),
            "out": Out(bus.sram_read(addr_bits(cfg.out_depth), cfg.out_elem_bits)),
            "c2s": Out(bus.token_pop()), "s2c": Out(bus.token_push()),
            "writes_pending": In(1),
            "ev_busy": Out(1), "ev_stall": Out(1), "ev_insn": Out(1), "ev_out_bytes": Out(32),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.seq = seq = Sequencer(pops=1, pushes=1)
        m.submodules.dma = dma = StoreDMA(self.cfg)
        insn = data.View(insn_struct(self.cfg, "mem"), self.cmd.payload)
        m.d.comb += [
            seq.valid.eq(self.cmd.valid), seq.can_start.eq(1),
            seq.pop_req.eq(insn.pop_prev), seq.push_req.eq(insn.push_prev),
            seq.done.eq(~dma.busy & ~self.writes_pending), self.cmd.ready.eq(seq.start),
            dma.cmd.eq(insn), dma.start.eq(seq.start & (insn.x_size != 0)),
            self.ev_busy.eq(seq.busy), self.ev_stall.eq(seq.stall), self.ev_insn.eq(seq.start),
        ]
        with m.If(seq.start):
            m.d.comb += self.ev_out_bytes.eq(byte_count(insn, self.cfg.out_elem_bytes))
        wiring.connect(m, seq.pop0, wiring.flipped(self.c2s))
        wiring.connect(m, seq.push0, wiring.flipped(self.s2c))
        wiring.connect(m, dma.bus, wiring.flipped(self.bus))
        wiring.connect(m, dma.sram, wiring.flipped(self.out))
        return m
