"""The GPU target's tuner: the points of an operator's schedule space measured on the device.

`tune_op(op, target, measure, points)` measures the default point first, then the first `points`
points of the space (compiler.ops.gpu: each legal, or a ScheduleError the search skips), and
keeps the default unless a point is faster: a tuned kernel is never slower than the default as
measured.  `measure(knobs) -> seconds` is the caller's: on a GPU, compile the kernel and time it
with CUDA events (compiler.runtime.gpu.CudaExecutor.time_kernel, as `codesign bench gpu` does);
in tests, any cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compiler.errors import ScheduleError
from compiler.ops.gpu.base import GpuOp, Knobs
from compiler.target.gpu import GpuTarget


@dataclass(frozen=True)
class GpuTuneResult:
    """The default point and the best one found, their seconds, and the points measured and
    skipped (ScheduleError)."""

    default: Knobs
    default_s: float
    best: Knobs
    best_s: float
    measured: int
    skipped: int

    @property
    def speedup(self) -> float:
        return self.default_s / self.best_s

    def to_json(self) -> dict[str, Any]:
        return {"default": self.default.to_json(), "default_s": self.default_s, "best": self.best.to_json(),
                "best_s": self.best_s, "measured": self.measured, "skipped": self.skipped,
                "speedup": self.speedup}


def tune_op(op: GpuOp, target: GpuTarget, measure: Callable[[Knobs], float],
            points: int = 24) -> GpuTuneResult:
    """The best of the default and the first `points` points of `op`'s space on `target`."""
    if points < 0:
        raise ValueError(f"points must be >= 0, not {points}")
    default = op.default_knobs(target)
    default_s = measure(default)
    best, best_s, measured, skipped = default, default_s, 1, 0
    for knobs in op.space(target)[:points]:
        if knobs == default:
            continue
        try:
            seconds = measure(knobs)
        except ScheduleError:
            skipped += 1
            continue
        measured += 1
        if seconds < best_s:
            best, best_s = knobs, seconds
    return GpuTuneResult(default, default_s, best, best_s, measured, skipped)
