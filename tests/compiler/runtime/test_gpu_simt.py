"""The GPU kernels' indexing checked without a GPU: every operator, each schedule kind, run by
the lockstep interpreter against its numpy reference; and the interpreter catches races,
divergent barriers, out-of-range accesses and colliding writes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compiler.lower.gpu import GpuKernelIR
from compiler.lower.lower import LoweredFunc
from compiler.ops.gpu import (
    Conv2d,
    Eltwise,
    GlobalAvgPool2d,
    GpuOp,
    LayerNorm,
    MatMul,
    MaxPool2d,
    Softmax,
    Transpose,
)
from compiler.runtime.gpu_simt import SimtError, simulate
from compiler.target.gpu import gpu_preset
from compiler.te import expr as E
from compiler.te.tensor import Tensor, placeholder
from compiler.tir import stmt as S
from compiler.tir.visit import post_order

SM80 = gpu_preset("sm_80")

SMALL: list[GpuOp] = [
    MatMul(1, 32, 32, 16),
    MatMul(2, 16, 32, 8, b_batched=True, residual=True),
    MatMul(1, 3, 10, 12, transpose_b=True, bias=True, act_lo=0.0),
    MatMul(1, 16, 16, 8, transpose_b=True, bias=True, gelu=True),
    Conv2d((1, 8, 8, 8), (16, 8, 3, 3), pad=(1, 1, 1, 1), bias=True, act_lo=0.0),
    Conv2d((1, 4, 9, 9), (8, 4, 3, 3), stride=(2, 2), pad=(1, 1, 1, 1), residual=True),
    Conv2d((1, 6, 7, 7), (6, 1, 3, 3), pad=(1, 1, 1, 1), group=6, act_lo=0.0, act_hi=6.0),
    Conv2d((2, 4, 5, 5), (8, 2, 1, 1), group=2),
    MaxPool2d((1, 3, 9, 9), (3, 3), (2, 2), (1, 1, 1, 1)),
    GlobalAvgPool2d((2, 8, 5, 5)),
    Eltwise("add", (2, 4, 8), (8,)),
    Eltwise("div", (4, 1), (1, 6)),
    Eltwise("gelu", (4, 32)),
    Eltwise("tanh", (3, 7)),
    Eltwise("hardswish", (16,)),
    Eltwise("clip", (5, 3), lo=0.0, hi=6.0),
    Transpose((2, 3, 4, 5), (0, 2, 1, 3)),
    Softmax((1, 2, 4, 16)),
    LayerNorm((2, 4, 32), 1e-5),
]


def _kinds(op: GpuOp) -> list:  # type: ignore[type-arg]
    """The default point and, where it differs, the first point of each other schedule kind."""
    space = op.space(SM80)
    default = op.default_knobs(SM80)
    other = next((k for k in space if k.shared != default.shared), None)
    return [default] + ([other] if other is not None else [])


@pytest.mark.parametrize("op", SMALL, ids=[f"{op.op}{i}" for i, op in enumerate(SMALL)])
def test_every_schedule_kind_matches_numpy(op: GpuOp) -> None:
    inputs = op.random_inputs(seed=7)
    want = op.reference(*inputs)
    for knobs in _kinds(op):
        (got,) = simulate(op.lower(SM80, knobs), inputs)
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=2e-5, atol=2e-5, err_msg=str(knobs))


def _without_barriers(kernel: GpuKernelIR) -> GpuKernelIR:
    body = post_order(kernel.func.body, lambda n: n.body if isinstance(n, S.Attr) else n)
    return dataclasses.replace(kernel, func=dataclasses.replace(kernel.func, body=body))


def test_a_missing_barrier_is_a_race() -> None:
    op = MatMul(1, 32, 32, 16)
    kernel = op.lower(SM80, op.default_knobs(SM80))
    inputs = op.random_inputs(0)
    simulate(kernel, inputs)  # with its barriers: no race
    with pytest.raises(SimtError, match=r"touches shared .*\.shared element written by thread \d+ since the "
                                        r"last barrier"):
        simulate(_without_barriers(kernel), inputs)


def _hand(body: S.Stmt, out: Tensor, block: int = 8) -> GpuKernelIR:
    return GpuKernelIR(LoweredFunc("k", body, [], [out]), (1, 1, 1), (block, 1, 1), 0)


def test_threads_writing_one_element_collide() -> None:
    out, i = placeholder((8,), "float32", "out"), E.Var("i")
    body = S.For(i, 8, S.Store(out, (E.const(0),), E.const(1.0, "float32")), "threadIdx.x")
    with pytest.raises(SimtError, match=r"store to out: several threads write one element in the "
                                        r"same statement"):
        simulate(_hand(body, out), [])


def test_an_index_outside_the_tensor_is_caught() -> None:
    out, i = placeholder((8,), "float32", "out"), E.Var("i")
    body = S.For(i, 8, S.Store(out, (i + 1,), E.const(1.0, "float32")), "threadIdx.x")
    with pytest.raises(SimtError, match=r"store to out: index 8 outside \[0, 8\) in \(i \+ 1\)"):
        simulate(_hand(body, out), [])


def test_a_barrier_some_threads_skip_is_caught() -> None:
    out, i = placeholder((8,), "float32", "out"), E.Var("i")
    store = S.Store(out, (i,), E.const(1.0, "float32"))
    body = S.For(i, 4, S.Attr("barrier", "shared", "out", store), "threadIdx.x")
    with pytest.raises(SimtError, match=r"barrier around out: only 4 of 8 threads reach it"):
        simulate(_hand(body, out), [])


def test_guarded_threads_leave_the_rest_untouched() -> None:
    out, i = placeholder((8,), "float32", "out"), E.Var("i")
    body = S.For(i, 5, S.Store(out, (i,), E.const(1.0, "float32")), "threadIdx.x")
    (got,) = simulate(_hand(body, out), [])
    assert got[:5].tolist() == [1.0] * 5 and np.isnan(got[5:]).all()
