"""Layout transforms between NC[spatial...] and the accelerator's packed NC{b}n{c}c layout.

pack: (N, C, *S) -> (N/b, ceil(C/c), *S, b, c), channels beyond C zero, the layout that
compiler.ops.accel.conv2d's pack_data (data, b = batch, c = block_in) and compiler.ops.accel.dense's
pack_data (no spatial dimensions) produce; unpack is the inverse and drops the padded channels.
N must be a multiple of the batch block b.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import NUMERIC, HostOp, check_dtype, check_int, check_shape
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder


def _blocks(op: HostOp, shape: tuple[int, ...], batch_block: int, channel_block: int) -> tuple[int, int]:
    check_int(op.op, "batch_block", batch_block, 1)
    check_int(op.op, "channel_block", channel_block, 1)
    if shape[0] % batch_block:
        raise ValueError(f"{op.op}: batch {shape[0]} is not a multiple of the batch block {batch_block}")
    return shape[0] // batch_block, -(-shape[1] // channel_block)


@dataclass(frozen=True)
class Pack(HostOp):
    """NC[S...] -> NC{b}n{c}c with zero channel padding; `shape` is the unpacked shape."""

    shape: tuple[int, ...]
    batch_block: int = 1
    channel_block: int = 16
    dtype: str = "int8"
    op: ClassVar[str] = "pack"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, min_rank=2))
        check_dtype(self.op, "data", self.dtype, NUMERIC)
        _blocks(self, self.shape, self.batch_block, self.channel_block)

    @property
    def packed_shape(self) -> tuple[int, ...]:
        nb, cb = _blocks(self, self.shape, self.batch_block, self.channel_block)
        return (nb, cb, *self.shape[2:], self.batch_block, self.channel_block)

    def tensors(self) -> dict[str, Tensor]:
        b, c, channels = self.batch_block, self.channel_block, self.shape[1]
        data = placeholder(self.shape, self.dtype, "data")

        def body(*i: E.Expr) -> E.Expr:
            n, ch = i[0] * b + i[-2], i[1] * c + i[-1]
            value = data[(n, ch, *i[2:-2])]
            if channels % c == 0:
                return value
            return E.if_then_else(E.lt(ch, channels), value, E.const(0, self.dtype))

        return {"data": data, "out": compute(self.packed_shape, body, "out")}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        nb, cb = _blocks(self, self.shape, self.batch_block, self.channel_block)
        _, c, *spatial = self.shape
        pads = [(0, 0), (0, cb * self.channel_block - c)] + [(0, 0)] * len(spatial)
        x = np.pad(data, pads).reshape(nb, self.batch_block, cb, self.channel_block, *spatial)
        order = (0, 2, *range(4, 4 + len(spatial)), 1, 3)
        return np.ascontiguousarray(x.transpose(order))


@dataclass(frozen=True)
class Unpack(HostOp):
    """NC{b}n{c}c -> NC[S...], dropping padded channels; `shape` is the unpacked shape."""

    shape: tuple[int, ...]
    batch_block: int = 1
    channel_block: int = 16
    dtype: str = "int8"
    op: ClassVar[str] = "unpack"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape, min_rank=2))
        check_dtype(self.op, "data", self.dtype, NUMERIC)
        _blocks(self, self.shape, self.batch_block, self.channel_block)

    def tensors(self) -> dict[str, Tensor]:
        packed = Pack(self.shape, self.batch_block, self.channel_block, self.dtype).packed_shape
        b, c = self.batch_block, self.channel_block
        data = placeholder(packed, self.dtype, "data")
        out = compute(self.shape, lambda *i: data[(i[0] // b, i[1] // c, *i[2:], i[0] % b, i[1] % c)], "out")
        return {"data": data, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        n, c, *spatial = self.shape
        cb = data.shape[1]
        order = (0, len(data.shape) - 2, 1, len(data.shape) - 1, *range(2, 2 + len(spatial)))
        x = data.transpose(order).reshape(n, cb * self.channel_block, *spatial)
        return np.ascontiguousarray(x[:, :c])
