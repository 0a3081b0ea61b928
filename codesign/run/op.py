"""Compile one operator, run it on a backend with seeded data, compare with numpy: the figures
of `codesign op` and `codesign bench layers`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.accel import AccelOperator, CompiledOp, compile_op, knobs_from_json
from compiler.schedule import records as R
from compiler.schedule.schedule import read_schedule_file
from sim.backend import Backend, Stats


@dataclass(frozen=True)
class ScheduleChoice:
    """The schedule an operator is compiled with: a knob point or replayed records, and where
    it came from ("tuning-log", "default" or "file")."""

    knobs: Any = None
    records: list[R.Record] | None = None
    origin: str = "default"

    def compile(self, op: AccelOperator) -> CompiledOp:
        return compile_op(op, knobs=self.knobs, records=self.records)


def schedule_source(op: AccelOperator, path: str | None, vthreads: int | None,
                    tuning_log: str | None = None) -> ScheduleChoice:
    """The schedule of a schedule file, a forced thread count, the best point of a tuning log
    for this operator and config, or else the default schedule."""
    if path is None and vthreads is None and tuning_log is not None:
        knobs = tuned_knobs(op, tuning_log)
        if knobs is not None:
            return ScheduleChoice(knobs=knobs, origin="tuning-log")
    if path is None:
        return ScheduleChoice(knobs=op.default_knobs(vthreads))
    data = read_schedule_file(path)
    if isinstance(data, dict) and isinstance(data.get("knobs"), dict) and "records" not in data:
        return ScheduleChoice(knobs=knobs_from_json(op, data["knobs"]), origin="file")
    if isinstance(data, dict) and isinstance(data.get("records"), list):
        records = [R.from_json(r, f"{path} record {i}") for i, r in enumerate(data["records"])]
        return ScheduleChoice(records=records, origin="file")
    raise ScheduleError(f"{path}: expected an object with 'records' (a list) or 'knobs' (an object)")


def tuned_knobs(op: AccelOperator, tuning_log: str) -> Any:
    """The knobs of the fastest trial of `op` on its config in the log, or None (no such trial,
    or an operator without a tuning space)."""
    from codesign.tune import log
    from compiler.tune.workload import Workload

    records = log.read(tuning_log)
    try:
        workload = Workload.of(op)
    except ScheduleError:
        return None
    found = log.best(records, workload, op.target.cfg)
    return None if found is None else knobs_from_json(op, found.knobs)


@dataclass(frozen=True)
class OpReport:
    """One operator compiled and run with seeded inputs (`codesign op`): `operator` is its own
    description (`Operator.describe()`: kind and shape, as JSON); `correct` is None where the
    backend computes no values; `schedule_source` says where the schedule came from when a
    tuning log was asked for ("tuning-log" or "default")."""

    operator: dict[str, Any]
    config: str
    backend: str
    correct: bool | None
    cycles: int | None
    gemm_uops: int
    utilization: float | None
    instructions: int
    dram_bytes_read: int
    compile_s: float
    schedule: dict[str, Any]
    stats: Stats
    schedule_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {**self.operator, **{f.name: getattr(self, f.name) for f in fields(self)[1:]}}
        out["stats"] = self.stats.to_dict()
        if self.schedule_source is None:
            del out["schedule_source"]
        return out


def run_compiled(op: AccelOperator, compiled: CompiledOp, backend: Backend, seed: int = 0) -> OpReport:
    inputs = op.random_inputs(seed)
    result = backend.run(compiled.built.program, inputs)
    expected = op.reference(inputs)
    stats = result.stats
    # The timing backend computes no values: correctness is then unknown (None), not claimed.
    out = result.outputs.get("out")
    correct = None if out is None else bool(np.array_equal(out, expected))
    cycles = stats.cycles
    return OpReport(
        operator=op.describe(), config=backend.config.name, backend=backend.name, correct=correct,
        cycles=cycles, gemm_uops=stats.gemm_uops,
        utilization=None if not cycles else stats.gemm_uops / cycles,
        instructions=int(compiled.built.program.insns.shape[0]),
        dram_bytes_read=(stats.inp_load_bytes + stats.wgt_load_bytes + stats.acc_load_bytes
                         + stats.uop_load_bytes),
        compile_s=compiled.compile_s, schedule=compiled.schedule_json(), stats=stats,
    )


def compile_and_run(
    op: AccelOperator, backend: Backend, *, schedule: str | None = None, vthreads: int | None = None,
    seed: int = 0, tuning_log: str | None = None,
) -> tuple[CompiledOp, OpReport]:
    choice = schedule_source(op, schedule, vthreads, tuning_log)
    compiled = choice.compile(op)
    result = run_compiled(op, compiled, backend, seed)
    if tuning_log is not None and schedule is None:
        result = replace(result, schedule_source=choice.origin)
    return compiled, result
