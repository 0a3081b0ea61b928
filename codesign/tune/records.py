"""The tuning stage's records: a `Measurement` (what measuring one schedule point gave) and a
`TrialRecord` (one line of the tuning log: a measurement with what was measured, where and how).

Both are plain data that cross process boundaries and files as JSON: `to_json()` gives exactly the
objects the store and the log have always held, key for key and in the same order, so existing
caches and logs read back and logs written now read in older code.  `from_json` takes a field that
is absent as None (a pool failure holds only status and error; a hand-written log line only what
`read` requires).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

# A trial that ran to the end (its outcome repeats) against one that gave no result: only the
# former are worth caching.
FINISHED = ("ok", "schedule_error", "error")


@dataclass(frozen=True)
class Measurement:
    """The outcome of measuring one schedule point.

    `status` is 'ok', 'schedule_error' (the knobs give no valid program), 'error' (the program
    failed to simulate, or the measuring function raised), 'timeout' or 'crash' (the worker
    gave nothing); `error` says why for any but 'ok'.  `cycles` and `stats` (Stats.to_dict())
    are those of the run; `correct` is None unless values were compared with numpy;
    `schedule` is CompiledOp.schedule_json() of the compiled point.
    """

    status: str
    error: str | None = None
    cycles: int | None = None
    stats: dict[str, Any] | None = None
    correct: bool | None = None
    compile_s: float | None = None
    run_s: float | None = None
    instructions: int | None = None
    schedule: dict[str, Any] | None = None

    @classmethod
    def failed(cls, status: str, reason: str) -> Measurement:
        """A trial that gave no measurement: status 'timeout', 'crash' or 'error'."""
        return cls(status=status, error=reason)

    @property
    def ok(self) -> bool:
        """Measured successfully, with a cycle count."""
        return self.status == "ok" and self.cycles is not None

    @property
    def finished(self) -> bool:
        """The trial ran to its end, so measuring it again gives the same (cacheable)."""
        return self.status in FINISHED

    def to_json(self) -> dict[str, Any]:
        """Every field, in declaration order (the order of the store's and the log's keys)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        """The inverse of `to_json`; `status` is required, other absent fields are None and
        unknown keys are ignored."""
        return cls(data["status"], **{f.name: data.get(f.name) for f in fields(cls)[1:]})


@dataclass(frozen=True)
class LoggedConfig:
    """The config of a trial as the log names it: `key` (compiler.tune.workload.config_key) is
    the identity that matters for matching trials; `params` is AcceleratorConfig.to_dict()."""

    name: str | None = None
    fingerprint: str | None = None
    key: str | None = None
    params: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoggedConfig:
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


@dataclass(frozen=True)
class TrialRecord:
    """One trial of the tuning log.

    `workload` is Workload.to_json() and `workload_key` its key; `method` is the search method
    ('model', 'random', 'grid') or 'default' for the default schedule measured as a reference;
    `trial` counts from 1 within a run (0 for the default); `cached` says the measurement came
    from the store.  The JSON line is these fields with the measurement's spliced in after
    `knobs`: version, time, workload, workload_key, config, backend, method, trial, knobs,
    status, error, cycles, stats, correct, compile_s, run_s, instructions, schedule, cached.
    """

    workload_key: str
    config: LoggedConfig
    knobs: dict[str, int]
    measurement: Measurement
    version: int | None = None
    time: float | None = None
    workload: dict[str, Any] | None = None
    backend: str | None = None
    method: str | None = None
    trial: int | None = None
    cached: bool | None = None

    @property
    def status(self) -> str:
        return self.measurement.status

    @property
    def cycles(self) -> int | None:
        return self.measurement.cycles

    @property
    def error(self) -> str | None:
        return self.measurement.error

    def to_json(self) -> dict[str, Any]:
        """The log line's object (key order as the log has always had it)."""
        return {
            "version": self.version, "time": self.time, "workload": self.workload,
            "workload_key": self.workload_key, "config": self.config.to_json(), "backend": self.backend,
            "method": self.method, "trial": self.trial, "knobs": self.knobs,
            **self.measurement.to_json(), "cached": self.cached,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialRecord:
        """A log line's object, which has at least workload_key, config (an object), knobs and
        status (log.read checks that); any other field absent reads as None."""
        return cls(
            workload_key=data["workload_key"], config=LoggedConfig.from_json(data["config"]),
            knobs=data["knobs"], measurement=Measurement.from_json(data),
            version=data.get("version"), time=data.get("time"), workload=data.get("workload"),
            backend=data.get("backend"), method=data.get("method"), trial=data.get("trial"),
            cached=data.get("cached"),
        )


__all__ = ["FINISHED", "LoggedConfig", "Measurement", "TrialRecord"]
