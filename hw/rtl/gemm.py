"""`GemmDot`: the batch x block_in x block_out multiply-accumulate array (combinational)."""

from __future__ import annotations

from amaranth import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.rtl.decode import lanes


def tree_sum(values: list, bits: int):  # type: ignore[no-untyped-def]
    """A balanced adder tree (log2 depth instead of a chain), every sum wrapping to `bits`."""
    while len(values) > 1:
        pairs = [(values[i] + values[i + 1])[:bits] for i in range(0, len(values) - 1, 2)]
        values = pairs + ([values[-1]] if len(values) % 2 else [])
    return values[0]


def widen(m: Module, value, bits: int, name: str) -> Signal:  # type: ignore[no-untyped-def]
    """`value` sign-extended to a signed `bits`-bit signal.

    The dot products are computed at the accumulator width, products and sums wrapping to it
    (exact, since the result is taken modulo 2**acc_bits).  Yosys narrows these multipliers back
    to the operand widths (the same cells and DSPs as `a.as_signed() * b.as_signed()`), while
    Verilator then computes each lane with native 32/64-bit arithmetic instead of masking and
    re-extending at every level of a tree of growing widths: about 1.8x faster to simulate.
    """
    wide = Signal(signed(bits), name=name)
    m.d.comb += wide.eq(value.as_signed())
    return wide


class GemmDot(wiring.Component):
    """dot[b][o] = sum_c inp[b][c] * wgt[o][c], signed, truncated to acc_bits per lane.

    Purely combinational: the compute pipeline registers `dot` (one GEMM micro-op per cycle).
    Lane packing follows CONTRACT.md: inp (batch, block_in), wgt (block_out, block_in), dot
    (batch, block_out), row-major, lane 0 at the lowest bits.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        super().__init__({
            "inp": In(cfg.inp_elem_bits), "wgt": In(cfg.wgt_elem_bits), "dot": Out(cfg.acc_elem_bits),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        inp = lanes(self.inp, cfg.batch * cfg.block_in, cfg.inp_bits)
        wgt = lanes(self.wgt, cfg.block_out * cfg.block_in, cfg.wgt_bits)
        bits = cfg.acc_bits
        inp = [widen(m, v, bits, f"inp_{i}") for i, v in enumerate(inp)]
        wgt = [widen(m, v, bits, f"wgt_{i}") for i, v in enumerate(wgt)]
        out = []
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                products = [(inp[b * cfg.block_in + c] * wgt[o * cfg.block_in + c])[:bits]
                            for c in range(cfg.block_in)]
                lane = Signal(bits, name=f"dot_{b}_{o}")
                m.d.comb += lane.eq(tree_sum(products, bits))
                out.append(lane)
        m.d.comb += self.dot.eq(Cat(*out))
        return m
