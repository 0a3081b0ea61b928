"""Host operators for the vision graph ops that sit on large activations: nearest upsampling by
integer factors (an FPN's or a segmentation head's Resize) and PRelu, both bit for bit as the
graph interpreter's (a copy, and numpy's where(x < 0, x * slope, x) in float32).

Resize's other forms (linear, fractional or shrinking scales, coordinate transforms whose
nearest indices are not i // factor) stay in the interpreter: compiler.runtime.cpu maps a Resize
here only when the interpreter's index table is exactly i // factor on every axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from compiler.ops.cpu.base import HostOp, check_shape
from compiler.ops.cpu.qops import vectorize_loop
from compiler.schedule.schedule import Schedule
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder


@dataclass(frozen=True)
class ResizeNearest(HostOp):
    """data[S] -> out[S * factors], out[i] = data[i // factors] (np.repeat along each axis)."""

    shape: tuple[int, ...]
    factors: tuple[int, ...]
    op: ClassVar[str] = "resize_nearest"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        factors = tuple(self.factors)
        if len(factors) != len(self.shape) or any(
            isinstance(f, bool) or not isinstance(f, int | np.integer) or f < 1 for f in factors
        ):
            raise ValueError(f"{self.op}: factors {self.factors} must be one positive int per axis "
                             f"of {self.shape}")
        object.__setattr__(self, "factors", tuple(int(f) for f in factors))

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(n * f for n, f in zip(self.shape, self.factors, strict=True))

    def tensors(self) -> dict[str, Tensor]:
        data = placeholder(self.shape, "float32", "data")
        out = compute(self.out_shape, lambda *i: data[tuple(
            a if f == 1 else a // f for a, f in zip(i, self.factors, strict=True))], "out")
        return {"data": data, "out": out}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        if self.factors[-1] == 1:  # rows are contiguous copies
            vectorize_loop(s, "out", s.stage("out").leaves[-1], self.out_shape[-1])
        return s

    def reference(self, data: np.ndarray) -> np.ndarray:  # type: ignore[override]
        for axis, f in enumerate(self.factors):
            data = np.repeat(data, f, axis=axis)
        return data


@dataclass(frozen=True)
class PRelu(HostOp):
    """x[S], slope[T] (T broadcasts to S) -> where(x < 0, x * slope, x), float32."""

    shape: tuple[int, ...]
    slope_shape: tuple[int, ...]
    op: ClassVar[str] = "prelu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", check_shape(self.op, self.shape))
        slope = check_shape(self.op, self.slope_shape)
        try:
            fits = np.broadcast_shapes(self.shape, slope) == self.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{self.op}: slope {slope} does not broadcast to {self.shape}")
        object.__setattr__(self, "slope_shape", slope)

    def tensors(self) -> dict[str, Tensor]:
        x = placeholder(self.shape, "float32", "data")
        slope = placeholder(self.slope_shape, "float32", "slope")
        lead = len(self.shape) - len(self.slope_shape)

        def body(*i: E.Expr) -> E.Expr:
            s = slope[tuple(0 if n == 1 else i[lead + k] for k, n in enumerate(self.slope_shape))]
            v = x[i]
            return E.if_then_else(E.lt(v, 0.0), v * s, v)

        return {"data": x, "slope": slope, "out": compute(self.shape, body, "out")}

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        s = Schedule(ts["out"])
        vectorize_loop(s, "out", s.stage("out").leaves[-1], self.shape[-1])
        return s

    def reference(self, data: np.ndarray, slope: np.ndarray) -> np.ndarray:  # type: ignore[override]
        return np.where(data < 0, data * slope, data).astype(np.float32)
