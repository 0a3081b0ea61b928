"""The accelerator's operators (packed int8 conv2d, dense, element-wise with fused epilogues): TE
definition + schedule space + default schedule, and compiling one point to a Program."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from compiler.build import Built, build
from compiler.errors import ScheduleError
from compiler.ops import Operator
from compiler.ops.accel.common import Epilogue
from compiler.ops.accel.conv2d import Conv2d, Conv2dKnobs, Conv2dSpec
from compiler.ops.accel.dense import Dense, DenseKnobs, DenseSpec
from compiler.ops.accel.elementwise import Eltwise, EltwiseKnobs, EltwiseSpec
from compiler.schedule import records as R
from compiler.schedule.schedule import Schedule
from compiler.target.accel import AcceleratorTarget

AccelOperator: TypeAlias = Operator[AcceleratorTarget]


@dataclass
class CompiledOp:
    built: Built
    schedule: Schedule
    compile_s: float
    knobs: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def schedule_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"records": self.schedule.to_json()}
        if self.knobs is not None:
            out["knobs"] = self.knobs.to_json()
        return out


def compile_op(op: AccelOperator, knobs: Any = None, records: list[R.Record] | None = None) -> CompiledOp:
    """Compile `op` with `records` (a saved schedule), or the schedule of `knobs` (default:
    the operator's default point)."""
    start = time.perf_counter()
    if records is not None:
        sched = Schedule.replay(op.tensors()["out"], records)
    else:
        knobs = op.default_knobs() if knobs is None else knobs
        sched = op.schedule(knobs)
    built = build(sched, op.target, name=op.op)
    return CompiledOp(built, sched, time.perf_counter() - start, knobs if records is None else None)


def knobs_from_json(op: Operator, data: dict[str, Any]) -> Any:
    cls = {Conv2d: Conv2dKnobs, Dense: DenseKnobs, Eltwise: EltwiseKnobs}[type(op)]  # type: ignore[index]
    try:
        return cls(**data)
    except TypeError as exc:
        raise ScheduleError(f"{op.op} knobs {data}: {exc}") from None


__all__ = ["AccelOperator", "CompiledOp", "Conv2d", "Conv2dKnobs", "Conv2dSpec", "Dense", "DenseKnobs",
           "DenseSpec", "Eltwise", "EltwiseKnobs", "EltwiseSpec", "Epilogue", "Operator", "compile_op",
           "knobs_from_json"]
