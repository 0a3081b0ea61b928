"""`lower_alu`: element-wise nests over acc marked `pragma alu` become ALU micro-ops.

Expected from the contract: the value's spine, innermost first, is one in-place operation per
step (a tensor operand or an immediate), each its own nest over the loops outside the lanes;
`- k` and `<< k` are ADD -k and SHR -k; a spine that starts from another buffer than the
destination first clears it (MUL 0) and adds that buffer.
"""

from __future__ import annotations

import pytest

from compiler import te
from compiler.build import build
from compiler.errors import ScheduleError
from compiler.schedule import Schedule
from compiler.tir import stmt as S
from compiler.tir.printer import describe
from compiler.tir.visit import leaves
from tests.compiler.passes.cases import TINY, matmul


def test_the_epilogue_becomes_one_alu_nest_per_step():
    # min(max((c + bias) >> 8, 0), 127) in place over c's element (epi shares c's buffer):
    # ADD bias.acc (after c's 1 element, at channel block n.o), SHR 8, MAX 0, MIN 127
    expected = """\
dma_load ACC bias[0] <-> sram[1] y=1 x=2 stride=2  // compute
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
    for epi.m in 0..1:
      for epi.n in 0..1:
        alu ADD acc[(epi.m + epi.n)], acc[((epi.n + out.n.o) + 1)]
    for epi.m in 0..1:
      for epi.n in 0..1:
        alu SHR acc[(epi.m + epi.n)], imm 8
    for epi.m in 0..1:
      for epi.n in 0..1:
        alu MAX acc[(epi.m + epi.n)], imm 0
    for epi.m in 0..1:
      for epi.n in 0..1:
        alu MIN acc[(epi.m + epi.n)], imm 127
    dma_store OUT out[((out.m * 2) + out.n.o)] <-> sram[0] y=1 x=1 stride=1  // store"""
    assert build(matmul(epilogue=True), TINY).print_ir("lower_alu") == expected


def _eltwise(body, *, res_at: str | None = None, cache_y: bool = True, y_index=None):  # type: ignore[no-untyped-def]
    """out = int8(res), res = body(x, y) in acc over two int8 tensors of 2 acc elements brought
    into acc (y optionally left in DRAM, or read at `y_index`); res optionally computed per output
    element, in its own buffer."""
    x = te.placeholder((2, 1, 4), "int8", "x")
    y = te.placeholder((2, 1, 4), "int8", "y")
    yi = y_index or (lambda i, b, j: (i, b, j))
    res = te.compute((2, 1, 4), lambda i, b, j: body(te.cast("int32", x[i, b, j]),
                                                     te.cast("int32", y[yi(i, b, j)])), "res")
    out = te.compute((2, 1, 4), lambda i, b, j: te.cast("int8", res[i, b, j]), "out")
    s = Schedule(out)
    s.set_scope("res", "acc")
    for name in [n for n in ("x", "y") if n in s.inputs and (cache_y or n == "x")]:
        s.cache_read(name, "acc", ["res"])
        s.pragma(f"{name}.acc", "i0", "dma_copy")
    if res_at:
        s.compute_at("res", "out", res_at)
    s.pragma("res", "i", "alu")
    s.pragma("out", "b" if res_at else "i", "dma_copy")
    return s


def _alu_ops(sched: Schedule) -> list[str]:
    body = build(sched, TINY).ir["lower_alu"]
    return [describe(s) for s in leaves(body) if isinstance(s, S.Uop) and s.kind == "alu"]


@pytest.mark.parametrize("body,expected", [
    (lambda x, y: x + y, ["alu ADD acc[res.i], acc[(res.i + 2)]"]),
    (lambda x, y: te.maximum(y, x), ["alu MAX acc[res.i], acc[(res.i + 2)]"]),
    (lambda x, y: x - 5, ["alu ADD acc[res.i], imm -5"]),
    (lambda x, y: x << 2, ["alu SHR acc[res.i], imm -2"]),
    (lambda x, y: 3 * x, ["alu MUL acc[res.i], imm 3"]),
    (lambda x, y: te.minimum(-1, x >> 1), ["alu SHR acc[res.i], imm 1", "alu MIN acc[res.i], imm -1"]),
    (lambda x, y: (x + y) * 3 - 1, ["alu ADD acc[res.i], acc[(res.i + 2)]", "alu MUL acc[res.i], imm 3",
                                     "alu ADD acc[res.i], imm -1"]),
], ids=["add", "max", "sub-imm", "shl-imm", "mul-imm", "shr-min", "chain"])
def test_the_spine_in_place_over_its_first_operand(body, expected):
    # res computes in place over x.acc (its only reader, same region): no clearing first
    assert _alu_ops(_eltwise(body)) == expected


def test_a_spine_from_another_buffer_clears_the_destination_first():
    # res per output element (its loop res.i of one iteration), in its own buffer after x.acc
    # and y.acc (2 elements each), which it reads at out.i + res.i
    assert _alu_ops(_eltwise(lambda x, y: x + y, res_at="i")) == [
        "alu MUL acc[(res.i + 4)], imm 0", "alu ADD acc[(res.i + 4)], acc[(out.i + res.i)]",
        "alu ADD acc[(res.i + 4)], acc[((out.i + res.i) + 2)]"]


# -- errors ---------------------------------------------------------------------------------------


def _error(sched: Schedule, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        build(sched, TINY)


def test_the_pragma_must_hold_only_the_operation():
    s = matmul(epilogue=True)
    s.pragma("out", "n.o", "alu")  # around c's and epi's nests and the store
    _error(s, "^alu pragma of stage out: the loops from the pragma inward must hold only the operation$")


def test_the_alu_writes_acc():
    s = matmul(epilogue=True)
    s.pragma("out", "n.i", "alu")  # instead of the store's dma_copy
    _error(s, "^alu pragma of stage out: the ALU writes the acc scope, not out$")


def test_the_pragma_must_enclose_the_lanes():
    s = matmul(epilogue=True)
    s.pragma("epi", "o", "alu")
    _error(s, "^alu pragma of stage epi: the two innermost loops must run over the acc element's lanes$")


def test_tensor_operands_must_be_in_acc():
    _error(_eltwise(lambda x, y: x + y, cache_y=False),
           r"^alu pragma of stage res: tensor operand y\[res\.i, res\.b, res\.j\] must be in the acc scope "
           r"\(cache_read it into acc\)$")


def test_tensor_operands_must_be_indexed_by_the_lanes_last():
    _error(_eltwise(lambda x, y: x + y, y_index=lambda i, b, j: (i, b, 3 - j)),
           r"^alu pragma of stage res: tensor operand y\.acc\[res\.i, res\.b, \(\(res\.j \* -1\) \+ 3\)\] "
           "must be indexed by the lanes last$")
