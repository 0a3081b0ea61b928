"""`inject_dma`: copy nests marked `pragma dma_copy` become 2-D DMA statements.

The expected IR follows the pass's contract: addresses are the flat element index (row-major over
the dimensions outside the lanes) with the loops inside the pragma at 0; loops of extent 1 drop
out, contiguous dimensions merge, and what remains is rows (y, with a DRAM stride) of contiguous
elements (x).  A zero-padding select becomes pads on y and x.
"""

from __future__ import annotations

import pytest

from compiler import te
from compiler.build import build
from compiler.errors import ScheduleError
from compiler.lower import lower
from compiler.passes import inject_dma
from compiler.schedule import Schedule
from compiler.te import expr as E
from compiler.tir import stmt as S
from compiler.tir.printer import describe
from compiler.tir.visit import leaves
from tests.compiler.passes.cases import TINY, conv, matmul


def _dmas(sched: Schedule) -> list[str]:
    return [describe(s) for s in leaves(build(sched, TINY).ir["inject_dma"]) if isinstance(s, S.Dma)]


def test_each_copy_nest_becomes_one_dma():
    # a.inp: a is (1, 2) blocks, the tile a[m, k.o]; w.wgt: w is (2, 2) blocks, w[n.o, k.o];
    # out: (1, 2) blocks, out[m, n.o] from c's only element.  All single elements: y = x = 1.
    expected = """\
for out.m in 0..1:
  for out.n.o in 0..2:
    for c.m in 0..1:
      for c.n in 0..1:
        // tensorize gemm (c)
          for c.b in 0..1:
            for c.o in 0..4:
              c[c.m, c.n, c.b, c.o] = 0
    for c.k.o in 0..2:
      dma_load INP a[(c.k.o + (out.m * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      dma_load WGT w[(c.k.o + (out.n.o * 2))] <-> sram[0] y=1 x=1 stride=1  // load
      for c.m in 0..1:
        for c.n in 0..1:
          for c.k.i in 0..1:
            // tensorize gemm (c)
              for c.b in 0..1:
                for c.o in 0..4:
                  for c.ki in 0..4:
                    c[c.m, c.n, c.b, c.o] = (c[c.m, c.n, c.b, c.o] + (int32(a.inp[c.m, c.k.i, c.b, c.ki]) * int32(w.wgt[c.n, c.k.i, c.o, c.ki])))
    dma_store OUT out[((out.m * 2) + out.n.o)] <-> sram[0] y=1 x=1 stride=1  // store"""  # noqa: E501
    assert build(matmul(), TINY).print_ir("inject_dma") == expected


def test_rows_with_a_dram_stride_and_contiguous_elements():
    # k = n = 4 blocks in tiles of 2: a.inp is 1 row of 2 elements; w.wgt 2 rows of 2 elements,
    # 4 apart in DRAM (w's row pitch) and 2 apart in the scratchpad; the store 1 row of 2.
    assert _dmas(matmul(m=2, k=4, n=4, tile_k=2, tile_n=2)) == [
        "dma_load INP a[((c.k.o * 2) + (out.m * 4))] <-> sram[0] y=1 x=2 stride=2  // load",
        "dma_load WGT w[((c.k.o * 2) + (out.n.o * 8))] <-> sram[0] y=2 x=2 stride=4  // load",
        "dma_store OUT out[((out.m * 4) + (out.n.o * 2))] <-> sram[0] y=1 x=2 stride=2  // store",
    ]


def test_dimensions_contiguous_in_both_memories_merge():
    # the whole k in one tile: w.wgt's 2 rows of 4 are 8 contiguous elements in DRAM and SRAM
    assert _dmas(matmul(k=4, n=2, tile_k=4, tile_n=2))[1] == (
        "dma_load WGT w[((c.k.o * 4) + (out.n.o * 8))] <-> sram[0] y=1 x=8 stride=8  // load")


def test_zero_padding_becomes_pads_on_both_dimensions():
    # a tile of 2 output rows reads padded rows 2*y.o .. 2*y.o + 3 and columns 0 .. 5, i.e. data
    # rows 2*y.o - 1 .. and columns -1 ..: 4 rows of 6 elements, data's row pitch 4 apart, valid
    # where the data index is in [0, 4).  The kernel's 3x3 elements merge into one row of 9; the
    # store writes rows 2*y.o, 2*y.o + 1 of 4 elements, one contiguous run of 8.
    assert _dmas(conv()) == [
        "dma_load INP data[((((conv.ic * 16) + (out.n * 16)) + (out.y.o * 8)) + -5)] <-> sram[0] "
        "y=4 x=6 stride=4 pad_y(((out.y.o * 2) + -1) in [0,4)) pad_x(-1 in [0,4))  // load",
        "dma_load WGT kernel[((conv.ic * 9) + (out.o * 9))] <-> sram[0] y=1 x=9 stride=9  // load",
        "dma_store OUT out[(((out.n * 16) + (out.o * 16)) + (out.y.o * 8))] <-> sram[0] y=1 x=8 "
        "stride=8  // store",
    ]


