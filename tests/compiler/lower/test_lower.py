"""Lowering: one loop nest per stage inside its attach point, bound inference of the region the
loops there read, scoped allocation (one copy per virtual thread, in place for element-wise acc
stages, within the scratchpads' capacities) and the errors of each."""

from __future__ import annotations

import pytest

from compiler import te
from compiler.errors import ScheduleError
from compiler.lower import lower
from compiler.schedule import Schedule
from compiler.tir import print_ir
from tests.compiler.passes.cases import TINY, conv, matmul


def test_each_stage_is_a_nest_inside_its_attach_point():
    # c (acc) at out.n.o: one output block; its zero init before the reduction loop k.o, both
    # marked for tensorize from axis b; a.inp and w.wgt at c.k.o: one k block each; every stage
    # indexes its buffer relative to the region's start (out reads c at [0, n.i, ...]).
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
      // pragma dma_copy (a.inp)
        for a.inp.i0 in 0..1:
          for a.inp.i1 in 0..1:
            for a.inp.i2 in 0..1:
              for a.inp.i3 in 0..4:
                a.inp[a.inp.i0, a.inp.i1, a.inp.i2, a.inp.i3] = a[(a.inp.i0 + out.m), (a.inp.i1 + c.k.o), a.inp.i2, a.inp.i3]
      // pragma dma_copy (w.wgt)
        for w.wgt.i0 in 0..1:
          for w.wgt.i1 in 0..1:
            for w.wgt.i2 in 0..4:
              for w.wgt.i3 in 0..4:
                w.wgt[w.wgt.i0, w.wgt.i1, w.wgt.i2, w.wgt.i3] = w[(out.n.o + w.wgt.i0), (c.k.o + w.wgt.i1), w.wgt.i2, w.wgt.i3]
      for c.m in 0..1:
        for c.n in 0..1:
          for c.k.i in 0..1:
            // tensorize gemm (c)
              for c.b in 0..1:
                for c.o in 0..4:
                  for c.ki in 0..4:
                    c[c.m, c.n, c.b, c.o] = (c[c.m, c.n, c.b, c.o] + (int32(a.inp[c.m, c.k.i, c.b, c.ki]) * int32(w.wgt[c.n, c.k.i, c.o, c.ki])))
    // pragma dma_copy (out)
      for out.n.i in 0..1:
        for out.b in 0..1:
          for out.o in 0..4:
            out[out.m, (out.n.i + out.n.o), out.b, out.o] = int8(c[0, out.n.i, out.b, out.o])"""  # noqa: E501
    assert print_ir(lower(matmul(), TINY).body) == expected


@pytest.mark.parametrize("tile_h", [1, 2, 4])
def test_bound_inference_covers_the_window_a_tile_reads(tile_h):
    # a tile of tile_h output rows of a 3x3 convolution reads tile_h + 2 padded rows, and all
    # 4 + 2 padded columns; one kernel block, whole.
    func = lower(conv(tile_h=tile_h), TINY)
    shapes = {name: (b.scope, b.shape) for name, b in func.buffers.items()}
    assert shapes == {"pad": ("inp", (1, 1, tile_h + 2, 6, 1, 4)),
                      "kernel.wgt": ("wgt", (1, 1, 3, 3, 4, 4)),
                      "conv": ("acc", (1, 1, tile_h, 4, 1, 4))}


def test_buffers_get_one_copy_per_virtual_thread_and_epilogues_compute_in_place():
    func = lower(matmul(k=4, n=4, tile_k=2, tile_n=2, threads=2, epilogue=True), TINY)
    # per thread: a.inp 1x2 elements, w.wgt 2x2, c 1x2; the root bias.acc (4 channel blocks)
    # follows both copies of c in acc, and epi reuses c's buffer
    assert [repr(b) for b in func.buffers.values()] == [
        "Buffer('a.inp', inp, (1, 2, 1, 4), base=(out.n.o.vt * 2))",
        "Buffer('w.wgt', wgt, (2, 2, 4, 4), base=(out.n.o.vt * 4))",
        "Buffer('c', acc, (1, 2, 1, 4), base=(out.n.o.vt * 2))",
        "Buffer('bias.acc', acc, (4, 1, 4), base=4)",
        "Buffer('epi', acc, (1, 2, 1, 4), base=(out.n.o.vt * 2))",
    ]


def test_a_scratchpad_may_be_filled_exactly():
    lower(matmul(k=256, n=1, tile_k=256), TINY)  # a.inp and w.wgt: 256 elements, all of inp, wgt
    with pytest.raises(ScheduleError, match=r"^buffers in scope inp need 257 elements \(a\.inp 257\), "
                                            "more than the 256 the inp scratchpad holds$"):
        lower(matmul(k=257, n=1, tile_k=257), TINY)


def _twice_read(index2):  # type: ignore[no-untyped-def]
    """res[i] = p[i] + p[index2(i)], p and res in acc, both computed at out.i."""
    x = te.placeholder((8, 1, 4), "int32", "x")
    p = te.compute((8, 1, 4), lambda i, b, j: x[i, b, j], "p")
    res = te.compute((4, 1, 4), lambda i, b, j: p[i, b, j] + p[index2(i), b, j], "res")
    out = te.compute((4, 1, 4), lambda i, b, j: te.cast("int8", res[i, b, j]), "out")
    s = Schedule(out)
    for stage in ("p", "res"):
        s.set_scope(stage, "acc")
        s.compute_at(stage, "out", "i")
    return s


def test_two_reads_of_one_tile_make_one_region():
    func = lower(_twice_read(lambda i: i + 3), TINY)
    assert func.buffers["p"].shape == (4, 1, 4)  # rows i .. i + 3


def test_regions_that_move_differently_are_not_one_tile():
    with pytest.raises(ScheduleError, match=r"^stage p is read at regions that start at out\.i and "
                                            r"\(out\.i \* 2\): their union is not one tile$"):
        lower(_twice_read(lambda i: i * 2), TINY)


def test_a_region_needs_affine_reads():
    with pytest.raises(ScheduleError, match=r"^stage p: res reads it at index \(\(out\.i \+ res\.i\) // 2\) "
                                            r"\(dimension 0\), which is not affine: its region cannot "
                                            "be bounded$"):
        lower(_twice_read(lambda i: i // 2), TINY)


def test_computed_at_a_stage_lowered_after_it():
    # bias.acc feeds epi, which reads c: lowering c's loops comes after bias.acc's
    s = matmul(epilogue=True)
    s.compute_at("bias.acc", "c", "k.o")
    with pytest.raises(ScheduleError, match="^stage bias.acc is computed at c, which is inlined or does not "
                                            "consume it$"):
        lower(s, TINY)


def test_computed_at_an_inlined_stage():
    s = matmul(epilogue=True)
    s.compute_at("bias.acc", "epi", "n")
    s.compute_inline("epi")
    with pytest.raises(ScheduleError, match="^stage bias.acc is computed at epi, which is inlined"):
        lower(s, TINY)


def test_computed_at_a_stage_that_does_not_read_it():
    # a.inp loaded inside epi's loop would come after c's GEMMs read it: wrong values, so refused
    s = matmul(epilogue=True)
    s.compute_at("a.inp", "epi", "n")  # epi reads c and bias.acc, not a.inp
    with pytest.raises(ScheduleError, match=r"^stage a.inp is computed at epi.n, but c reads it outside "
                                            r"that loop; compute it at a loop that encloses every reader$"):
        lower(s, TINY)
