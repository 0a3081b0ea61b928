"""Small schedules written with the public TE and schedule primitives, shared by the pass tests.

Each is as small as shows its pass's work on the `tiny` preset (batch 1, 4x4 core), so that the
expected IR can be derived by hand from the passes' contracts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler import te
from compiler.schedule import Schedule
from compiler.target import AcceleratorTarget
from hw.config import PRESETS

TINY = AcceleratorTarget(PRESETS["tiny"])

# the GEMM body from (a, w, m, n, b, o, k, ki): a product of an inp and a wgt operand
Product = Callable[..., te.Expr]


def inp_times_wgt(a: te.Tensor, w: te.Tensor, m: te.Var, n: te.Var, b: te.Var, o: te.Var,
                  k: te.IterVar, ki: te.IterVar) -> te.Expr:
    return te.cast("int32", a[m, k, b, ki]) * te.cast("int32", w[n, k, o, ki])


def matmul(m: int = 1, k: int = 2, n: int = 2, *, tile_k: int = 1, tile_n: int = 1,
           threads: int = 1, epilogue: bool = False, loads_per_tile: bool = False,
           product: Product = inp_times_wgt, a_dtype: str = "int8", a_scope: str = "inp",
           store_at: str = "n.i", t: AcceleratorTarget = TINY) -> Schedule:
    """out[m, n] = int8(sum_k a[m, k] * w[n, k]) in blocks, optionally through the epilogue
    `min(max((acc + bias) >> 8, 0), 127)` on the ALU; one output block (or `tile_n` of them) per
    tile, `threads` virtual threads over n, the reduction in steps of `tile_k` blocks (or, with
    `loads_per_tile`, the inputs loaded once per output tile, whole k).  `product`, `a_dtype`
    and `a_scope` vary the GEMM's operands for tensorize's errors; the store is one DMA from
    axis `store_at` (b: one DMA per output block, in a loop)."""
    b, ci, co = t.batch, t.block_in, t.block_out
    a = te.placeholder((m, k, b, ci), a_dtype, "a")
    w = te.placeholder((n, k, co, ci), "int8", "w")
    kk, ki = te.reduce_axis(k, "k"), te.reduce_axis(ci, "ki")
    shape = (m, n, b, co)
    c = te.compute(shape, lambda m, n, b, o: te.sum(product(a, w, m, n, b, o, kk, ki), [kk, ki]), "c")
    res = c
    if epilogue:
        bias = te.placeholder((n, b, co), "int32", "bias")
        res = te.compute(shape, lambda m, n, b, o: te.minimum(
            te.maximum((c[m, n, b, o] + bias[n, b, o]) >> 8, 0), 127), "epi")
    out = te.compute(shape, lambda m, n, b, o: te.cast("int8", res[m, n, b, o]), "out")
    s = Schedule(out)
    a_copy = s.cache_read("a", a_scope, ["c"])
    s.cache_read("w", "wgt", ["c"])
    s.set_scope("c", "acc")
    s.split("out", "n", tile_n)
    at = "n.o"
    if threads > 1:
        s.virtual_thread("out", "n.o", threads)
        at = "n.o.vi"
    s.compute_at("c", "out", at)
    s.pragma("out", store_at, "dma_copy")
    if epilogue:
        s.set_scope("epi", "acc")
        s.cache_read("bias", "acc", ["epi"])
        s.pragma("bias.acc", "i0", "dma_copy")
        s.compute_at("epi", "out", at)
        s.pragma("epi", "m", "alu")
    s.split("c", "k", tile_k)
    s.reorder("c", "k.o", "m", "n", "k.i", "b", "o", "ki")
    s.tensorize("c", "b")
    for stage in (a_copy, "w.wgt"):
        if loads_per_tile:
            s.compute_at(stage, "out", at)
        else:
            s.compute_at(stage, "c", "k.o")
        s.pragma(stage, "i0", "dma_copy")
    return s


def matmul_data(m: int = 1, k: int = 2, n: int = 2, *, epilogue: bool = False,
                seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Seeded inputs of `matmul` (tiny's blocks) and its exact output."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k, 1, 4)).astype(np.int8)
    w = rng.integers(-128, 128, (n, k, 4, 4)).astype(np.int8)
    inputs = {"a": a, "w": w}
    acc = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), w.astype(np.int64))
    if epilogue:
        inputs["bias"] = rng.integers(-(1 << 12), 1 << 12, (n, 1, 4)).astype(np.int32)
        acc = np.clip((acc + inputs["bias"][None]) >> 8, 0, 127)
    return inputs, acc.astype(np.int32).astype(np.int8)


def conv(h: int = 4, w: int = 4, *, kernel: int = 3, pad: int = 1, tile_h: int = 2, threads: int = 1,
         t: AcceleratorTarget = TINY) -> Schedule:
    """A one-channel-block 2-D convolution (stride 1, zero padding `pad`) in tiles of `tile_h`
    output rows, `threads` virtual threads over the tiles: the padded input is one 2-D DMA per
    tile with pads on both spatial axes."""
    b, ci, co = t.batch, t.block_in, t.block_out
    data = te.placeholder((1, 1, h, w, b, ci), "int8", "data")
    kern = te.placeholder((1, 1, kernel, kernel, co, ci), "int8", "kernel")
    hp, wp = h + 2 * pad, w + 2 * pad
    padded = te.compute((1, 1, hp, wp, b, ci), lambda n, c, y, x, bi, i: te.if_then_else(
        te.all_of(te.ge(y, pad), te.lt(y, h + pad), te.ge(x, pad), te.lt(x, w + pad)),
        data[n, c, y - pad, x - pad, bi, i], 0), "pad")
    ic, ry, rx = te.reduce_axis(1, "ic"), te.reduce_axis(kernel, "ry"), te.reduce_axis(kernel, "rx")
    ii = te.reduce_axis(ci, "ii")
    oh, ow = hp - kernel + 1, wp - kernel + 1
    shape = (1, 1, oh, ow, b, co)
    cv = te.compute(shape, lambda n, o, y, x, bi, oi: te.sum(
        te.cast("int32", padded[n, ic, y + ry, x + rx, bi, ii])
        * te.cast("int32", kern[o, ic, ry, rx, oi, ii]), [ic, ry, rx, ii]), "conv")
    out = te.compute(shape, lambda n, o, y, x, bi, oi: te.cast("int8", cv[n, o, y, x, bi, oi]), "out")
    s = Schedule(out)
    s.set_scope("pad", "inp")
    s.cache_read("kernel", "wgt", ["conv"])
    s.set_scope("conv", "acc")
    s.split("out", "y", tile_h)
    at = "y.o"
    if threads > 1:
        s.virtual_thread("out", "y.o", threads)
        at = "y.o.vi"
    s.compute_at("conv", "out", at)
    s.pragma("out", "y.i", "dma_copy")
    s.reorder("conv", "ic", "n", "o", "y", "x", "ry", "rx", "bi", "oi", "ii")
    s.tensorize("conv", "bi")
    for stage in ("pad", "kernel.wgt"):
        s.compute_at(stage, "conv", "ic")
    s.pragma("pad", "n", "dma_copy")
    s.pragma("kernel.wgt", "i0", "dma_copy")
    return s