def test_loads_into_acc_run_on_the_compute_queue():
    # bias (int32) is an ACC load, after c's element in acc; an int8 tensor into acc is the
    # sign-extending 8-bit acc load
    assert _dmas(matmul(epilogue=True))[0] == "dma_load ACC bias[0] <-> sram[1] y=1 x=2 stride=2  // compute"
    x = te.placeholder((2, 1, 4), "int8", "x")
    res = te.compute((2, 1, 4), lambda i, b, j: te.cast("int32", x[i, b, j]) + 1, "res")
    out = te.compute((2, 1, 4), lambda i, b, j: te.cast("int8", res[i, b, j]), "out")
    s = Schedule(out)
    s.set_scope("res", "acc")
    s.cache_read("x", "acc", ["res"])
    s.pragma("x.acc", "i0", "dma_copy")
    s.pragma("res", "i", "alu")
    s.pragma("out", "i", "dma_copy")
    assert _dmas(s) == ["dma_load ACC_8BIT x[0] <-> sram[0] y=1 x=2 stride=2  // compute",
                        "dma_store OUT out[0] <-> sram[0] y=1 x=2 stride=2  // store"]


# -- errors ---------------------------------------------------------------------------------------


def _staged(fn, shape=(2, 1, 4), *, src_shape=None, src_dtype="int8", scope="inp", at="i0"):  # type: ignore[no-untyped-def]
    """p[i] = fn(x, *i) in `scope` with a dma_copy pragma at `at`, read by the output."""
    x = te.placeholder(src_shape or shape, src_dtype, "x")
    p = te.compute(shape, lambda *i: fn(x, *i), "p")
    out = te.compute(shape, lambda *i: te.cast("int8", p[i]), "out")
    s = Schedule(out)
    s.set_scope("p", scope)
    s.pragma("p", at, "dma_copy")
    return s


def _padded(cond, index=lambda i: i - 1, rows=6, at="i"):  # type: ignore[no-untyped-def]
    """p[i] = x[index(i)] where cond(i), else 0: a padded copy of 4 rows into inp."""
    x = te.placeholder((4, 1, 4), "int8", "x")
    p = te.compute((rows, 1, 4), lambda i, b, j: te.if_then_else(cond(i, b), x[index(i), b, j], 0), "p")
    out = te.compute((rows, 1, 4), lambda i, b, j: te.cast("int8", p[i, b, j]), "out")
    s = Schedule(out)
    s.set_scope("p", "inp")
    s.pragma("p", at, "dma_copy")
    return s


