"""Pooling on NCHW tensors: max pool, average pool (ONNX MaxPool/AveragePool with symmetric pads,
floor mode), global average pool.

Max pool is separable: the max over the window's rows first (contiguous, vectorised), then over
its columns.  Padded positions never win a max (they are skipped, as ONNX does) and, unless
`count_include_pad`, do not count in an average.  Schedules keep the output width innermost, so
LLVM vectorises across output pixels; a padded input is first copied into a zero/-inf-padded
row block (computed at the output channel), so the window loops read without conditions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_shape, pair
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, max_reduce, placeholder, reduce_axis, sum


@dataclass(frozen=True)
class _Window:
    """Kernel, stride and pads of a 2-D window over NCHW, with the output size."""

    shape: tuple[int, ...]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]

    @property
    def out_shape(self) -> tuple[int, ...]:
        (n, c, h, w), (kh, kw), (sh, sw), (ph, pw) = self.shape, self.kernel, self.stride, self.pad
        return n, c, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1


def _window(op: HostOp) -> _Window:
    """The window of a pooling op, its parameters checked and normalised (shape and pairs
    become tuples, so the op stays hashable)."""
    name = op.op
    shp = check_shape(name, op.shape, rank=4)  # type: ignore[attr-defined]
    kh, kw = pair(name, "kernel", op.kernel, 1)  # type: ignore[attr-defined]
    win = _Window(shp, (kh, kw), pair(name, "stride", op.stride, 1), pair(name, "pad", op.pad, 0))  # type: ignore[attr-defined]
    for field, value in (("shape", shp), ("kernel", win.kernel), ("stride", win.stride), ("pad", win.pad)):
        object.__setattr__(op, field, value)
    ph, pw = win.pad
    if ph >= kh or pw >= kw:
        raise ValueError(f"{name}: pad {win.pad} must be smaller than the kernel {win.kernel}")
    if win.out_shape[2] < 1 or win.out_shape[3] < 1:
        raise ValueError(f"{name}: kernel {win.kernel} is larger than the padded input "
                         f"{shp[2] + 2 * ph}x{shp[3] + 2 * pw}")
    return win


def _padded(data: Tensor, win: _Window, fill: E.Expr) -> Tensor:
    """data with `fill` around it: (N, C, H + 2ph, W + 2pw)."""
    n, c, h, w = win.shape
    ph, pw = win.pad
    return compute(
        (n, c, h + 2 * ph, w + 2 * pw),
        lambda b, ch, y, x: E.if_then_else(
            E.all_of(E.ge(y, ph), E.lt(y, h + ph), E.ge(x, pw), E.lt(x, w + pw)),
            data[b, ch, y - ph, x - pw], fill),
        "data_pad",
    )


def _window_schedule(s: Schedule, padded: bool) -> Schedule:
    """Output width innermost (reductions over the window outside it); the padded copy per
    (image, channel), so it stays small."""
    s.reorder("out", "ry", "rx", "x")
    if padded:
        s.compute_at("data_pad", "out", "c")
    return s


def _window_view(x: np.ndarray, win: _Window, fill: float) -> np.ndarray:
    """numpy: every window of the padded input, (N, C, OH, OW, KH, KW)."""
    (ph, pw), (sh, sw) = win.pad, win.stride
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    view = np.lib.stride_tricks.sliding_window_view(padded, win.kernel, axis=(2, 3))
    _, _, oh, ow = win.out_shape
    return view[:, :, ::sh, ::sw][:, :, :oh, :ow]


@dataclass(frozen=True)
class MaxPool2d(HostOp):
    """Max over each kh x kw window, NCHW, any numeric dtype."""

    shape: tuple[int, int, int, int]
    kernel: int | tuple[int, int]
    stride: int | tuple[int, int] = 1
    pad: int | tuple[int, int] = 0
    dtype: str = "float32"
    op: ClassVar[str] = "max_pool2d"

    def __post_init__(self) -> None:
        check_dtype(self.op, "data", self.dtype, NUMERIC)
        _window(self)

    @property
    def win(self) -> _Window:
        return _Window(self.shape, self.kernel, self.stride, self.pad)  # type: ignore[arg-type]

    def tensors(self) -> dict[str, Tensor]:
        """Separable: the max over the window's rows (`vert`, one output row at a time, along the
        whole padded width: contiguous, vectorised), then over its columns (strided, but from a
        row in L1); exactly the window's max, since max is exact in any order (measured on
        ResNet-18's 3x3 stride-2 pool: 1.7x faster than the window's 9 strided loads per pixel)."""
        win = self.win
        data = placeholder(win.shape, self.dtype, "data")
        src = _padded(data, win, E.reduce_identity("max", self.dtype)) if any(win.pad) else data
        (sh, sw), (kh, kw) = win.stride, win.kernel
        n, c, oh, _ = win.out_shape
        ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
        vert = compute((n, c, oh, src.shape[3]), lambda b, ch, y, x: max_reduce(
            src[b, ch, y * sh + ry, x], [ry]), "vert")
        out = compute(win.out_shape, lambda b, ch, y, x: max_reduce(vert[b, ch, y, x * sw + rx], [rx]), "out")
        return {"data": data, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("vert", "out", "y")
        s.reorder("vert", "ry", "x")
        vectorize_loop(s, "vert", "x", s.tensor("vert").shape[3])
        s.reorder("out", "rx", "x")
        if any(self.win.pad):
            s.compute_at("data_pad", "out", "ch")
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        low = -np.inf if self.dtype == "float32" else np.iinfo(self.dtype).min
        return _window_view(data, self.win, low).max(axis=(4, 5))  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AvgPool2d(HostOp):
    """Mean over each window, NCHW float32; padded positions count only if `count_include_pad`."""

    shape: tuple[int, int, int, int]
    kernel: int | tuple[int, int]
    stride: int | tuple[int, int] = 1
    pad: int | tuple[int, int] = 0
    count_include_pad: bool = False
    op: ClassVar[str] = "avg_pool2d"

    def __post_init__(self) -> None:
        _window(self)

    @property
    def win(self) -> _Window:
        return _Window(self.shape, self.kernel, self.stride, self.pad)  # type: ignore[arg-type]

    def tensors(self) -> dict[str, Tensor]:
        win = self.win
        data = placeholder(win.shape, "float32", "data")
        src = _padded(data, win, E.FloatConst(0.0)) if any(win.pad) else data
        (sh, sw), (kh, kw) = win.stride, win.kernel
        ry, rx = reduce_axis(kh, "ry"), reduce_axis(kw, "rx")
        total = compute(win.out_shape, lambda n, c, y, x: sum(
            src[n, c, y * sh + ry, x * sw + rx], [ry, rx]), "total")
        out = compute(win.out_shape, lambda n, c, y, x: total[n, c, y, x] / self._count(y, x), "out")
        return {"data": data, "out": out}

    def _count(self, y: E.Expr, x: E.Expr) -> E.Expr:
        """How many input positions window (y, x) averages, as float32."""
        win = self.win
        (_, _, h, w), (kh, kw), (sh, sw), (ph, pw) = win.shape, win.kernel, win.stride, win.pad
        if self.count_include_pad or not (ph or pw):
            return E.FloatConst(float(kh * kw))
        rows = E.minimum(y * sh - ph + kh, h) - E.maximum(y * sh - ph, 0)
        cols = E.minimum(x * sw - pw + kw, w) - E.maximum(x * sw - pw, 0)
        return E.cast("float32", rows * cols)

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("total", "out", "y")
        s.reorder("total", "ry", "rx", "x")
        if any(self.win.pad):
            s.compute_at("data_pad", "out", "c")
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        win = self.win
        x = data.astype(np.float64)
        total = _window_view(x, win, 0.0).sum(axis=(4, 5))
        if self.count_include_pad:
            count = np.full(total.shape[2:], float(win.kernel[0] * win.kernel[1]))
        else:
            ones = np.ones((1, 1) + win.shape[2:])
            count = _window_view(ones, win, 0.0).sum(axis=(4, 5))[0, 0]
        return (total / count).astype(np.float32)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class GlobalAvgPool2d(HostOp):
    """Mean over H x W per image and channel: (N, C, H, W) -> (N, C, 1, 1), float32."""

    shape: tuple[int, int, int, int]
    op: ClassVar[str] = "global_avg_pool2d"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, rank=4))

    def tensors(self) -> dict[str, Tensor]:
        n, c, h, w = self.shape
        data = placeholder(self.shape, "float32", "data")
        ry, rx = reduce_axis(h, "ry"), reduce_axis(w, "rx")
        total = compute((n, c), lambda n, c: sum(data[n, c, ry, rx], [ry, rx]), "total")
        out = compute((n, c, 1, 1), lambda n, c, y, x: total[n, c] / float(h * w), "out")
        return {"data": data, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        s.compute_at("total", "out", "c")
        flat = s.fuse("total", "ry", "rx")  # one contiguous run of H*W floats
        s.vectorize("total", flat)
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return data.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float32)  # type: ignore[no-any-return]

