"""`tensorize`: nests marked `tensorize gemm` become GEMM micro-ops.

Expected micro-ops follow the contract: the acc/inp/wgt indices are the buffers' element indices
(row-major over the dimensions outside the lanes, plus the buffer's base) of the loops outside
the mark; the zero init becomes a reset micro-op on the same acc elements.
"""

from __future__ import annotations

import pytest

from compiler import te
from compiler.build import build
from compiler.errors import ScheduleError
from compiler.lower import lower
from compiler.passes import tensorize
from compiler.schedule import Schedule
from compiler.tir import stmt as S
from compiler.tir.printer import describe
from compiler.tir.visit import leaves
from tests.compiler.passes.cases import TINY, Product, conv, matmul


def _uops(sched) -> list[str]:  # type: ignore[no-untyped-def]
    return [describe(s) for s in leaves(build(sched, TINY).ir["tensorize"]) if isinstance(s, S.Uop)]


def test_the_gemm_nest_and_its_init_become_micro_ops():
    # c is one acc element (1, 1) per tile, a.inp and w.wgt one element each per k step: every
    # index is the sum of the single-iteration loops around the mark
    expected = """\
for out.m in 0..1:
  for out.n.o in 0..2:
    for c.m in 0..1:
      for c.n in 0..1:
        gemm_reset acc[(c.m + c.n)]
    for c.k.o in 0..2:
      dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      dma_load WGT w[(c.k.o + (out.n.o * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      for c.m in 0..1:
        for c.n in 0..1:
          for c.k.i in 0..1:
            gemm acc[(c.m + c.n)] += inp[(c.k.i + c.m)] * wgt[(c.k.i + c.n)]
    dma_store OUT out[((out.m * 2) + out.n.o)] <-> sram[0] y=1 x=1 stride=1  // store"""
    assert build(matmul(), TINY).print_ir("tensorize") == expected


def test_indices_are_row_major_element_indices_plus_the_thread_copy():
    # c: (1, 2) elements; a.inp: (1, 2); w.wgt: (2, 2); each buffer's copy for thread vt starts at
    # vt times its size (2, 2, 4 elements)
    assert _uops(matmul(k=4, n=4, tile_k=2, tile_n=2)) == [
        "gemm_reset acc[((c.m * 2) + c.n)]",
        "gemm acc[((c.m * 2) + c.n)] += inp[(c.k.i + (c.m * 2))] * wgt[(c.k.i + (c.n * 2))]",
    ]
    assert _uops(matmul(k=4, n=8, tile_k=2, tile_n=2, threads=2)) == [
        "gemm_reset acc[(((c.m * 2) + c.n) + (out.n.o.vt * 2))]",
        "gemm acc[(((c.m * 2) + c.n) + (out.n.o.vt * 2))] += inp[((c.k.i + (c.m * 2)) + (out.n.o.vt * 2))] "
        "* wgt[((c.k.i + (c.n * 2)) + (out.n.o.vt * 4))]",
    ]


def test_a_convolution_window_indexes_the_padded_input():
    # conv: (1, 1, 2, 4) acc elements; pad: (1, 1, 4, 6), read at row y + ry, column x + rx;
    # kernel.wgt: (1, 1, 3, 3)
    assert _uops(conv()) == [
        "gemm_reset acc[((((conv.n * 8) + (conv.o * 8)) + conv.x) + (conv.y * 4))]",
        "gemm acc[((((conv.n * 8) + (conv.o * 8)) + conv.x) + (conv.y * 4))] += "
        "inp[(((((conv.n * 24) + conv.rx) + (conv.ry * 6)) + conv.x) + (conv.y * 6))] * "
        "wgt[(((conv.o * 9) + conv.rx) + (conv.ry * 3))]",
    ]


def _wgt_first(a_index=None, w_index=None) -> Product:  # type: ignore[no-untyped-def]
    """The product written wgt * inp, optionally with other operand indices."""

    def product(a, w, m, n, b, o, k, ki):  # type: ignore[no-untyped-def]
        ia = a_index(m, b, k, ki) if a_index else (m, k, b, ki)
        iw = w_index(n, o, k, ki) if w_index else (n, k, o, ki)
        return te.cast("int32", w[iw]) * te.cast("int32", a[ia])

    return product


def test_the_product_matches_in_either_order():
    assert _uops(matmul(product=_wgt_first())) == _uops(matmul())


# -- errors ---------------------------------------------------------------------------------------


def _error(sched, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScheduleError, match=match):
        build(sched, TINY)


def test_the_mark_must_hold_only_the_computation():
    s = matmul()
    s.tensorize("out", "n.o")  # around c's nest and the store
    _error(s, r"^tensorize\(out, gemm\): the loops from the tensorize axis inward must hold only the "
              "computation$")


def test_the_result_must_be_in_acc():
    x = te.placeholder((2, 1, 4), "int32", "x")
    out = te.compute((2, 1, 4), lambda i, b, j: te.cast("int8", x[i, b, j]), "out")
    s = Schedule(out)
    s.tensorize("out", "b")
    _error(s, r"^tensorize\(out, gemm\): the result must be in the acc scope$")


def test_the_body_must_accumulate():
    s = matmul(epilogue=True)
    s.tensorize("epi", "b")
    _error(s, r"^tensorize\(epi, gemm\): the body min\(max\(.*\) is not an accumulation into epi$")


def test_exactly_one_reduction_loop():
    s = matmul()
    s.tensorize("c", "k.i")  # k.i and ki both inside the mark
    _error(s, r"^tensorize\(c, gemm\): the loops from the tensorize axis inward are \['c\.k\.i', 'c\.b', "
              r"'c\.o', 'c\.ki'\]; the gemm intrinsic needs exactly batch, block_out and one block_in "
              "reduction loop$")


def test_operands_must_be_in_their_scopes():
    _error(matmul(product=_wgt_first(), a_scope="acc"),
           r"^tensorize\(c, gemm\): operand a\.acc is in scope acc, the intrinsic reads it from inp$")


def test_an_operand_error_names_the_operand_in_the_natural_order():
    # (the retry with the operands swapped must not replace the reason)
    _error(matmul(a_scope="acc"), r"operand a\.acc is in scope acc")


def test_operands_must_be_indexed_by_the_lanes_last():
    transposed = _wgt_first(w_index=lambda n, o, k, ki: (n, k, ki, o))
    _error(matmul(product=transposed),
           r"^tensorize\(c, gemm\): w\.wgt\[c\.n, c\.k\.i, c\.ki, c\.o\] must be indexed by the lanes "
           r"\[c\.o, c\.ki\] last$")
    lane_row = _wgt_first(a_index=lambda m, b, k, ki: (m + b, k, b, ki))
    _error(matmul(product=lane_row),
           r"^tensorize\(c, gemm\): a\.inp\[\(c\.b \+ c\.m\), c\.k\.i, c\.b, c\.ki\] uses lane loops in its "
           "outer indices$")


def test_operands_must_have_the_intrinsic_dtypes():
    # (no DMA brings int16 into inp, so the pass runs on the lowered IR itself)
    body = lower(matmul(product=_wgt_first(), a_dtype="int16"), TINY).body
    with pytest.raises(ScheduleError, match=r"^tensorize\(c, gemm\): a\.inp is int16, the intrinsic reads "
                                            "int8$"):
        tensorize(body, TINY)
