"""The 2-D read DMA: burst requests, beat-to-element unpacking, and the SRAM writer with padding.

Element sizes are powers of two and may be smaller than a bus word (several elements per beat),
equal to it, or several beats long; `Unpacker` handles all three.  A DMA may also load a second,
narrow element format whose lanes it sign-extends to the SRAM's (`Widening`, for LOAD ACC_8BIT).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw.config import BURST_BOUNDARY_BYTES
from hw.rtl import bus
from hw.rtl.decode import lanes, log2

ADDR = bus.ADDR_BITS


def burst_request() -> wiring.Signature:
    """A burst request (AR or AW): byte `addr` aligned to the bus word, `len` = beats - 1."""
    return wiring.Signature({"valid": Out(1), "ready": In(1), "addr": Out(ADDR),
                             "len": Out(bus.LEN_BITS)})


class BurstRequester(wiring.Component):
    """Turns a 2-D element pattern into bus bursts, one row after the other.

    On `start`, latches rows of `x_size` elements of `elem_bytes` at element addresses
    `dram_base + y * x_stride` (y < `y_size`).  Each row covers the bus words from its first to its
    last byte and is cut into bursts of at most `max_burst_beats`, and also where it crosses a
    `BURST_BOUNDARY_BYTES` (4 KiB) boundary: AXI forbids a burst across one, so a burst ends at
    the boundary and the next begins there.  `busy` stays high until the
    last burst is accepted.  Timing: one setup cycle per row, then one burst per cycle that
    `req.ready` allows.  Nothing is requested when x_size or y_size is 0.  With
    `narrow_elem_bytes`, elements are that size while the `narrow` input is high (it must hold
    from the cycle after `start` until `busy` falls).
    """

    def __init__(self, *, elem_bytes: int, bus_bytes: int, max_burst_beats: int,
                 x_bits: int = 16, narrow_elem_bytes: int | None = None):
        self.elem_bytes, self.bus_bytes, self.max_burst = elem_bytes, bus_bytes, max_burst_beats
        self.narrow_elem_bytes = narrow_elem_bytes
        members = {
            "start": In(1), "dram_base": In(ADDR), "y_size": In(16), "x_size": In(x_bits),
            "x_stride": In(16), "busy": Out(1), "req": Out(burst_request()),
        }
        if narrow_elem_bytes is not None:
            members["narrow"] = In(1)
        super().__init__(members)

    def _shift(self, value: Value, eb: int) -> Value:
        """`value` elements in bytes: << log2(element bytes), of the narrow format when selected."""
        if self.narrow_elem_bytes is None:
            return value << eb
        return Mux(self.narrow, value << log2(self.narrow_elem_bytes), value << eb)

    def _burst_cap(self, m: Module, word: Signal) -> Value:
        """The most beats a burst from bus word `word` may have: `max_burst_beats`, or fewer up
        to the next 4 KiB boundary."""
        page_words = BURST_BOUNDARY_BYTES // self.bus_bytes
        to_boundary = Signal(range(page_words + 1))
        m.d.comb += to_boundary.eq(page_words - word[: log2(page_words)])
        return Mux(to_boundary < self.max_burst, to_boundary, self.max_burst)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        eb, bb = log2(self.elem_bytes), log2(self.bus_bytes)
        row_elem, rows_left = Signal(ADDR), Signal(16)
        x_size, stride = Signal.like(self.x_size), Signal(16)
        word, words_left = Signal(ADDR), Signal(ADDR + 1)
        beats = Signal(range(self.max_burst + 1))
        cap = self._burst_cap(m, word)
        m.d.comb += [
            beats.eq(Mux(words_left > cap, cap, words_left)),
            self.req.addr.eq(word << bb),
            self.req.len.eq(beats - 1),
        ]
        start_byte = Signal(ADDR)
        end_byte = Signal(ADDR)
        m.d.comb += [start_byte.eq(self._shift(row_elem, eb)),
                     end_byte.eq(start_byte + self._shift(x_size, eb) - 1)]
        with m.FSM():
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [row_elem.eq(self.dram_base), rows_left.eq(self.y_size),
                             x_size.eq(self.x_size), stride.eq(self.x_stride)]
                with m.If((self.x_size != 0) & (self.y_size != 0)):
                    m.next = "SETUP"
            with m.State("SETUP"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [word.eq(start_byte >> bb),
                             words_left.eq((end_byte >> bb) - (start_byte >> bb) + 1)]
                m.next = "BURST"
            with m.State("BURST"):
                m.d.comb += [self.busy.eq(1), self.req.valid.eq(1)]
                with m.If(self.req.ready):
                    m.d.sync += [word.eq(word + beats), words_left.eq(words_left - beats)]
                    with m.If(words_left == beats):
                        m.d.sync += [rows_left.eq(rows_left - 1), row_elem.eq(row_elem + stride)]
                        with m.If(rows_left == 1):
                            m.next = "IDLE"
                        with m.Else():
                            m.next = "SETUP"
        return m


class Unpacker(wiring.Component):
    """Bus beats in, elements of `elem_bits` out (valid/ready streams).

    Sub-word elements: the consumer names the element it takes with `idx` (its position in the
    beat) and `row_last`; the beat is released after the element at the last position or the
    last element of a row.  Multi-beat elements: `elem_bits / bus_bits` beats are gathered in a
    shift register; a new element can start in the cycle the previous one is taken, so the
    unpacker sustains one beat per cycle.  Equal sizes pass through.
    """

    def __init__(self, *, elem_bits: int, bus_bits: int):
        self.elem_bits, self.bus_bits = elem_bits, bus_bits
        self.per_beat = max(1, bus_bits // elem_bits)
        super().__init__({
            "beat": In(stream.Signature(bus_bits)), "elem": Out(stream.Signature(elem_bits)),
            "idx": In(max(1, log2(self.per_beat))), "row_last": In(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        if self.elem_bits > self.bus_bits:
            self._gather(m)
        elif self.elem_bits < self.bus_bits:
            m.d.comb += [
                self.elem.payload.eq(self.beat.payload.word_select(self.idx, self.elem_bits)),
                self.elem.valid.eq(self.beat.valid),
                self.beat.ready.eq(self.elem.ready & ((self.idx == self.per_beat - 1) | self.row_last)),
            ]
        else:
            wiring.connect(m, wiring.flipped(self.beat), wiring.flipped(self.elem))
        return m

    def _gather(self, m: Module) -> None:
        per_elem = self.elem_bits // self.bus_bits
        buf = Signal(self.elem_bits, reset_less=True)  # valid only while `count` says so
        count = Signal(range(per_elem + 1))
        full = count == per_elem
        m.d.comb += [
            self.elem.valid.eq(full),
            self.elem.payload.eq(buf),
            self.beat.ready.eq(~full | self.elem.ready),
        ]
        taken = self.elem.valid & self.elem.ready
        with m.If(self.beat.valid & self.beat.ready):
            m.d.sync += buf.eq(Cat(buf[self.bus_bits :], self.beat.payload))
            m.d.sync += count.eq(Mux(taken, 1, count + 1))
        with m.Elif(taken):
            m.d.sync += count.eq(0)


class PadWriter(wiring.Component):
    """Writes one LOAD's rows into an SRAM port: zero rows and columns around the DRAM data.

    On `start`, latches the instruction fields; then writes one element per cycle at
    consecutive SRAM addresses from `sram_base`: a zero for padding positions (no data needed),
    the next element of `elem` for data positions (waiting while it is not valid).  It drives
    the unpacker's `idx`/`row_last` from the DRAM element address of the current element.
    `busy` stays high until the last element is written.
    """

    def __init__(self, *, elem_bits: int, addr_bits: int, per_beat: int):
        self.elem_bits, self.addr_bits, self.per_beat = elem_bits, addr_bits, per_beat
        super().__init__({
            "start": In(1), "busy": Out(1),
            "sram_base": In(16), "dram_base": In(ADDR), "y_size": In(16), "x_size": In(16),
            "x_stride": In(16), "y_pad_0": In(4), "y_pad_1": In(4), "x_pad_0": In(4),
            "x_pad_1": In(4),
            "elem": In(stream.Signature(elem_bits)),
            "idx": Out(max(1, log2(per_beat))), "row_last": Out(1),
            "sram": Out(bus.sram_write(addr_bits, elem_bits)),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        x, x_lo, x_hi, row_len = (Signal(18, name=n) for n in ("x", "x_lo", "x_hi", "row_len"))
        y, y_lo, y_hi, y_total = (Signal(18, name=n) for n in ("y", "y_lo", "y_hi", "y_total"))
        addr, row_elem, stride = Signal(self.addr_bits), Signal(ADDR), Signal(16)
        busy = Signal()
        with m.If(self.start):
            rows = self.y_pad_0 + self.y_size + self.y_pad_1
            m.d.sync += [  # no row at all (y_size 0, no padding rows): nothing to write
                busy.eq(rows != 0), x.eq(0), y.eq(0), addr.eq(self.sram_base),
                row_elem.eq(self.dram_base), stride.eq(self.x_stride),
                x_lo.eq(self.x_pad_0), x_hi.eq(self.x_pad_0 + self.x_size),
                row_len.eq(self.x_pad_0 + self.x_size + self.x_pad_1),
                y_lo.eq(self.y_pad_0), y_hi.eq(self.y_pad_0 + self.y_size),
                y_total.eq(self.y_pad_0 + self.y_size + self.y_pad_1),
            ]
        data_row = (y >= y_lo) & (y < y_hi)
        is_data = data_row & (x >= x_lo) & (x < x_hi)
        write = busy & (~is_data | self.elem.valid)
        m.d.comb += [
            self.busy.eq(busy),
            self.idx.eq(row_elem + x - x_lo),
            self.row_last.eq(x == x_hi - 1),
            self.elem.ready.eq(busy & is_data),
            self.sram.en.eq(write),
            self.sram.addr.eq(addr),
            self.sram.data.eq(Mux(is_data, self.elem.payload, 0)),
        ]
        with m.If(write):
            m.d.sync += [addr.eq(addr + 1), x.eq(x + 1)]
            with m.If(x == row_len - 1):
                m.d.sync += [x.eq(0), y.eq(y + 1)]
                with m.If(data_row):
                    m.d.sync += row_elem.eq(row_elem + stride)
                with m.If(y == y_total - 1):
                    m.d.sync += busy.eq(0)
        return m


@dataclass(frozen=True)
class Widening:
    """A narrow element format: `lanes` signed lanes of `narrow_bits`, each sign-extended to
    `wide_bits` on its way into an SRAM of `lanes * wide_bits`-bit elements."""

    lanes: int
    narrow_bits: int
    wide_bits: int

    @property
    def narrow_elem_bytes(self) -> int:
        return self.lanes * self.narrow_bits // 8

    def widen(self, value: Value) -> Value:
        """Each narrow lane of `value`, sign-extended; lane 0 at the lowest bits."""
        extra = self.wide_bits - self.narrow_bits
        return Cat(*(Cat(lane, lane[-1].replicate(extra))
                     for lane in lanes(value, self.lanes, self.narrow_bits)))


class LoadDMA(wiring.Component):
    """2-D strided load with zero padding from DRAM into one SRAM, for one element size.

    `start` (with `cmd`, a LOAD instruction viewed through `mem_layout`) begins the transfer;
    `busy` is high from the next cycle until the last SRAM write.  Requests run ahead of the data
    (as many bursts as the memory master lets through), so a long load streams one beat per
    cycle (one element per cycle for sub-word elements).  With a `widening`, the transfer reads
    elements of the narrow format instead when `narrow` is high with `start` (DRAM addresses in
    narrow elements), and writes each one sign-extended: the same rows, padding and SRAM
    addresses, one SRAM write per element.
    """

    def __init__(self, *, mem_layout: data.StructLayout, elem_bytes: int, depth: int,
                 bus_bits: int, max_burst_beats: int, widening: Widening | None = None):
        self.elem_bits = elem_bytes * 8
        self.elem_bytes, self.bus_bits, self.max_burst = elem_bytes, bus_bits, max_burst_beats
        self.addr_bits = max(1, (depth - 1).bit_length())
        self.widening = widening
        members = {
            "start": In(1), "cmd": In(mem_layout), "busy": Out(1),
            "bus": Out(bus.read_bus(bus_bits)),
            "sram": Out(bus.sram_write(self.addr_bits, self.elem_bits)),
        }
        if widening is not None:
            assert widening.lanes * widening.wide_bits == self.elem_bits, widening
            members["narrow"] = In(1)
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        widening = self.widening
        narrow_bytes = widening.narrow_elem_bytes if widening else None
        m.submodules.req = req = BurstRequester(
            elem_bytes=self.elem_bytes, bus_bytes=self.bus_bits // 8,
            max_burst_beats=self.max_burst, narrow_elem_bytes=narrow_bytes)
        m.submodules.unpack = unpack = Unpacker(elem_bits=self.elem_bits, bus_bits=self.bus_bits)
        per_beat = unpack.per_beat
        if narrow_bytes is not None:
            m.submodules.unpack_narrow = narrow_unpack = Unpacker(
                elem_bits=narrow_bytes * 8, bus_bits=self.bus_bits)
            per_beat = max(per_beat, narrow_unpack.per_beat)
        m.submodules.writer = writer = PadWriter(
            elem_bits=self.elem_bits, addr_bits=self.addr_bits, per_beat=per_beat
        )
        cmd = self.cmd
        m.d.comb += [req.start.eq(self.start), writer.start.eq(self.start)]
        for name in ("dram_base", "y_size", "x_size", "x_stride"):
            m.d.comb += getattr(req, name).eq(getattr(cmd, name))
        for name in ("sram_base", "dram_base", "y_size", "x_size", "x_stride",
                     "y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"):
            m.d.comb += getattr(writer, name).eq(getattr(cmd, name))
        m.d.comb += [
            self.bus.ar_valid.eq(req.req.valid),
            req.req.ready.eq(self.bus.ar_ready),
            self.bus.ar_addr.eq(req.req.addr),
            self.bus.ar_len.eq(req.req.len),
            self.busy.eq(writer.busy),
        ]
        if narrow_bytes is None:
            self._feed(m, unpack, writer)
            wiring.connect(m, unpack.elem, writer.elem)
        else:
            self._feed_two(m, unpack, narrow_unpack, writer, req)
        wiring.connect(m, writer.sram, wiring.flipped(self.sram))
        return m

    def _feed(self, m: Module, unpack: Unpacker, writer: PadWriter,
              select: Value | None = None) -> None:
        """The R beats into `unpack` (only while `select`, if given); it follows the writer."""
        valid = self.bus.r_valid if select is None else self.bus.r_valid & select
        m.d.comb += [
            unpack.beat.valid.eq(valid),
            unpack.beat.payload.eq(self.bus.r_data),
            unpack.idx.eq(writer.idx),
            unpack.row_last.eq(writer.row_last),
        ]
        if select is None:
            m.d.comb += self.bus.r_ready.eq(unpack.beat.ready)
        else:
            with m.If(select):
                m.d.comb += self.bus.r_ready.eq(unpack.beat.ready)

    def _feed_two(self, m: Module, wide: Unpacker, narrow_unpack: Unpacker, writer: PadWriter,
                  req: BurstRequester) -> None:
        """Beats to the unpacker of the format latched at `start`; its elements, widened when
        narrow, to the writer."""
        assert self.widening is not None
        narrow = Signal()
        with m.If(self.start):
            m.d.sync += narrow.eq(self.narrow)
        m.d.comb += req.narrow.eq(narrow)
        self._feed(m, wide, writer, ~narrow)
        self._feed(m, narrow_unpack, writer, narrow)
        for unpack, selected, payload in (
            (wide, ~narrow, wide.elem.payload),
            (narrow_unpack, narrow, self.widening.widen(narrow_unpack.elem.payload)),
        ):
            m.d.comb += unpack.elem.ready.eq(writer.elem.ready & selected)
            with m.If(selected):
                m.d.comb += [writer.elem.valid.eq(unpack.elem.valid),
                             writer.elem.payload.eq(payload)]
