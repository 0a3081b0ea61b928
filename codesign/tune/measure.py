"""Measuring schedule points: compile one, run it on a backend, record what happened.

A `Task` is plain data (workload, config parameters, knobs, backend), so it crosses process
boundaries and keys the cache; `measure` runs one in a pool worker.  `Measurer` runs batches
through the pool, serving repeats from the store.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from codesign.exec.pool import Pool
from codesign.exec.store import Store, source_digest
from codesign.tune.records import Measurement
from compiler.errors import ScheduleError
from compiler.ops.accel import compile_op, knobs_from_json
from compiler.target.accel import AcceleratorTarget
from compiler.tune.workload import Workload, config_key
from hw.config import AcceleratorConfig
from hw.program import ProgramError
from sim.backend import Backend, SimulationError
from sim.backends import capabilities, make_backend

BACKENDS = ("timing", "rtl", "fsim")


@dataclass(frozen=True)
class Task:
    workload: Workload
    config: dict[str, Any]  # AcceleratorConfig.to_dict()
    knobs: dict[str, int]
    backend: str = "timing"
    check: bool = False  # run with seeded data and compare with numpy (fsim, rtl)

    def key(self) -> str:
        return ":".join((source_digest(self.backend), self.workload.key, config_key(self.config),
                         self.backend, str(self.check), json.dumps(self.knobs, sort_keys=True)))


@functools.lru_cache(maxsize=8)
def _backend(name: str, cfg: AcceleratorConfig) -> Backend:
    return make_backend(name, cfg)


def measure(task: Task) -> Measurement:
    """Compile and run one point (in a pool worker).  Errors of the schedule or the program are
    measurements (status 'schedule_error' or 'error'), not exceptions."""
    cfg = AcceleratorConfig.from_dict(task.config)
    op = task.workload.make(AcceleratorTarget(cfg))
    try:
        compiled = compile_op(op, knobs=knobs_from_json(op, task.knobs))
    except (ScheduleError, ProgramError) as exc:
        return Measurement("schedule_error", error=f"{type(exc).__name__}: {exc}")
    built = Measurement("ok", compile_s=compiled.compile_s,
                        instructions=int(compiled.built.program.insns.shape[0]),
                        schedule=compiled.schedule_json())
    start = time.perf_counter()
    try:
        inputs = op.random_inputs(0) if task.check or capabilities(task.backend).values else None
        result = _backend(task.backend, cfg).run(compiled.built.program, inputs)  # type: ignore[arg-type]
    except SimulationError as exc:
        return replace(built, status="error", error=f"SimulationError: {exc}")
    run_s = time.perf_counter() - start
    correct = None
    if inputs is not None and "out" in result.outputs:
        correct = bool(np.array_equal(result.outputs["out"], op.reference(inputs)))
    return replace(built, run_s=run_s, correct=correct, cycles=result.stats.cycles,
                   stats=result.stats.to_dict())


@dataclass
class Measurer:
    """Runs tasks in a `Pool`, answering repeats from `store` (None: no cache)."""

    store: Store | None = None
    workers: int = 2
    timeout_s: float = 120.0
    fn: Callable[[Task], Measurement] = measure
    context: str = "fork"
    hits: int = 0
    runs: int = 0
    _pool: Pool[Measurement] | None = field(default=None, repr=False)

    def pool(self) -> Pool[Measurement]:
        if self._pool is None:
            self._pool = Pool(self.fn, workers=self.workers, timeout_s=self.timeout_s, context=self.context,
                              fail=Measurement.failed)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[int, Measurement, bool]]:
        """(index, measurement, from cache) for each task, as they finish.  Failures of the
        trial's own (timeouts, crashes) are not cached: they may not repeat."""
        keys = [t.key() for t in tasks]
        known = self.store.get_measurements(keys) if self.store is not None else {}
        todo = [i for i, k in enumerate(keys) if k not in known]
        for i, k in enumerate(keys):
            if k in known:
                self.hits += 1
                yield i, known[k], True
        if not todo:
            return
        fresh: dict[str, Measurement] = {}
        try:
            for j, result in self.pool().run([tasks[i] for i in todo]):
                self.runs += 1
                if result.finished:
                    fresh[keys[todo[j]]] = result
                if len(fresh) >= 64 and self.store is not None:
                    self.store.put_measurements(fresh)
                    fresh = {}
                yield todo[j], result, False
        finally:
            if self.store is not None and fresh:
                self.store.put_measurements(fresh)


def task_for(workload: Workload, cfg: AcceleratorConfig, knobs: Any, backend: str = "timing",
             check: bool = False) -> Task:
    data = knobs if isinstance(knobs, dict) else knobs.to_json()
    return Task(workload, cfg.to_dict(), dict(data), backend, check)


__all__ = ["BACKENDS", "Measurement", "Measurer", "Task", "measure", "task_for"]
