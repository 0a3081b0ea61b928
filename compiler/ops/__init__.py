"""Operators, per target: compiler.ops.accel (the accelerator's, with schedule spaces) and
compiler.ops.cpu (the CPU's, one default schedule each, JIT-compiled).  `Operator` is what an
operator with a schedule space offers, whatever its target."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import numpy as np

from compiler.schedule.schedule import Schedule
from compiler.target.base import Target
from compiler.te.tensor import Tensor

TargetT = TypeVar("TargetT", bound=Target, covariant=True)


class Operator(Protocol[TargetT]):
    """An operator with a schedule space on target `TargetT`: its tensors, the schedule of a point
    (knobs), the default point, seeded inputs and the numpy reference.  The accelerator's
    (`AccelOperator`: conv2d, dense, eltwise) are the ones with a space today; the CPU's operators
    (compiler.ops.cpu) have one default schedule each."""

    op: str

    @property
    def target(self) -> TargetT: ...

    def tensors(self) -> dict[str, Tensor]: ...
    def schedule(self, knobs: Any) -> Schedule: ...
    def default_knobs(self, vthreads: int | None = None) -> Any: ...
    def random_inputs(self, seed: int) -> dict[str, np.ndarray]: ...
    def reference(self, inputs: dict[str, np.ndarray]) -> np.ndarray: ...
    def describe(self) -> dict[str, Any]: ...


__all__ = ["Operator"]