def _error(sched: Schedule, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        build(sched, TINY)


def test_a_valid_padded_copy():
    # the helper's valid form, so that each error below differs from it in one thing (its
    # output copies inp to DRAM, which no DMA does: only the pass is run)
    body = inject_dma(lower(_padded(lambda i, b: te.all_of(te.ge(i, 1), te.lt(i, 5))), TINY).body, TINY)
    assert describe(leaves(body)[0]) == (
        "dma_load INP x[-1] <-> sram[0] y=1 x=6 stride=6 pad_x(-1 in [0,4))  // load")


def test_the_pragma_must_hold_only_the_copy():
    s = matmul()
    s.pragma("out", "n.o", "dma_copy")  # around c's nest as well as the store
    _error(s, r"^dma_copy of stage out: the loops from the pragma inward must hold only the copy \(move "
              r"the pragma inside the attached stages\)$")


def test_the_value_must_be_a_copy():
    _error(_staged(lambda x, *i: x[i] + 1),
           r"^dma_copy of stage p: the value \(x\[p\.i0, p\.i1, p\.i2\] \+ 1\) is not a copy of a tensor$")


def test_a_copy_runs_between_dram_and_a_scratchpad():
    x = te.placeholder((2, 1, 4), "int8", "x")
    out = te.compute((2, 1, 4), lambda *i: x[i], "out")
    s = Schedule(out)
    s.pragma("out", "i0", "dma_copy")
    _error(s, "^dma_copy of stage out: a DMA copies between DRAM and a scratchpad, not from x to out$")
    q = te.compute((2, 1, 4), lambda *i: te.cast("int8", te.cast("int32", x[i])), "q")
    p = te.compute((2, 1, 4), lambda *i: q[i], "p")
    out = te.compute((2, 1, 4), lambda *i: te.cast("int8", te.cast("int32", p[i])), "out")
    s = Schedule(out)
    s.set_scope("q", "acc")
    s.set_scope("p", "inp")
    s.pragma("p", "i0", "dma_copy")
    _error(s, "^dma_copy of stage p: a DMA copies between DRAM and a scratchpad, not from q to p$")


def test_a_store_cannot_pad():
    x = te.placeholder((2, 1, 4), "int32", "x")
    p = te.compute((2, 1, 4), lambda *i: x[i], "p")
    out = te.compute((2, 1, 4), lambda i, b, j: te.if_then_else(
        te.lt(i, 1), te.cast("int8", p[i, b, j]), 0), "out")
    s = Schedule(out)
    s.set_scope("p", "acc")
    s.pragma("p", "i0", "dma_copy")
    s.pragma("out", "i", "dma_copy")
    _error(s, "^dma_copy of stage out: a store cannot pad$")


@pytest.mark.parametrize("scope,dtype,match", [
    ("acc", "int16", "no LOAD brings a int16 tensor into acc"),
    ("inp", "int32", "scope inp holds int8, not int32"),
    ("wgt", "int16", "scope wgt holds int8, not int16"),
])
def test_a_load_needs_the_scope_dtype(scope, dtype, match):
    shape = (2, 4, 4) if scope == "wgt" else (2, 1, 4)
    sched = _staged(lambda x, *i: x[i], shape, src_dtype=dtype, scope=scope)
    _error(sched, f"^dma_copy of stage p: {match}$")


def test_the_pragma_must_enclose_the_lanes():
    _error(_staged(lambda x, *i: x[i], at="i2"),
           "^dma_copy of stage p: the pragma must enclose the element's two lane loops$")


def test_the_lanes_must_be_copied_in_order():
    _error(_staged(lambda x, i0, i1, i2: x[i0, i1, 3 - i2]),
           r"^dma_copy of stage p: the two innermost loops must run over the element's lanes in the "
           r"DRAM tensor, which is indexed \[p\.i0, p\.i1, \(3 - p\.i2\)\]$")
    x = te.placeholder((2, 1, 4), "int32", "x")
    p = te.compute((2, 1, 4), lambda *i: x[i], "p")
    out = te.compute((2, 1, 4), lambda i, b, j: te.cast("int8", p[i, b, 3 - j]), "out")
    s = Schedule(out)
    s.set_scope("p", "acc")
    s.pragma("p", "i0", "dma_copy")
    s.pragma("out", "i", "dma_copy")
    _error(s, r"^dma_copy of stage out: the two innermost loops must run over the element's lanes in "
              r"the scratchpad tensor, which is indexed \[out\.i, out\.b, \(\(out\.j \* -1\) \+ 3\)\]$")


def test_dram_elements_must_have_the_scratchpad_shape():
    _error(_staged(lambda x, *i: x[i], src_shape=(2, 2, 4)),
           r"^dma_copy of stage p: x's elements \(2, 4\) differ from the scratchpad's \(1, 4\)$")


def test_scratchpad_rows_must_follow_each_other():
    s = matmul(k=4, n=4, tile_k=2, tile_n=2)
    s.reorder("w.wgt", "i1", "i0")  # the pragma at i0 no longer encloses i1
    _error(s, "^dma_copy of stage w.wgt: the scratchpad rows are 2 elements apart, the DMA writes them 1 "
              "apart$")


def test_rows_cannot_go_backwards():
    _error(_staged(lambda x, i0, i1, i2: x[1 - i0, i1, i2]),
           r"^dma_copy of stage p: rows of the copy go backwards in DRAM \(stride -1\)$")


def test_dma_addresses_must_be_affine():
    s = _staged(lambda x, *i: x[i], (2, 2, 1, 4))
    s.fuse("p", "i0", "i1")
    s.pragma("p", "i0*i1", "dma_copy")
    # (the index of dimension 1, the first from the inside)
    _error(s, r"^dma_copy of stage p: index \(\(p\.i0\*i1 % 2\) \+ 0\) of x is not affine$")


@pytest.mark.parametrize("cond,match", [
    (lambda i, b: te.lt(i * i, 25), r"padding condition \(\(p\.i \* p\.i\) < 25\) is not affine"),
    (lambda i, b: te.ge(i + b, 1), r"padding condition \(\(p\.i \+ p\.b\) >= 1\) does not bound one "
                                   "source index"),
    (lambda i, b: te.all_of(te.ge(i, 1), E.binary("!=", i, 3)),
     r"padding condition \(p\.i != 3\) must compare with < <= > >="),
    (lambda i, b: te.cast("bool", i), r"padding condition bool\(p\.i\) must be comparisons joined by and"),
    (lambda i, b: te.all_of(te.ge(i, 0), te.lt(i, 5)),
     r"the padding condition lets dimension 0 of x be read at \[-1, 4\), outside its extent 4"),
    (lambda i, b: te.ge(i, 1),
     r"the padding condition lets dimension 0 of x be read at \[0, 1152921504606846976\), outside its "
     "extent 4"),
], ids=["not-affine", "no-source-index", "not-ordered", "not-a-comparison", "below-0",
        "no-upper-bound"])
def test_padding_conditions(cond, match):
    _error(_padded(cond), f"^dma_copy of stage p: {match}$")


def test_padded_indices_step_by_one_along_a_loop_inside_the_pragma():
    two = _padded(lambda i, b: te.all_of(te.ge(2 * i, 1), te.lt(2 * i, 5)), index=lambda i: 2 * i - 1,
                  rows=3)
    _error(two, r"^dma_copy of stage p: padded index \(\(2 \* p\.i\) - 1\) must step by 1 along one loop "
                "inside the pragma$")
    outside = _padded(lambda i, b: te.all_of(te.ge(i, 1), te.lt(i, 5)), at="b")
    _error(outside, r"^dma_copy of stage p: padded index \(p\.i - 1\) must step by 1 along one loop "
                    "inside the pragma$")
