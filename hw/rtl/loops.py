"""`LoopGenerator`: the two affine loops of GEMM/ALU around the micro-op range."""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig


def ctrl_layout() -> data.StructLayout:
    """Per-micro-op control that travels down the compute pipeline with the indices."""
    return data.StructLayout({"alu": 1, "reset": 1, "op": 3, "use_imm": 1,
                              "imm": signed(isa.ALU_IMM_BITS),
                              "last": 1, "push": 2})
    # `last` marks an instruction's final micro-op, which carries its token pushes (`push`:
    # push_prev, push_next) to the write stage: they happen after its last acc write.


def loop_layout(cfg: AcceleratorConfig) -> data.StructLayout:
    """The loop fields of a GEMM or ALU instruction, in the widths of the widest use."""
    a, s, w, u = cfg.acc_index_bits, cfg.uop_src_bits, cfg.wgt_index_bits, cfg.uop_index_bits
    return data.StructLayout({
        "uop_bgn": u, "uop_end": u + 1, "iter_out": isa.LOOP_ITER_BITS,
        "iter_in": isa.LOOP_ITER_BITS, "dst_factor_out": a, "dst_factor_in": a,
        "src_factor_out": s, "src_factor_in": s, "wgt_factor_out": w, "wgt_factor_in": w,
        "ctrl": ctrl_layout(),
    })


class LoopGenerator(wiring.Component):
    """for i < iter_out: for j < iter_in: for k in [uop_bgn, uop_end): issue (k, offsets).

    `start` latches `loop`; from the next cycle one micro-op per cycle is presented (`valid`,
    never back-pressured) with `k` and the offsets i*factor_out + j*factor_in of dst, src and
    wgt, kept incrementally (no multiplier).  `last` marks the final micro-op; an empty loop
    (no uops or a zero trip count, `empty` tells before start) issues nothing.  `busy` equals `valid`.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        self.layout = loop_layout(cfg)
        super().__init__({
            "start": In(1), "loop": In(self.layout), "valid": Out(1), "last": Out(1),
            "k": Out(cfg.uop_index_bits + 1), "dst": Out(cfg.acc_index_bits),
            "src": Out(cfg.uop_src_bits), "wgt": Out(cfg.wgt_index_bits),
            "ctrl": Out(ctrl_layout()), "empty": Out(1),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        lp = Signal(self.layout)
        i, j = Signal(isa.LOOP_ITER_BITS), Signal(isa.LOOP_ITER_BITS)
        outer = {n: Signal(len(getattr(self, n)), name=f"{n}_outer") for n in ("dst", "src", "wgt")}
        empty = self.empty
        m.d.comb += [self.ctrl.eq(lp.ctrl), self.ctrl.last.eq(self.last)]
        m.d.comb += empty.eq((self.loop.uop_end <= self.loop.uop_bgn) | (self.loop.iter_out == 0)
                             | (self.loop.iter_in == 0))
        k_last = self.k == lp.uop_end - 1
        j_last = j == lp.iter_in - 1
        i_last = i == lp.iter_out - 1
        m.d.comb += self.last.eq(self.valid & k_last & j_last & i_last)
        with m.If(self.valid):
            m.d.sync += self.k.eq(self.k + 1)
            with m.If(k_last):
                m.d.sync += [self.k.eq(lp.uop_bgn), j.eq(j + 1)]
                for n in outer:
                    m.d.sync += getattr(self, n).eq(getattr(self, n) + lp[f"{n}_factor_in"])
                with m.If(j_last):
                    m.d.sync += [j.eq(0), i.eq(i + 1)]
                    for n, o in outer.items():
                        step = o + lp[f"{n}_factor_out"]
                        m.d.sync += [o.eq(step), getattr(self, n).eq(step)]
                    with m.If(i_last):
                        m.d.sync += self.valid.eq(0)
        with m.If(self.start):  # after the advance: a start in the last cycle wins
            m.d.sync += [lp.eq(self.loop), self.valid.eq(~empty), self.k.eq(self.loop.uop_bgn),
                         i.eq(0), j.eq(0)]
            m.d.sync += [getattr(self, n).eq(0) for n in outer]
            m.d.sync += [o.eq(0) for o in outer.values()]
        return m
