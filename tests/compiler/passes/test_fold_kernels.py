"""`fold_kernels`: perfect loop nests of micro-ops become instructions (`Kernel`).

Expected from the contract: loops of one iteration bind their variable to 0; the two largest
loops that can fold (non-negative factors) fold into the instruction, in nest order; the rest
unroll into the micro-op kernel, unless it would exceed max(16, uop_depth / 8) micro-ops (32 on
tiny), in which case the outer loops stay loops of instructions.
"""

from __future__ import annotations

import numpy as np

from compiler import te
from compiler.build import build
from sim.fsim import FunctionalSimulator
from tests.compiler.passes.cases import TINY, conv, matmul


def _kernels(sched) -> list[str]:  # type: ignore[no-untyped-def]
    """The instructions of the GEMM and the loops of conv.y (which hold instructions only)."""
    lines = [line.strip() for line in build(sched, TINY).print_ir("fold_kernels").splitlines()]
    return [line for line in lines if line.startswith(("kernel[", "for conv.y"))]


def test_micro_op_nests_become_instructions():
    # single-iteration loops (c.m, epi.m) are gone; GEMM folds n and k.i, each ALU step folds n
    expected = """\
dma_load ACC bias[0] <-> sram[2] y=1 x=4 stride=4  // compute
for out.m in 0..1:
  for out.n.o in 0..2:
    kernel[c.n<2][] gemm_reset acc[c.n]
    for c.k.o in 0..2:
      dma_load INP a[((c.k.o * 2) + (out.m * 4))] <-> sram[0] y=1 x=2 stride=2  // load
      dma_load WGT w[((c.k.o * 2) + (out.n.o * 8))] <-> sram[0] y=2 x=2 stride=4  // load
      kernel[c.n<2 c.k.i<2][] gemm acc[c.n] += inp[c.k.i] * wgt[(c.k.i + (c.n * 2))]
    kernel[epi.n<2][] alu ADD acc[epi.n], acc[((epi.n + (out.n.o * 2)) + 2)]
    kernel[epi.n<2][] alu SHR acc[epi.n], imm 8
    kernel[epi.n<2][] alu MAX acc[epi.n], imm 0
    kernel[epi.n<2][] alu MIN acc[epi.n], imm 127
    dma_store OUT out[((out.m * 4) + (out.n.o * 2))] <-> sram[0] y=1 x=2 stride=2  // store"""
    sched = matmul(k=4, n=4, tile_k=2, tile_n=2, epilogue=True)
    assert build(sched, TINY).print_ir("fold_kernels") == expected


def test_the_two_largest_loops_fold_and_the_others_unroll():
    # conv loops y<2 x<4 ry<3 rx<3: x and ry fold (the first of equal extents wins), y and rx
    # unroll into 6 micro-ops; the reset's y and x both fold
    assert _kernels(conv()) == [
        "kernel[conv.y<2 conv.x<4][] gemm_reset acc[(conv.x + (conv.y * 4))]",
        "kernel[conv.x<4 conv.ry<3][conv.y<2 conv.rx<3] gemm acc[(conv.x + (conv.y * 4))] += "
        "inp[(((conv.rx + (conv.ry * 6)) + conv.x) + (conv.y * 6))] * wgt[(conv.rx + (conv.ry * 3))]",
    ]


def test_a_kernel_past_the_limit_leaves_its_outer_loops_as_loops():
    # 5x5 kernel: y<8 x<8 fold, 25 micro-ops unroll (<= 32): one instruction
    assert _kernels(conv(h=8, w=8, kernel=5, pad=2, tile_h=8))[1] == (
        "kernel[conv.y<8 conv.x<8][conv.ry<5 conv.rx<5] gemm acc[(conv.x + (conv.y * 8))] += "
        "inp[(((conv.rx + (conv.ry * 12)) + conv.x) + (conv.y * 12))] * wgt[(conv.rx + (conv.ry * 5))]")
    # 6x6 kernel: y<7 x<7 fold would leave 36 > 32 micro-ops; with y a loop, x and ry fold
    assert _kernels(conv(h=8, w=8, kernel=6, pad=2, tile_h=7))[1:] == [
        "for conv.y in 0..7:",
        "kernel[conv.x<7 conv.ry<6][conv.rx<6] gemm acc[(conv.x + (conv.y * 7))] += "
        "inp[(((conv.rx + (conv.ry * 12)) + conv.x) + (conv.y * 12))] * wgt[(conv.rx + (conv.ry * 6))]",
    ]


def _reversed_k(a, w, m, n, b, o, k, ki):  # type: ignore[no-untyped-def]
    return te.cast("int32", a[m, k, b, ki]) * te.cast("int32", w[n, 1 - k.var, o, ki])


def test_a_loop_with_a_negative_factor_unrolls():
    sched = matmul(k=2, n=2, tile_k=2, tile_n=2, product=_reversed_k)
    assert _kernels(sched)[1] == (
        "kernel[c.n<2][c.k.i<2] gemm acc[c.n] += inp[c.k.i] * wgt[(((c.k.i * -1) + (c.n * 2)) + 1)]")
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (1, 2, 1, 4)).astype(np.int8)
    w = rng.integers(-128, 128, (2, 2, 4, 4)).astype(np.int8)
    result = FunctionalSimulator(TINY.cfg).run(build(sched, TINY).program, {"a": a, "w": w})
    expected = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), w[:, ::-1].astype(np.int64))
    assert np.array_equal(result.outputs["out"], expected.astype(np.int32).astype(np.int8))
