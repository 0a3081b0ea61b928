"""Error paths of lowering, the passes and emission, each matched by its message."""

from __future__ import annotations

import json

import pytest

from compiler import te
from compiler.build import build
from compiler.errors import ScheduleError, TensorExprError
from compiler.ops.accel import (
    Conv2d,
    Conv2dKnobs,
    Conv2dSpec,
    Dense,
    DenseKnobs,
    DenseSpec,
    compile_op,
    knobs_from_json,
)
from compiler.schedule import Schedule
from compiler.target import AcceleratorTarget
from hw.config import PRESETS

TINY = AcceleratorTarget(PRESETS["tiny"])
SHAPE = (2, 1, 1, 4)  # two tiny acc elements


def _alu(body, out_dtype="int8"):  # type: ignore[no-untyped-def]
    """Build `out = cast(body(a, b))` with a, b int8 brought into acc and `res` on the ALU."""
    a = te.placeholder(SHAPE, "int8", "a")
    b = te.placeholder(SHAPE, "int8", "b")
    res = te.compute(SHAPE, lambda i, j, x, y: body(te.cast("int32", a[i, j, x, y]),
                                                    te.cast("int32", b[i, j, x, y])), "res")
    out = te.compute(SHAPE, lambda i, j, x, y: te.cast(out_dtype, res[i, j, x, y]), "out")
    s = Schedule(out)
    s.set_scope("res", "acc")
    for name in ("a", "b"):
        s.cache_read(name, "acc", ["res"])
        s.pragma(f"{name}.acc", "i0", "dma_copy")
    s.pragma("res", "i", "alu")
    s.pragma("out", "i", "dma_copy")
    return s


