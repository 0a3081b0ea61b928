"""One accelerator operator's schedule chosen for one hardware point: the schedule space ranked
by the compiler's analytical estimate (every point at once, `Conv2d.estimates`), the best few and
the operator's default schedule compiled and run on the timing model, the best of them by the
layer objective kept.

Compiling is the cost of a sweep, and most of it does not depend on the whole config: lowering
and the loop-IR passes read only the GEMM shape, the data widths, the micro-op kernel limit and
the token counters (`compile_key`); the scratchpad depths and the memory system enter only
through the fit (checked per config by `op.fits`) and the instruction encoding (`emit`, run per
config).  `ProgramCache` keeps the passes' output by that key, so a schedule seen on an earlier
point with the same GEMM shape is only re-emitted (the Program is the one `compile_op` builds:
tests compare them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.build import run_passes
from compiler.codegen.accel.emit import emit_builder
from compiler.errors import ScheduleError
from compiler.lower.lower import lower
from compiler.ops.accel import Eltwise
from compiler.target.accel import AcceleratorTarget
from hw.config import AcceleratorConfig
from hw.program import Program, ProgramBuilder, ProgramError
from sim.backend import Backend, SimulationError, Stats

Objective = Callable[[Stats], float]
MEASURED = 3  # candidates measured per operator beyond its default schedule


def compile_key(cfg: AcceleratorConfig) -> tuple[int, ...]:
    """The config fields that lowering, the passes and the emitter read, but for the depths'
    checks (see the module doc): the GEMM shape, the widths, the micro-op kernel limit, the token
    counters and the element sizes (DRAM addresses are in elements)."""
    return (cfg.batch, cfg.block_in, cfg.block_out, cfg.inp_bits, cfg.wgt_bits, cfg.acc_bits,
            max(16, cfg.uop_depth // 8), cfg.token_counter_bits, cfg.uop_elem_bytes)


@dataclass
class ProgramCache:
    """Emitted instruction streams by (operator, spec, knobs, compile_key), encoded per config."""

    limit: int = 20_000
    hits: int = 0
    misses: int = 0
    _streams: dict[Any, ProgramBuilder] = field(default_factory=dict, repr=False)

    def program(self, op: Any, knobs: Any) -> Program:
        """`op` compiled with `knobs` for its target: compile_op's Program."""
        target: AcceleratorTarget = op.target
        key = (op.op, op.spec, knobs, compile_key(target.cfg))
        stream = self._streams.get(key)
        if stream is None:
            self.misses += 1
            func = lower(op.schedule(knobs), target, op.op)
            stream = emit_builder(func, run_passes(func, target)["inject_virtual_threads"], target)
            program = stream.copy_for(target.cfg).build()  # token checks run once per stream
            if len(self._streams) >= self.limit:
                self._streams.clear()
            self._streams[key] = stream
            return program
        self.hits += 1
        if stream.uop_count > target.uop_depth:  # as the emitter's micro-op plan refuses it
            raise ScheduleError(f"micro-op kernels need more than {target.uop_depth} entries, the size of "
                                "the micro-op buffer; use smaller tiles")
        return stream.copy_for(target.cfg).build(check_tokens=False)


@dataclass(frozen=True)
class Choice:
    """The schedule kept for one operator: its knobs, the Stats of its Program on the timing
    model, how many candidates were measured, and the default schedule's cycles."""

    knobs: Any
    stats: Stats
    measured: int
    default_cycles: int | None


@dataclass
class Timer:
    """Wall seconds by phase."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, start: float) -> float:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - start
        return now


def ranked(op: Any) -> tuple[list[Any], Any | None]:
    """The fitting points of `op`'s space, best estimate first, and its default point (None when
    no point with at most two threads fits)."""
    if isinstance(op, Eltwise):
        points = [p for p in op.points() if op.fits(p)]
        costs = np.array([op.estimate(p) for p in points], dtype=np.float64)
        order = np.argsort(costs, kind="stable")
        default = _default(op)
        return [points[i] for i in order], default
    grid, costs = op.estimates()
    fitting = np.flatnonzero(~np.isnan(costs))
    order = fitting[np.argsort(costs[fitting], kind="stable")]
    make = _knobs_class(op)
    points = [make(**{n: int(v[i]) for n, v in grid.items()}) for i in order]
    return points, _default(op)


def _knobs_class(op: Any) -> Any:
    from compiler.ops.accel import Conv2d, Conv2dKnobs, DenseKnobs

    return Conv2dKnobs if isinstance(op, Conv2d) else DenseKnobs


def _default(op: Any) -> Any | None:
    try:
        return op.default_knobs()
    except ScheduleError:
        return None


def choose(op: Any, backend: Backend, objective: Objective, cache: ProgramCache, timer: Timer,
           measured: int = MEASURED) -> Choice | None:
    """The best of `op`'s default schedule and its `measured` best-estimated points under
    `objective`, each run on `backend` (the timing model); points that fail to compile are
    skipped and the next in estimate order taken, so an operator with any compiling point gets
    one.  None when no point of the space compiles."""
    start = time.perf_counter()
    points, default = ranked(op)
    start = timer.add("search", start)
    queue = ([default] if default is not None else []) + [p for p in points if p != default]
    best: tuple[float, int, Any, Stats] | None = None
    default_cycles, tried = None, 0
    for knobs in queue:
        if tried >= measured + (default is not None):
            break
        try:
            program = cache.program(op, knobs)
        except (ScheduleError, ProgramError):
            start = timer.add("compile", start)
            continue
        start = timer.add("compile", start)
        try:
            stats = backend.run(program, None).stats  # type: ignore[arg-type]
        except SimulationError:
            start = timer.add("timing", start)
            continue
        start = timer.add("timing", start)
        tried += 1
        assert stats.cycles is not None, "the timing model counts cycles"
        if knobs == default:
            default_cycles = stats.cycles
        score = (objective(stats), stats.cycles)
        if best is None or score < best[:2]:
            best = (*score, knobs, stats)  # type: ignore[assignment]
    if best is None:
        return None
    return Choice(best[2], best[3], tried, default_cycles)


__all__ = ["MEASURED", "Choice", "Objective", "ProgramCache", "Timer", "choose", "compile_key", "ranked"]
