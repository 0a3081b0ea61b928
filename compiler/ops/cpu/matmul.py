"""Matrix products on the host: MatMul of two activations and the frontend's float Gemm.

- matmul(a[..., M, K], b[..., K, N]) -> out[..., M, N], numpy's matmul: the batch dimensions
  broadcast, a 1-d `a` is a row (M = 1) and a 1-d `b` a column (N = 1), kept in the output shape
  (the caller reshapes); float32, or integers that wrap like numpy's;
- gemm(data[M, K], weight[N, K], bias[N]) -> out[M, N] = data @ weight.T + bias, float32: ONNX
  Gemm in the canonical form compiler.graph.passes.normalize_gemm writes (transB=1, transA=0,
  alpha = beta = 1), the weight any tensor of its shape.

No fast-math: every product and sum is rounded to float32 as written, the sums in k order,
except where a reduction over k is vectorised (LLVM then keeps a few partial sums).

matmul's schedule is a register tile: 8 (or 4, 2) rows by 16 (or 8) columns of the output are
accumulated over the whole of K, the columns vectorised, the rows unrolled, so each value of b
loaded serves 8 rows and each of a 16 columns (measured on the reference machine: 2.4x faster
than one row at a time, and as fast as single-threaded OpenBLAS for bert-tiny's attention).  A
product with fewer than 4 columns takes dot products over K instead.  gemm takes a dot product
per output, vectorised over K (both operands contiguous, nothing transposed: for the classifier
rows it serves, M = 1, a transpose of the weight would cost as much as the product); from 32
rows on, it transposes the weight into a temporary and tiles like matmul.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_shape
from compiler.ops.cpu.eltwise import _index, broadcast_shape
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum

ROW_TILES, COL_TILES = (8, 4, 2), (16, 8)
GEMM_TILED_ROWS = 32  # gemm transposes the weight and tiles from this many rows on


def _tile(extent: int, factors: tuple[int, ...]) -> int | None:
    return next((f for f in factors if extent % f == 0), None)


def tile_product(s: Schedule, stage: str, rows: str, cols: str, k: str, m: int, n: int) -> None:
    """Schedule `stage` (spatial ... rows, cols, reduction k) as a register tile: rows x cols
    blocks accumulated over k, the columns vectorised; few columns: dot products over k."""
    if n < 4:
        vectorize_loop(s, stage, k, s.stage(stage).reduce_axes[0].extent)
        return
    ti, tj = _tile(m, ROW_TILES), _tile(n, COL_TILES)
    row = s.split(stage, rows, ti)[1] if ti else None
    col = s.split(stage, cols, tj)[1] if tj else cols
    inner = [row, col] if row else [col]
    s.reorder(stage, *(a for a in s.stage(stage).leaves if a not in (k, *inner)), k, *inner)
    s.vectorize(stage, col)


@dataclass(frozen=True)
class MatMul(HostOp):
    """numpy's matmul of two tensors of rank >= 1 (see the module docstring)."""

    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    dtype: str = "float32"
    op: ClassVar[str] = "matmul"

    def __post_init__(self) -> None:
        object.__setattr__(self, "a_shape", check_shape(self.op, self.a_shape))
        object.__setattr__(self, "b_shape", check_shape(self.op, self.b_shape))
        check_dtype(self.op, "operand", self.dtype, NUMERIC)
        sa, sb = self._promoted()
        if sa[-1] != sb[-2]:
            raise ValueError(f"{self.op}: inner dimensions of {self.a_shape} and {self.b_shape} differ")
        broadcast_shape(self.op, sa[:-2], sb[:-2])

    def _promoted(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        sa = (1, *self.a_shape) if len(self.a_shape) == 1 else self.a_shape
        sb = (*self.b_shape, 1) if len(self.b_shape) == 1 else self.b_shape
        return sa, sb

    @property
    def out_shape(self) -> tuple[int, ...]:
        sa, sb = self._promoted()
        return (*broadcast_shape(self.op, sa[:-2], sb[:-2]), sa[-2], sb[-1])

    def tensors(self) -> dict[str, Tensor]:
        sa, sb = self._promoted()
        a = placeholder(self.a_shape, self.dtype, "a")
        b = placeholder(self.b_shape, self.dtype, "b")
        rk = reduce_axis(sa[-1], "rk")

        def product(*i: E.Expr) -> E.Expr:
            batch, row, col = i[:-2], i[-2], i[-1]
            ia = (rk.var,) if len(self.a_shape) == 1 else (*_index(sa[:-2], batch), row, rk.var)
            ib = (rk.var,) if len(self.b_shape) == 1 else (*_index(sb[:-2], batch), rk.var, col)
            return sum(a[ia] * b[ib], rk)

        return {"a": a, "b": b, "out": compute(self.out_shape, product, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        rank = len(self.out_shape)
        m, n = self.out_shape[-2:]
        tile_product(s, "out", f"i{rank - 2}", f"i{rank - 1}", "rk", m, n)
        return s

    def reference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[override]
        sa, sb = self._promoted()
        if self.dtype == "float32":
            out = np.matmul(a.reshape(sa).astype(np.float64), b.reshape(sb).astype(np.float64))
        else:  # exact in int64, wrapped by the cast (two's complement)
            out = np.matmul(a.reshape(sa).astype(np.int64), b.reshape(sb).astype(np.int64))
        return out.astype(self.dtype)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Gemm(HostOp):
    """data[M, K] @ weight[N, K].T (+ bias[N]), float32 (see the module docstring)."""

    shape: tuple[int, int]
    weight_shape: tuple[int, int]
    bias: bool = True
    op: ClassVar[str] = "gemm"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, rank=2))
        object.__setattr__(self, "weight_shape", check_shape(self.op, self.weight_shape, rank=2))
        if self.weight_shape[1] != self.shape[1]:
            raise ValueError(f"{self.op}: weight {self.weight_shape} does not take inputs of "
                             f"{self.shape[1]} features (data {self.shape})")

    @property
    def tiled(self) -> bool:
        return self.shape[0] >= GEMM_TILED_ROWS and self.weight_shape[0] >= 4

    def tensors(self) -> dict[str, Tensor]:
        (m, k), n = self.shape, self.weight_shape[0]
        data = placeholder((m, k), "float32", "data")
        weight = placeholder((n, k), "float32", "weight")
        ins = {"data": data, "weight": weight}
        rk = reduce_axis(k, "rk")
        if self.tiled:
            wt = compute((k, n), lambda c, j: weight[j, c], "wt")
            acc = compute((m, n), lambda i, j: sum(data[i, rk] * wt[rk, j], rk), "acc")
        else:
            acc = compute((m, n), lambda i, j: sum(data[i, rk] * weight[j, rk], rk), "acc")
        if not self.bias:
            return {**ins, "out": compute((m, n), lambda i, j: acc[i, j], "out")}
        bias = placeholder((n,), "float32", "bias")
        return {**ins, "bias": bias, "out": compute((m, n), lambda i, j: acc[i, j] + bias[j], "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        m, n = self.shape[0], self.weight_shape[0]
        if self.tiled:
            tile_product(s, "acc", "i", "j", "rk", m, n)
            vectorize_loop(s, "out", "j", n)
        else:
            s.compute_at("acc", "out", "j")  # one float in the stack: a register
            vectorize_loop(s, "acc", "rk", self.shape[1])
        return s

    def reference(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:  # type: ignore[override]
        out = data.astype(np.float64) @ weight.astype(np.float64).T
        if bias is not None:
            out = out + bias.astype(np.float64)
        return out.astype(np.float32)  # type: ignore[no-any-return]
