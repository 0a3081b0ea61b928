"""What every host operator shares: parameters as a frozen dataclass, TE + default host schedule
+ numpy reference, and `build` (schedule -> host loop IR -> LLVM -> HostKernel).

A host operator is a frozen dataclass of its shape and parameters (so it is hashable and the
registry can cache its kernel).  `tensors()` returns the input placeholders in argument order
followed by "out"; `schedule()` the default host schedule; `reference(*inputs)` the result that
numpy computes independently of the TE definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from compiler.codegen.cpu import HostKernel, compile_func
from compiler.lower.cpu import lower_host
from compiler.lower.lower import LoweredFunc
from compiler.schedule.schedule import Schedule
from compiler.te.tensor import Tensor

FLOAT = ("float32",)
INTS = ("int8", "uint8", "int16", "int32", "int64")
NUMERIC = FLOAT + INTS


class HostOp:
    """Base of the host operators (subclasses are frozen dataclasses)."""

    op: ClassVar[str] = ""
    # float products and sums may fuse into FMAs (emit_module's `contract`): an op whose
    # results need only agree with numpy within float32 rounding, not bit for bit
    contract: ClassVar[bool] = False

    def tensors(self) -> dict[str, Tensor]:
        raise NotImplementedError

    def schedule(self, ts: dict[str, Tensor]) -> Schedule:
        """The default host schedule: every stage at the root, in serial loops."""
        return Schedule(ts["out"])

    def reference(self, *inputs: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def random_inputs(self, seed: int) -> list[np.ndarray]:
        """Seeded inputs in argument order: standard normal floats, full-range integers."""
        rng = np.random.default_rng(seed)
        return [_random(rng, t) for t in self.input_tensors()]

    def input_tensors(self, ts: dict[str, Tensor] | None = None) -> list[Tensor]:
        ts = self.tensors() if ts is None else ts
        return [t for k, t in ts.items() if k != "out"]

    def lower(self) -> LoweredFunc:
        ts = self.tensors()
        return lower_host(self.schedule(ts), self.op, self.input_tensors(ts))

    def build(self, opt_level: int = 3) -> HostKernel:
        return compile_func(self.lower(), opt_level, self.contract)


def _random(rng: np.random.Generator, t: Tensor) -> np.ndarray:
    if t.dtype == "float32":
        return rng.standard_normal(t.shape).astype(np.float32)
    info = np.iinfo(np.dtype(t.dtype))
    return rng.integers(info.min, info.max, t.shape, endpoint=True).astype(t.dtype)


def check_dtype(op: str, what: str, dtype: str, allowed: Sequence[str]) -> None:
    if dtype not in allowed:
        raise ValueError(f"{op}: {what} dtype must be one of {', '.join(allowed)}, not {dtype!r}")


def check_gemm(op: Any) -> None:
    """A gemm op's `shape` [M, K] and `weight_shape` [N, K] checked and normalised in place
    (a frozen dataclass's fields): the weight must take the data's K features."""
    object.__setattr__(op, "shape", check_shape(op.op, op.shape, rank=2))
    object.__setattr__(op, "weight_shape", check_shape(op.op, op.weight_shape, rank=2))
    if op.weight_shape[1] != op.shape[1]:
        raise ValueError(f"{op.op}: weight {op.weight_shape} does not take inputs of "
                         f"{op.shape[1]} features (data {op.shape})")


def check_shape(op: str, shape: Sequence[int], rank: int | None = None, min_rank: int = 1) -> tuple[int, ...]:
    """`shape` as a tuple of positive ints, of rank `rank` (or at least `min_rank`)."""
    out = tuple(shape)
    if any(isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 1 for s in out):
        raise ValueError(f"{op}: shape must be positive ints, not {shape}")
    if rank is not None and len(out) != rank:
        raise ValueError(f"{op}: shape must have {rank} dimensions, not {len(out)} ({out})")
    if len(out) < min_rank:
        raise ValueError(f"{op}: shape must have at least {min_rank} dimensions, not {out}")
    return tuple(int(s) for s in out)


def check_int(op: str, what: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int in [low, high] (high None: no upper bound), or ValueError."""
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):  # type: ignore[operator]
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{op}: {what} must be an int {bound}, not {value!r}")
    return int(value)  # type: ignore[call-overload]


def pair(op: str, what: str, value: int | Sequence[int], low: int) -> tuple[int, int]:
    """An int or a pair of ints, each >= low, as a pair (height, width)."""
    items = (value, value) if isinstance(value, int | np.integer) else tuple(value)
    if len(items) != 2 or any(isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low
                              for v in items):
        raise ValueError(f"{op}: {what} must be an int >= {low} or a pair of them, not {value!r}")
    return int(items[0]), int(items[1])
