"""Matrix products on the host: MatMul of two activations and the frontend's float Gemm.

- matmul(a[..., M, K], b[..., K, N]) -> out[..., M, N], numpy's matmul: the batch dimensions
  broadcast, a 1-d `a` is a row (M = 1) and a 1-d `b` a column (N = 1), kept in the output shape
  (the caller reshapes); float32, or integers that wrap like numpy's;
- gemm(data[M, K], weight[N, K], bias[N]) -> out[M, N] = data @ weight.T + bias, float32: ONNX
  Gemm in the canonical form compiler.graph.passes.normalize_gemm writes (transB=1, transA=0,
  alpha = beta = 1), the weight any tensor of its shape.

No fast-math: every product and sum is rounded to float32 as written, the sums in k order,
except where a reduction over k is vectorised (LLVM then keeps a few partial sums).

matmul's schedule, for float32 with columns a multiple of the host's vector, is a register tile
(`matmul_tile`): a block of rows by one or two vectors of columns accumulated over the whole of
K in a small temporary (registers: one broadcast of `a` serves every vector of the block, one
vector of `b` every row), the column blocks outermost so a block's panel of `b` stays in L1
over all rows, then taken through the epilogue into the output with vector stores.  The float
MatMul may fuse its epilogue (compiler.runtime.cpu_model): `bias` adds a float32[N] vector,
`residual` a tensor shaped like the output, `gelu` applies GELU (erf form) last; each step is
rounded to float32 as the separate operators round it (products and sums may fuse into FMAs:
`contract`).  Other products keep the older tile: 8 (or 4, 2) rows by 16 (or 8) columns of the
output accumulated in place, a product with fewer than 4 columns dot products over K.  gemm
takes a dot product per output, vectorised over K (both operands contiguous, nothing transposed:
for the classifier rows it serves, M = 1, a transpose of the weight would cost as much as the
product); from 32 rows on, it transposes the weight into a temporary and tiles like matmul.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_gemm, check_shape
from compiler.ops.cpu.eltwise import _index, broadcast_shape
from compiler.ops.cpu.norm import Gelu, gelu_expr
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.target.cpu import CpuTarget, host_target
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


def matmul_tile(m: int, n: int, dtype: str, target: CpuTarget | None = None) -> tuple[int, int] | None:
    """The float register tile of an (m x K) @ (K x n) product on `target` (the host by
    default): (rows, columns), two vectors of columns where n allows (else one) and the largest
    divisor of m that leaves four vector registers free (on AVX2, 16 ymm: 4 rows x 16 columns,
    measured on bert-tiny's products 2x faster than the in-place 8 x 16 tile, about OpenBLAS's
    speed); None where no tile applies (integers, or columns no multiple of a vector)."""
    if dtype != "float32":
        return None
    target = host_target() if target is None else target
    vec = target.lanes(32)
    vectors = next((v for v in (2, 1) if n % (v * vec) == 0), 0)
    if not vectors:
        return None
    most = max(1, min(8, (target.vector_registers - 4) // vectors))
    rows = max(r for r in range(1, most + 1) if m % r == 0)
    return rows, vectors * vec


@dataclass(frozen=True)
class MatMul(HostOp):
    """numpy's matmul of two tensors of rank >= 1 (see the module docstring), then the fused
    epilogue: `bias` (a float32[N] input), `residual` (an input shaped like the output), `gelu`."""

    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    dtype: str = "float32"
    bias: bool = False
    residual: bool = False
    gelu: bool = False
    op: ClassVar[str] = "matmul"
    contract: ClassVar[bool] = True  # float products may fuse into FMAs (integers: no effect)

    def __post_init__(self) -> None:
        object.__setattr__(self, "a_shape", check_shape(self.op, self.a_shape))
        object.__setattr__(self, "b_shape", check_shape(self.op, self.b_shape))
        check_dtype(self.op, "operand", self.dtype, NUMERIC)
        sa, sb = self._promoted()
        if sa[-1] != sb[-2]:
            raise ValueError(f"{self.op}: inner dimensions of {self.a_shape} and {self.b_shape} differ")
        broadcast_shape(self.op, sa[:-2], sb[:-2])
        for name in ("bias", "residual", "gelu"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ValueError(f"{self.op}: {name} must be a bool, not {getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        if self.epilogue and self.tile is None:
            raise ValueError(f"{self.op}: a fused epilogue needs the float register tile, which "
                             f"{self.dtype} {self.out_shape} does not take")

    def _promoted(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        sa = (1, *self.a_shape) if len(self.a_shape) == 1 else self.a_shape
        sb = (*self.b_shape, 1) if len(self.b_shape) == 1 else self.b_shape
        return sa, sb

    @property
    def out_shape(self) -> tuple[int, ...]:
        sa, sb = self._promoted()
        return (*broadcast_shape(self.op, sa[:-2], sb[:-2]), sa[-2], sb[-1])

    @property
    def epilogue(self) -> bool:
        return self.bias or self.residual or self.gelu

    @property
    def tile(self) -> tuple[int, int] | None:
        """The register tile (rows, columns) of `matmul_tile`, or None: the in-place tile."""
        m, n = self.out_shape[-2:]
        return matmul_tile(m, n, self.dtype)

    def tensors(self) -> dict[str, Tensor]:
        sa, sb = self._promoted()
        a = placeholder(self.a_shape, self.dtype, "a")
        b = placeholder(self.b_shape, self.dtype, "b")
        ins = {"a": a, "b": b}
        rk = reduce_axis(sa[-1], "rk")

        def product(*i: E.Expr) -> E.Expr:
            batch, row, col = i[:-2], i[-2], i[-1]
            ia = (rk.var,) if len(self.a_shape) == 1 else (*_index(sa[:-2], batch), row, rk.var)
            ib = (rk.var,) if len(self.b_shape) == 1 else (*_index(sb[:-2], batch), rk.var, col)
            return sum(a[ia] * b[ib], rk)

        if self.tile is None:
            return {**ins, "out": compute(self.out_shape, product, "out")}
        if self.bias:
            ins["bias"] = placeholder((self.out_shape[-1],), "float32", "bias")
        if self.residual:
            ins["residual"] = placeholder(self.out_shape, "float32", "residual")
        acc = compute(self.out_shape, product, "acc")

        def out(*i: E.Expr) -> E.Expr:
            value: E.Expr = acc[i]
            if self.bias:
                value = value + ins["bias"][i[-1]]
            if self.residual:
                value = value + ins["residual"][i]
            return gelu_expr(value) if self.gelu else value

        return {**ins, "out": compute(self.out_shape, out, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        rank = len(self.out_shape)
        m, n = self.out_shape[-2:]
        rows, cols = f"i{rank - 2}", f"i{rank - 1}"
        if self.tile is None:
            tile_product(s, "out", rows, cols, "rk", m, n)
            return s
        tm, tn = self.tile
        s.split("out", rows, tm)
        s.split("out", cols, tn)
        s.reorder("out", *(f"i{d}" for d in range(rank - 2)), f"{cols}.o", f"{rows}.o",
                  f"{rows}.i", f"{cols}.i")
        s.compute_at("acc", "out", f"{rows}.o")  # the tile: tm x tn accumulators
        s.reorder("acc", "rk", rows, cols)
        s.vectorize("acc", cols)
        s.vectorize("out", f"{cols}.i")
        return s

    def reference(self, a: np.ndarray, b: np.ndarray, *extra: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """`extra`: the bias if `bias`, then the residual if `residual`."""
        sa, sb = self._promoted()
        if self.dtype != "float32":  # exact in int64, wrapped by the cast (two's complement)
            out = np.matmul(a.reshape(sa).astype(np.int64), b.reshape(sb).astype(np.int64))
            return out.astype(self.dtype)  # type: ignore[no-any-return]
        out = np.matmul(a.reshape(sa).astype(np.float64), b.reshape(sb).astype(np.float64)).astype(np.float32)
        rest = list(extra)
        if self.bias:
            out = out + rest.pop(0)
        if self.residual:
            out = out + rest.pop(0)
        return Gelu(out.shape).reference(out) if self.gelu else out


@dataclass(frozen=True)
class Gemm(HostOp):
    """data[M, K] @ weight[N, K].T (+ bias[N]), float32 (see the module docstring)."""

    shape: tuple[int, int]
    weight_shape: tuple[int, int]
    bias: bool = True
    op: ClassVar[str] = "gemm"

    def __post_init__(self) -> None:
        check_gemm(self)

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