@pytest.mark.parametrize("body,match", [
    (lambda x, y: x // 2 + y, r"\(int32\(a\.acc\[.*\]\) // 2\) is not an ALU operation"),
    (lambda x, y: x - y, r"- of two tensors is not an ALU operation"),
    (lambda x, y: te.if_then_else(te.lt(x, 0), x, y), "is not an ALU operation"),
    (lambda x, y: (x + 1) * (y + 2), "combines two computed values; split it into stages"),
])
def test_alu_lowering_errors(body, match):
    with pytest.raises(ScheduleError, match=match):
        build(_alu(body), TINY)


def test_alu_lowering_accepts_what_it_can():
    build(_alu(lambda x, y: te.minimum(x + y, 100) << 1), TINY)


def test_store_must_narrow_to_the_out_dtype():
    with pytest.raises(ScheduleError, match="a store copies an acc buffer into a int8 tensor, not acc into "
                                            "int32"):
        build(_alu(lambda x, y: x + y, out_dtype="int32"), TINY)


def test_padding_must_be_zeros():
    a = te.placeholder((1, 1, 4, 4, 1, 4), "int8", "a")
    pad = te.compute((1, 1, 6, 6, 1, 4), lambda n, c, y, x, b, i: te.if_then_else(
        te.all_of(te.ge(y, 1), te.lt(y, 5), te.ge(x, 1), te.lt(x, 5)), a[n, c, y - 1, x - 1, b, i],
        1), "pad")
    out = te.compute((1, 1, 6, 6, 1, 4), lambda n, c, y, x, b, i: pad[n, c, y, x, b, i], "out")
    s = Schedule(out)
    s.set_scope("pad", "inp")
    s.pragma("pad", "y", "dma_copy")
    with pytest.raises(ScheduleError, match="dma_copy of stage pad: padding must be zeros, not 1"):
        build(s, TINY)


def test_tile_entirely_in_padding():
    op = Conv2d(Conv2dSpec(1, 4, 4, 4, 4, 1, 1, 1), TINY)  # a 1x1 kernel with padding 1
    knobs = Conv2dKnobs(tile_h=1, tile_w=6)
    assert not op.fits(knobs)
    with pytest.raises(ScheduleError, match="dma_copy of stage data_pad: a tile lies entirely in the "
                                            "padding; use larger tiles"):
        compile_op(op, knobs)


def test_more_padding_than_the_dma_holds():
    vta = AcceleratorTarget(PRESETS["vta"])
    op = Conv2d(Conv2dSpec(1, 16, 2, 2, 16, 17, 1, 16), vta)
    knobs = Conv2dKnobs(tile_h=1, tile_w=18)
    assert not op.fits(knobs)
    with pytest.raises(ScheduleError, match="dma_copy of stage data_pad: 16 padding elements, more than "
                                            "the DMA's 15"):
        compile_op(op, knobs)


def test_record_errors_on_stage_state():
    op = Dense(DenseSpec(4, 16, 16), TINY)
    s = Schedule(op.tensors()["out"])
    s.split("gemm", "m", 2)
    with pytest.raises(ScheduleError, match=r"cache_write\(gemm, scope=acc\): apply cache_write before "
                                            "other records on gemm"):
        s.cache_write("gemm", "acc")
    s.compute_inline("epi")
    with pytest.raises(ScheduleError, match="stage epi was inlined"):
        s.compute_at("epi", "out", "m")
    with pytest.raises(ScheduleError, match="an output stage cannot be inlined"):
        s.compute_inline("out")
    with pytest.raises(ScheduleError, match="name at least one reader"):
        s.cache_read("data", "inp", [])


def test_tensor_names_must_be_unique():
    a = te.placeholder((4,), "int8", "x")
    b = te.placeholder((4,), "int8", "x")
    c = te.compute((4,), lambda i: a[i] + b[i], "c")
    with pytest.raises(ScheduleError, match="two tensors are named 'x'"):
        Schedule(c)


def test_bad_knobs_in_a_schedule_file():
    op = Dense(DenseSpec(4, 16, 16), TINY)
    with pytest.raises(ScheduleError, match=r"dense knobs \{'tile_q': 2\}: .*tile_q"):
        knobs_from_json(op, json.loads('{"tile_q": 2}'))


# -- tensor expressions: each TensorExprError by its message -------------------------------------


VAR = te.Var("i")
A8 = te.placeholder((4,), "int8", "a")
B32 = te.placeholder((4,), "int32", "b")


@pytest.mark.parametrize("build_expr,match", [
    (lambda: te.lt(VAR, 1) + te.lt(VAR, 2), r"^'\+' needs integer operands, not conditions$"),
    (lambda: te.all_of(), "^all_of needs at least one condition$"),
    (lambda: te.all_of(te.lt(VAR, 1), VAR), "^'and' needs two conditions, not bool and int32$"),
    (lambda: te.call("exp", 1.0, 2.0), "^exp takes 1 operand, not 2$"),
    (lambda: te.if_then_else(te.lt(VAR, 1), A8[VAR], B32[VAR]), "^if_then_else branches have dtypes int8 and "
                                                          "int32$"),
    (lambda: A8[te.cast("int8", VAR)], r"^index int8\(i\) of a must be int32, not int8$"),
    (lambda: te.evaluate(A8[0] + 1, {}), r"^cannot evaluate a\[0\] to a constant$"),
    (lambda: te.evaluate(VAR + 1, {}), "^variable i has no value$"),
    (lambda: te.placeholder((0, 4), "int8", "x"), r"^placeholder x: every dimension must be a positive "
                                                  r"int, not \(0, 4\)$"),
    (lambda: te.compute((4,), lambda i: i, "c", dtype="int8"), "^compute c: body has dtype int32, "
                                                              "declared int8$"),
    (lambda: te.compute((4,), lambda i: te.lt(i, 2), "c"), "^compute c: the body is a condition, not a "
                                                          "value$"),
    (lambda: te.compute((4,), lambda i: te.sum(A8[te.reduce_axis(4, "i")], te.reduce_axis(4, "i")), "c"),
     r"^compute c: reduce axis \['i'\] has the name of a spatial axis$"),
], ids=["add-conditions", "all-of-none", "and-integer", "exp-arity", "select-dtypes", "index-dtype",
        "evaluate-load", "evaluate-free-var", "zero-dim", "declared-dtype", "condition-body",
        "reduce-axis-name"])
def test_tensor_expression_errors(build_expr, match):
    with pytest.raises(TensorExprError, match=match):
        build_expr()


def test_dense_rows_come_in_whole_batches():
    rect = AcceleratorTarget(PRESETS["rect"])  # batch 2
    with pytest.raises(ScheduleError, match="^dense m=3 is not a multiple of the core's batch 2$"):
        Dense(DenseSpec(3, 16, 16), rect)


def test_no_default_when_no_point_fits():
    # n blocks of biases plus at least one accumulator element: 255 + 1 fill tiny's 256 exactly
    assert Dense(DenseSpec(1, 4, 4 * 255), TINY).default_knobs() == DenseKnobs()
    with pytest.raises(ScheduleError, match="^no schedule point fits this accelerator's scratchpads$"):
        Dense(DenseSpec(1, 4, 4 * 256), TINY).default_knobs()
