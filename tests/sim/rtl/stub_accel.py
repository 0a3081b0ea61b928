"""A stand-in for `hw.rtl.top.Accelerator` with the contract's port list, to test the harness.

It is not the accelerator: it fetches instructions over the memory master and gives them toy
meanings that exercise every channel of the DRAM model.
* LOAD (any memory type): y_size read bursts of x_size beats each, burst y at bus word
  dram_base + y * x_stride (byte address (dram_base + y*x_stride) * bus_bytes), issued while
  earlier bursts are still returning (up to cfg.mem_inflight); the beats go into a 64-beat
  buffer from index 0.
* STORE: y_size write bursts of x_size beats from the buffer (from index 0) to bus word
  dram_base + y * x_stride.
* FINISH: done.  Any other opcode hangs (a deadlock for the cycle limit to catch).
* Faults on demand, from sram_base bits (to test the protocol checks of the DRAM models):
  LOAD bit 0: addresses off by one byte; STORE bit 1: w_last never set; STORE bit 2: no AW.
Counters: cycles, load_insns (LOAD), store_insns (STORE), compute_insns (FINISH),
inp_load_bytes / out_store_bytes (beats * bus_bytes); the others stay 0.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from amaranth.hdl import Const, Module, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig, preset
from sim.rtl.ports import contract_ports

BUFFER_BEATS = 64
needs_verilator = [
    pytest.mark.rtl,
    pytest.mark.skipif(shutil.which("verilator") is None,
                       reason="verilator is not installed (apt-get install -y verilator)"),
]
NARROW = preset("tiny")  # 64-bit bus: QData ports in Verilator's model
WIDE = preset("tiny").with_params(name="tiny512", bus_bits=512)  # VlWide<16> ports


class StubAccel(wiring.Component):
    def __init__(self, cfg: AcceleratorConfig) -> None:
        self.cfg = cfg
        members = {p.name: (In if p.direction == "in" else Out)(p.width)
                   for p in contract_ports(cfg)}
        super().__init__(wiring.Signature(members))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        bus_bytes = cfg.bus_bytes
        m.submodules.buf = buf = memory.Memory(shape=cfg.bus_bits, depth=BUFFER_BEATS, init=[])
        wr = buf.write_port()
        rd = buf.read_port(domain="comb")

        base = Signal(32)
        count = Signal(32)
        pc = Signal(32)
        insn = Signal(128)
        beat = Signal(8)
        fields = {f.name: f for f in isa.layouts(cfg)["mem"].fields}

        def field(name: str) -> Value:
            f = fields[name]
            return insn[f.offset : f.offset + f.width]

        x_size, y_size = Signal(16), Signal(16)
        x_stride, dram_base, faults = Signal(16), Signal(32), Signal(3)
        rows_issued, rows_done, x, idx = Signal(16), Signal(16), Signal(16), Signal(8)
        outstanding = Signal(8)
        running = Signal()

        with m.If(running):
            m.d.sync += self.cnt_cycles.eq(self.cnt_cycles + 1)

        insn_bytes = 16
        fetch_beats = max(1, 128 // cfg.bus_bits)
        fetch_addr = base + pc * insn_bytes
        ar_fire = self.mem_ar_valid & self.mem_ar_ready
        r_fire = self.mem_r_valid & self.mem_r_ready

        with m.FSM():
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [base.eq(self.insn_addr), count.eq(self.insn_count), pc.eq(0),
                             running.eq(1)]
                m.d.sync += [getattr(self, f"cnt_{n}").eq(0) for n in _COUNTERS]
                m.next = "FETCH"
            with m.State("FETCH"):
                m.d.comb += [self.mem_ar_valid.eq(1),
                             self.mem_ar_addr.eq(fetch_addr & ~Const(bus_bytes - 1, 32)),
                             self.mem_ar_len.eq(fetch_beats - 1)]
                with m.If(self.mem_ar_ready):
                    m.d.sync += beat.eq(0)
                    m.next = "FETCH_DATA"
            with m.State("FETCH_DATA"):
                m.d.comb += self.mem_r_ready.eq(1)
                with m.If(self.mem_r_valid):
                    m.d.sync += beat.eq(beat + 1)
                    if cfg.bus_bits <= 128:
                        m.d.sync += insn.word_select(beat, cfg.bus_bits).eq(self.mem_r_data)
                    else:
                        lane = fetch_addr[4 : (bus_bytes - 1).bit_length()]
                        m.d.sync += insn.eq(self.mem_r_data.word_select(lane, 128))
                    with m.If(self.mem_r_last):
                        m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [pc.eq(pc + 1), x_size.eq(field("x_size")),
                             y_size.eq(field("y_size")), x_stride.eq(field("x_stride")),
                             dram_base.eq(field("dram_base")), faults.eq(field("sram_base")),
                             rows_issued.eq(0),
                             rows_done.eq(0), x.eq(0), idx.eq(0)]
                opcode = insn[0:3]
                with m.Switch(opcode):
                    with m.Case(isa.Opcode.FINISH):
                        m.d.sync += [self.cnt_compute_insns.eq(self.cnt_compute_insns + 1),
                                     running.eq(0)]
                        m.next = "DONE"
                    with m.Case(isa.Opcode.LOAD):
                        m.d.sync += [self.cnt_load_insns.eq(self.cnt_load_insns + 1),
                                     self.cnt_inp_load_bytes.eq(self.cnt_inp_load_bytes
                                     + field("x_size") * field("y_size") * bus_bytes)]
                        m.next = "LOAD"
                    with m.Case(isa.Opcode.STORE):
                        m.d.sync += [self.cnt_store_insns.eq(self.cnt_store_insns + 1),
                                     self.cnt_out_store_bytes.eq(self.cnt_out_store_bytes
                                     + field("x_size") * field("y_size") * bus_bytes)]
                        m.next = "STORE_AW"
                    with m.Default():
                        m.next = "HANG"
            with m.State("LOAD"):
                row_addr = (dram_base + rows_issued * x_stride) * bus_bytes + faults[0]
                can_issue = (rows_issued < y_size) & (outstanding < cfg.mem_inflight)
                m.d.comb += [self.mem_ar_valid.eq(can_issue), self.mem_ar_addr.eq(row_addr),
                             self.mem_ar_len.eq(x_size - 1), self.mem_r_ready.eq(1),
                             wr.addr.eq(idx), wr.data.eq(self.mem_r_data), wr.en.eq(r_fire)]
                with m.If(ar_fire):
                    m.d.sync += rows_issued.eq(rows_issued + 1)
                last_beat = r_fire & self.mem_r_last
                m.d.sync += outstanding.eq(outstanding + ar_fire - last_beat)
                with m.If(r_fire):
                    m.d.sync += idx.eq(idx + 1)
                with m.If(last_beat):
                    m.d.sync += rows_done.eq(rows_done + 1)
                with m.If(rows_done == y_size):
                    m.next = "FETCH"
            with m.State("STORE_AW"):
                m.d.comb += [self.mem_aw_valid.eq((rows_done < y_size) & ~faults[2]),
                             self.mem_aw_addr.eq((dram_base + rows_done * x_stride) * bus_bytes),
                             self.mem_aw_len.eq(x_size - 1)]
                with m.If(rows_done == y_size):
                    m.next = "FETCH"
                with m.Elif(self.mem_aw_ready | faults[2]):
                    m.d.sync += x.eq(0)
                    m.next = "STORE_W"
            with m.State("STORE_W"):
                last = x == x_size - 1
                m.d.comb += [rd.addr.eq(idx), self.mem_w_valid.eq(1),
                             self.mem_w_data.eq(rd.data), self.mem_w_strb.eq(-1),
                             self.mem_w_last.eq(last & ~faults[1])]
                with m.If(self.mem_w_ready):
                    m.d.sync += [idx.eq(idx + 1), x.eq(x + 1)]
                    with m.If(last):
                        m.d.sync += rows_done.eq(rows_done + 1)
                        m.next = "STORE_AW"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                with m.If(self.start):
                    m.d.sync += [base.eq(self.insn_addr), count.eq(self.insn_count), pc.eq(0),
                                 running.eq(1)]
                    m.d.sync += [getattr(self, f"cnt_{n}").eq(0) for n in _COUNTERS]
                    m.next = "FETCH"
            with m.State("HANG"):
                pass
        return m


_COUNTERS = ("cycles", "compute_insns", "load_insns", "store_insns", "inp_load_bytes",
             "out_store_bytes")


# -- stub programs -------------------------------------------------------------------------------


def image(cfg: AcceleratorConfig, insns: list[isa.Insn], size: int = 1 << 14,
          seed: int = 0) -> tuple[np.ndarray, int]:
    """A DRAM image of `size` random bytes with `insns` at byte 0; returns (dram, count)."""
    dram = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    words = isa.encode(insns, cfg).view(np.uint8).reshape(-1)
    dram[: words.size] = words
    return dram, len(insns)


def copy_program(cfg: AcceleratorConfig, src: int, dst: int, *, rows: int = 3, beats: int = 4,
                 stride: int = 6, sram_base: int = 0) -> list[isa.Insn]:
    """Stub program: gather `rows` rows of `beats` bus words (stride `stride`), store them packed."""
    bus = cfg.bus_bytes
    return [
        isa.Load(memory_type=isa.MemType.INP, dram_base=src // bus, y_size=rows, x_size=beats,
                 x_stride=stride, sram_base=sram_base & 1),
        isa.Store(dram_base=dst // bus, y_size=rows, x_size=beats, x_stride=beats,
                  sram_base=sram_base & 6),
        isa.Finish(),
    ]


def expected_copy(cfg: AcceleratorConfig, dram: np.ndarray, src: int, dst: int, *, rows: int = 3,
                  beats: int = 4, stride: int = 6) -> np.ndarray:
    out = dram.copy()
    bus = cfg.bus_bytes
    for y in range(rows):
        row = dram[src + y * stride * bus : src + (y * stride + beats) * bus]
        out[dst + y * beats * bus : dst + (y + 1) * beats * bus] = row
    return out
