"""Quantisation with per-tensor parameters, baked into the kernel as constants.

- quantize: float32 -> int8/uint8, y = saturate(rint(x / scale) + zero_point), rounding half to
  even, as ONNX QuantizeLinear (a true division, so results equal numpy's bit for bit);
- dequantize: int8/uint8/int32 -> float32, y = float(x - zero_point) * scale (ONNX
  DequantizeLinear; the subtraction in int32);
- requantize: int32 -> int8/uint8, either with a float scale, y = saturate(rint(float(x) * scale)
  + zero_point), or exactly in integers as a fixed-point ALU does,
  y = saturate(((x * multiplier + 2**(shift-1)) >> shift) + zero_point) (round half up), computed
  in int64 so the product never wraps.

Saturation is the TE cast's (float -> integer casts saturate), or an explicit clamp in integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import HostOp, check_dtype, check_int, check_shape
from compiler.te import expr as E
from compiler.te.scalar import int_range
from compiler.te.tensor import Tensor, compute, placeholder

QUANT = ("int8", "uint8")


def _check_scale(op: str, scale: object) -> float:
    number = isinstance(scale, float | int) and not isinstance(scale, bool)
    if not number or not (math.isfinite(scale) and scale > 0):  # type: ignore[arg-type, operator]
        raise ValueError(f"{op}: scale must be a finite float > 0, not {scale!r}")
    return float(np.float32(scale))  # type: ignore[arg-type]  # the kernel uses the float32 value


def _check_zero_point(op: str, zero_point: object, dtype: str) -> None:
    check_int(op, f"zero_point of {dtype}", zero_point, *int_range(dtype))


def _saturate(x: np.ndarray, dtype: str) -> np.ndarray:
    low, high = int_range(dtype)
    return np.clip(x, low, high).astype(dtype)


@dataclass(frozen=True)
class Quantize(HostOp):
    shape: tuple[int, ...]
    scale: float
    zero_point: int = 0
    dtype: str = "int8"
    op: ClassVar[str] = "quantize"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        check_dtype(self.op, "output", self.dtype, QUANT)
        object.__setattr__(self, "scale", _check_scale(self.op, self.scale))
        _check_zero_point(self.op, self.zero_point, self.dtype)

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        zp = float(self.zero_point)
        out = compute(self.shape, lambda *i: E.cast(self.dtype, E.rint(x[i] / self.scale) + zp), "out")
        return {"data": x, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        q = np.rint(data / np.float32(self.scale)) + np.float32(self.zero_point)
        return _saturate(q, self.dtype)


@dataclass(frozen=True)
class Dequantize(HostOp):
    shape: tuple[int, ...]
    scale: float
    zero_point: int = 0
    dtype: str = "int8"
    op: ClassVar[str] = "dequantize"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        check_dtype(self.op, "input", self.dtype, (*QUANT, "int32"))
        object.__setattr__(self, "scale", _check_scale(self.op, self.scale))
        _check_zero_point(self.op, self.zero_point, self.dtype)

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, self.dtype, "data")
        out = compute(self.shape, lambda *i: E.cast("float32", E.cast("int32", x[i]) - self.zero_point)
                      * self.scale, "out")
        return {"data": x, "out": out}

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        centred = (data.astype(np.int64) - self.zero_point).astype(np.int32)  # int32, as the kernel
        return centred.astype(np.float32) * np.float32(self.scale)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Requantize(HostOp):
    """int32 -> int8/uint8 with a float `scale`, or with an integer `multiplier` and `shift`."""

    shape: tuple[int, ...]
    scale: float | None = None
    multiplier: int | None = None
    shift: int = 0
    zero_point: int = 0
    dtype: str = "int8"
    op: ClassVar[str] = "requantize"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        check_dtype(self.op, "output", self.dtype, QUANT)
        _check_zero_point(self.op, self.zero_point, self.dtype)
        if (self.scale is None) == (self.multiplier is None):
            raise ValueError(f"{self.op}: give either scale or multiplier (with shift), not "
                             f"{'both' if self.scale is not None else 'neither'}")
        if self.scale is not None:
            object.__setattr__(self, "scale", _check_scale(self.op, self.scale))
        else:
            check_int(self.op, "multiplier", self.multiplier, 1, 2**31 - 1)
        check_int(self.op, "shift", self.shift, 0, 62)

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "int32", "data")
        out = compute(self.shape, lambda *i: self._value(x[i]), "out")
        return {"data": x, "out": out}

    def _value(self, v: E.Expr) -> E.Expr:
        if self.scale is not None:
            scaled = E.rint(E.cast("float32", v) * self.scale) + float(self.zero_point)
            return E.cast(self.dtype, scaled)
        wide = E.cast("int64", v) * E.const(self.multiplier or 0, "int64")
        if self.shift:
            wide = (wide + E.const(1 << (self.shift - 1), "int64")) >> self.shift
        low, high = int_range(self.dtype)
        clamped = E.minimum(E.maximum(wide + self.zero_point, low), high)
        return E.cast(self.dtype, clamped)

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        if self.scale is not None:
            q = np.rint(data.astype(np.float32) * np.float32(self.scale)) + np.float32(self.zero_point)
            return _saturate(q, self.dtype)
        # exact in int64: |x * multiplier| < 2**62, and the rounding term is below 2**61
        wide = data.astype(np.int64) * (self.multiplier or 0)
        rounding = (1 << (self.shift - 1)) if self.shift else 0
        return _saturate(((wide + rounding) >> self.shift) + self.zero_point, self.dtype)
