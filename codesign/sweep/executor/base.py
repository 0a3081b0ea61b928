"""What every sweep executor shares: the per-point evaluation wrapper, its result record, and the
small interface the engine drives.

An executor runs a list of points' evaluations somewhere (forked local processes, Dask workers)
and yields `(index, Done)` as they finish; the engine (the client) alone writes the store.  A
`Done` is plain data (a status, a `PointResult`, a reason, seconds), so it crosses process and
network boundaries as it is.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from codesign.sweep.records import PointResult
from codesign.sweep.space import Point

Evaluate = Callable[[Point], PointResult]


@dataclass(frozen=True)
class Done:
    """What a worker sends back: a result, or a failure's status and reason; seconds taken.
    `attempts`: the tries the executor itself made (Dask reschedules a task whose worker died);
    None when the engine counts them (the local pool retries a crash through the engine)."""

    status: str
    result: PointResult | None = None
    reason: str | None = None
    wall_s: float | None = None
    attempts: int | None = None


class Evaluation:
    """The executors' function: evaluate one point, timing it and catching what it raises."""

    def __init__(self, evaluate: Evaluate) -> None:
        self.evaluate = evaluate

    def __call__(self, point: Point) -> Done:
        start = time.monotonic()
        try:
            result = self.evaluate(point)
        except Exception as exc:
            detail = "".join(traceback.format_exception(exc, limit=-4)).rstrip()
            return Done("error", reason=f"{type(exc).__name__}: {exc}\n{detail}",
                        wall_s=time.monotonic() - start)
        wall_s = time.monotonic() - start
        if not isinstance(result, PointResult) or result.point_id != point.id:
            got = result.point_id if isinstance(result, PointResult) else type(result).__name__
            return Done("error", reason=f"evaluate returned {got}, not a PointResult of point {point.id}",
                        wall_s=wall_s)
        return Done("ok", result=result, wall_s=wall_s)


def failed(status: str, reason: str) -> Done:
    return Done(status, reason=reason)


class Executor(Protocol):
    """Runs evaluations: `run(points)` yields (index into points, Done) as each finishes.
    `slots`: evaluations it runs at once (the engine asks that many points times 8 per batch);
    `timeout_s`: the seconds one point may take."""

    slots: int
    timeout_s: float

    def run(self, points: Sequence[Point]) -> Iterator[tuple[int, Done]]: ...

    def close(self) -> None: ...


__all__ = ["Done", "Evaluate", "Evaluation", "Executor", "failed"]
