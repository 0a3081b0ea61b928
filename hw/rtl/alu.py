"""`TensorAlu`: the lane-wise MIN/MAX/ADD/SHR/MUL of ALU micro-ops (combinational)."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import isa
from hw.config import AcceleratorConfig
from hw.rtl.decode import lanes, log2


class TensorAlu(wiring.Component):
    """result = op(a, b) on each of batch*block_out signed acc_bits lanes.

    MIN/MAX signed; ADD wraps; MUL keeps the low acc_bits of a*b; SHR takes the low
    log2(acc_bits)+1 bits of b as a signed amount: >= 0 shifts a right arithmetically, < 0
    shifts it left (wrapping).  With `use_imm`, every lane's b is `imm` instead (one lane-wide
    mux per lane rather than a replicated immediate vector).  Purely combinational (the
    pipeline writes the result).
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        w = cfg.acc_elem_bits
        super().__init__({"op": In(3), "a": In(w), "b": In(w), "use_imm": In(1),
                          "imm": In(cfg.acc_bits), "result": Out(w)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bits = self.cfg.acc_bits
        count = self.cfg.batch * self.cfg.block_out
        results = []
        pairs = zip(lanes(self.a, count, bits), lanes(self.b, count, bits), strict=True)
        for i, (a_raw, b_raw) in enumerate(pairs):
            a, b = a_raw.as_signed(), Mux(self.use_imm, self.imm, b_raw).as_signed()
            r = Signal(bits, name=f"r{i}")
            amount = b[: log2(bits) + 1].as_signed()
            left = (a << (-amount).as_unsigned()[: log2(bits) + 1])[:bits]
            shifted = Mux(amount < 0, left, (a >> amount.as_unsigned())[:bits])
            with m.Switch(self.op):
                with m.Case(isa.AluOp.MIN):
                    m.d.comb += r.eq(Mux(a < b, a, b))
                with m.Case(isa.AluOp.MAX):
                    m.d.comb += r.eq(Mux(a > b, a, b))
                with m.Case(isa.AluOp.ADD):
                    m.d.comb += r.eq(a + b)
                with m.Case(isa.AluOp.SHR):
                    m.d.comb += r.eq(shifted)
                with m.Case(isa.AluOp.MUL):
                    m.d.comb += r.eq(a * b)
            results.append(r)
        m.d.comb += self.result.eq(Cat(*results))
        return m
