"""`UopPipeline`: executes one GEMM or ALU micro-op per cycle behind the loop generator."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.rtl import bus
from hw.rtl.alu import TensorAlu
from hw.rtl.decode import lanes, uop_struct
from hw.rtl.gemm import GemmDot
from hw.rtl.load import addr_bits
from hw.rtl.loops import ctrl_layout

# The clock domain of the inp/wgt read ports, gated by `gemm_read` (hw/rtl/clockgate.py): it
# ticks only when a GEMM micro-op is in S1, so the dot products (combinational from those
# ports) are evaluated only for GEMM micro-ops.
GEMM_DOMAIN = "gemm"


def out_lanes(cfg: AcceleratorConfig, acc_value):  # type: ignore[no-untyped-def]
    """The out element of an acc element: the low out_bits of each lane."""
    count = cfg.batch * cfg.block_out
    return Cat(*(lane[: cfg.out_bits] for lane in lanes(acc_value, count, cfg.acc_bits)))


class UopPipeline(wiring.Component):
    """Four stages, one micro-op per cycle, never stalled.

    S0 (the loop generator) reads uop[k]; S1 adds the loop offsets and reads inp[src] and
    wgt[wgt] (`gemm_read` is high when a GEMM micro-op needs them: the top level clocks those
    read ports with it, see GEMM_DOMAIN); S2 computes the GEMM dot products and reads acc[dst]
    and acc[src] (ALU operand); S3 writes acc[dst] = reset ? 0 : acc + dot (GEMM) or
    op(acc[dst], imm or acc[src]) (ALU), and out[dst] with its low bits.  The acc read ports
    are write-first (transparent), and acc is read in the cycle just before the write stage, so
    a micro-op always sees the result of the one before it (same dst back to back): full
    forwarding, no stall.
    Latency: a micro-op presented by the generator in cycle t writes acc at the end of t+3;
    `ev_push` then reports the token pushes of an instruction's last micro-op.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        a, s = cfg.acc_index_bits, cfg.uop_src_bits
        acc_w = cfg.acc_elem_bits
        super().__init__({
            "valid": In(1), "k": In(cfg.uop_index_bits + 1), "dst": In(a), "src": In(s),
            "wgt": In(cfg.wgt_index_bits), "ctrl": In(ctrl_layout()),
            "uop": Out(bus.sram_read(addr_bits(cfg.uop_depth), cfg.uop_elem_bits)),
            "inp": Out(bus.sram_read(addr_bits(cfg.inp_depth), cfg.inp_elem_bits)),
            "wgt_rd": Out(bus.sram_read(addr_bits(cfg.wgt_depth), cfg.wgt_elem_bits)),
            "acc_dst": Out(bus.sram_read(addr_bits(cfg.acc_depth), acc_w)),
            "acc_src": Out(bus.sram_read(addr_bits(cfg.acc_depth), acc_w)),
            "acc_wr": Out(bus.sram_write(addr_bits(cfg.acc_depth), acc_w)),
            "out_wr": Out(bus.sram_write(addr_bits(cfg.out_depth), cfg.out_elem_bits)),
            "active": Out(1), "gemm_active": Out(1), "gemm_read": Out(1),
            "ev_gemm_uop": Out(1), "ev_alu_uop": Out(1),
            "ev_push": Out(2),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        ctrl = ctrl_layout()
        # Only the valid bits are reset: the payload registers are read only behind them, and
        # leaving them out of reset spares the simulator a wide mux per register and cycle.
        v1, v2, v3 = Signal(), Signal(), Signal()
        c1, c2, c3 = (Signal(ctrl, reset_less=True, name=f"c{i}") for i in (1, 2, 3))
        off = {n: Signal(len(getattr(self, n)), name=f"{n}_off1", reset_less=True)
               for n in ("dst", "src", "wgt")}
        d2, d3 = (Signal(cfg.acc_index_bits, name=n, reset_less=True) for n in ("d2", "d3"))
        s2 = Signal(cfg.uop_src_bits, reset_less=True)
        dot3 = Signal(cfg.acc_elem_bits, reset_less=True)
        imm3 = Signal(signed(cfg.acc_bits), reset_less=True)  # sign-extended a stage early
        # S0 -> S1
        m.d.comb += self.uop.addr.eq(self.k)
        m.d.sync += [v1.eq(self.valid), c1.eq(self.ctrl)]
        m.d.sync += [o.eq(getattr(self, n)) for n, o in off.items()]
        # S1: indices, inp/wgt reads
        u = data.View(uop_struct(cfg), self.uop.data)
        d1, s1 = (u.dst + off["dst"])[: cfg.acc_index_bits], (u.src + off["src"])[: cfg.uop_src_bits]
        m.d.comb += [self.inp.addr.eq(s1), self.wgt_rd.addr.eq(u.wgt + off["wgt"]),
                     self.gemm_read.eq(v1 & ~c1.alu & ~c1.reset)]
        m.d.sync += [v2.eq(v1), c2.eq(c1), d2.eq(d1), s2.eq(s1)]
        # S2: dot products, acc reads
        m.submodules.dot = dot = GemmDot(cfg)
        m.d.comb += [dot.inp.eq(self.inp.data), dot.wgt.eq(self.wgt_rd.data),
                     self.acc_dst.addr.eq(d2), self.acc_src.addr.eq(s2)]
        m.d.sync += [v3.eq(v2), c3.eq(c2), d3.eq(d2), dot3.eq(dot.dot), imm3.eq(c2.imm)]
        # S3: result and write-back
        result = self._result(m, c3, dot3, imm3)
        m.d.comb += [
            self.acc_wr.en.eq(v3), self.acc_wr.addr.eq(d3), self.acc_wr.data.eq(result),
            self.out_wr.en.eq(v3), self.out_wr.addr.eq(d3), self.out_wr.data.eq(out_lanes(cfg, result)),
            self.active.eq(v1 | v2 | v3),
            self.gemm_active.eq((v1 & ~c1.alu & ~c1.reset) | (v2 & ~c2.alu & ~c2.reset)
                                | (v3 & ~c3.alu & ~c3.reset)),
            self.ev_gemm_uop.eq(v3 & ~c3.alu & ~c3.reset), self.ev_alu_uop.eq(v3 & c3.alu),
            self.ev_push.eq(Mux(v3 & c3.last, c3.push, 0)),
        ]
        return m

    def _result(self, m: Module, c3: data.View, dot3: Signal, imm3: Signal) -> Signal:
        cfg = self.cfg
        count, bits = cfg.batch * cfg.block_out, cfg.acc_bits
        m.submodules.alu = alu = TensorAlu(cfg)
        gemm = Cat(*((a + d)[:bits] for a, d in zip(lanes(self.acc_dst.data, count, bits),
                                                     lanes(dot3, count, bits), strict=True)))
        m.d.comb += [alu.op.eq(c3.op), alu.a.eq(self.acc_dst.data), alu.b.eq(self.acc_src.data),
                     alu.use_imm.eq(c3.use_imm), alu.imm.eq(imm3)]
        result = Signal(cfg.acc_elem_bits)
        with m.If(c3.alu):
            m.d.comb += result.eq(alu.result)
        with m.Elif(~c3.reset):
            m.d.comb += result.eq(gemm)
        return result
