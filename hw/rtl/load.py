"""`LoadModule`: executes LOAD INP / LOAD WGT into the inp and wgt scratchpads."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.decode import insn_struct
from hw.rtl.dma import LoadDMA, Widening
from hw.rtl.sequencer import Sequencer


def addr_bits(depth: int) -> int:
    return max(1, (depth - 1).bit_length())


def load_dma(cfg: AcceleratorConfig, memory_type: isa.MemType,
             widening: Widening | None = None) -> LoadDMA:
    return LoadDMA(mem_layout=insn_struct(cfg, "mem"), elem_bytes=cfg.elem_bytes(memory_type),
                   depth=cfg.depth(memory_type), bus_bits=cfg.bus_bits,
                   max_burst_beats=cfg.max_burst_beats, widening=widening)


def byte_count(insn: data.View, elem_bytes: int):  # type: ignore[no-untyped-def]
    """x_size * y_size * elem_bytes of a LOAD/STORE (the Stats byte counters)."""
    return (insn.x_size * insn.y_size) << (elem_bytes.bit_length() - 1)


class LoadModule(wiring.Component):
    """Pops `cmd` instructions (LOAD INP/WGT) in order and runs one DMA transfer at a time.

    Tokens: pop_next pops compute->load (`c2l`), push_next pushes load->compute (`l2c`) after
    the last SRAM write.  One LoadDMA per memory type (each with its own read client `bus_inp`,
    `bus_wgt`).  x_size == 0 is a NOP.  Events for the performance counters: `ev_busy`,
    `ev_stall`, `ev_insn` and the byte counts `ev_inp_bytes`/`ev_wgt_bytes` (added on start).
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        inp_bits, wgt_bits = cfg.inp_elem_bits, cfg.wgt_elem_bits
        super().__init__({
            "cmd": In(stream.Signature(isa.INSN_BITS)),
            "bus_inp": Out(bus.read_bus(cfg.bus_bits)), "bus_wgt": Out(bus.read_bus(cfg.bus_bits)),
            "inp": Out(bus.sram_write(addr_bits(cfg.inp_depth), inp_bits)),
            "wgt": Out(bus.sram_write(addr_bits(cfg.wgt_depth), wgt_bits)),
            "c2l": Out(bus.token_pop()), "l2c": Out(bus.token_push()),
            "ev_busy": Out(1), "ev_stall": Out(1), "ev_insn": Out(1),
            "ev_inp_bytes": Out(32), "ev_wgt_bytes": Out(32),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        m.submodules.seq = seq = Sequencer(pops=1, pushes=1)
        m.submodules.inp_dma = inp_dma = load_dma(cfg, isa.MemType.INP)
        m.submodules.wgt_dma = wgt_dma = load_dma(cfg, isa.MemType.WGT)
        insn = data.View(insn_struct(cfg, "mem"), self.cmd.payload)
        is_inp = insn.memory_type == isa.MemType.INP
        real = insn.x_size != 0
        m.d.comb += [
            seq.valid.eq(self.cmd.valid), seq.can_start.eq(1),
            seq.pop_req.eq(insn.pop_next), seq.push_req.eq(insn.push_next),
            seq.done.eq(~inp_dma.busy & ~wgt_dma.busy),
            self.cmd.ready.eq(seq.start),
            inp_dma.cmd.eq(insn), wgt_dma.cmd.eq(insn),
            inp_dma.start.eq(seq.start & real & is_inp),
            wgt_dma.start.eq(seq.start & real & ~is_inp),
            self.ev_busy.eq(seq.busy), self.ev_stall.eq(seq.stall), self.ev_insn.eq(seq.start),
        ]
        with m.If(seq.start & is_inp):
            m.d.comb += self.ev_inp_bytes.eq(byte_count(insn, cfg.inp_elem_bytes))
        with m.If(seq.start & ~is_inp):
            m.d.comb += self.ev_wgt_bytes.eq(byte_count(insn, cfg.wgt_elem_bytes))
        wiring.connect(m, seq.pop0, wiring.flipped(self.c2l))
        wiring.connect(m, seq.push0, wiring.flipped(self.l2c))
        wiring.connect(m, inp_dma.bus, wiring.flipped(self.bus_inp))
        wiring.connect(m, wgt_dma.bus, wiring.flipped(self.bus_wgt))
        wiring.connect(m, inp_dma.sram, wiring.flipped(self.inp))
        wiring.connect(m, wgt_dma.sram, wiring.flipped(self.wgt))
        return m
