"""`GemmDot`: the batch x block_in x block_out multiply-accumulate array (combinational)."""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.rtl.decode import lanes


def tree_sum(values: list):  # type: ignore[no-untyped-def]
    """A balanced adder tree (log2 depth instead of a chain)."""
    while len(values) > 1:
        pairs = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        values = pairs + ([values[-1]] if len(values) % 2 else [])
    return values[0]


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
        })  # fmt: skip

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg = self.cfg
        inp = lanes(self.inp, cfg.batch * cfg.block_in, cfg.inp_bits)
        wgt = lanes(self.wgt, cfg.block_out * cfg.block_in, cfg.wgt_bits)
        out = []
        for b in range(cfg.batch):
            for o in range(cfg.block_out):
                products = [
                    inp[b * cfg.block_in + c].as_signed() * wgt[o * cfg.block_in + c].as_signed()
                    for c in range(cfg.block_in)
                ]
                lane = Signal(cfg.acc_bits, name=f"dot_{b}_{o}")
                m.d.comb += lane.eq(tree_sum(products))  # sign-extends (or wraps) to acc_bits
                out.append(lane)
        m.d.comb += self.dot.eq(Cat(*out))
        return m
