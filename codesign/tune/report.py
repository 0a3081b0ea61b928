"""What `codesign tune op` and `codesign tune model` report: `TuneReport` for one operator,
`ModelTuneReport` with one `OperatorTuneRow` per distinct operator of a model.  `to_json()` gives
the JSON the commands print (keys in this order)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from codesign.tune.records import Measurement
from codesign.tune.tuner import TuneResult


@dataclass(frozen=True)
class TuneReport:
    """One operator's search: `workload` is the spec (Workload.spec); `trials` counts the log's
    earlier trials too, `new_trials` those of this run, `statuses` this run's trials by status;
    `best_cycles` and `best_knobs` are None when no trial succeeded; `default_cycles` is the
    default schedule's (None if it failed); `log` the log file, if any."""

    op: str
    workload: dict[str, Any]
    config: str
    backend: str
    method: str
    space_points: int
    cut_points: int
    trials: int
    new_trials: int
    statuses: dict[str, int]
    best_cycles: int | None
    best_knobs: dict[str, int] | None
    default_cycles: int | None
    speedup_over_default: float | None
    log: str | None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def tune_report(result: TuneResult, default: Measurement, *, config: str, backend: str,
                log: str | None) -> TuneReport:
    """The report of `result` (a search of one space) against the default schedule's
    measurement `default`."""
    space = result.space
    statuses: dict[str, int] = {}
    for r in result.records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    best = result.best_cycles
    return TuneReport(
        op=space.workload.op, workload=space.workload.spec, config=config, backend=backend,
        method=result.method, space_points=len(space), cut_points=len(space.cut),
        trials=len(result.order), new_trials=len(result.records), statuses=statuses,
        best_cycles=best, best_knobs=None if best is None else result.best_knobs.to_json(),
        default_cycles=default.cycles,
        speedup_over_default=default.cycles / best if best and default.cycles else None,
        log=log,
    )


@dataclass(frozen=True)
class OperatorTuneRow:
    """One distinct accelerator operator of a model: `steps` are the model steps (node names)
    that run it, all tuned by one search."""

    op: str
    steps: tuple[str, ...]
    space_points: int
    trials: int
    default_cycles: int | None
    best_cycles: int | None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["steps"] = list(self.steps)
        return out


@dataclass(frozen=True)
class ModelTuneReport:
    """A model's searches: `default_cycles` and `tuned_cycles` sum each row's cycles times its
    steps (the tuned ones never above the default: a run would keep the default then);
    `tuned_over_default` is None when the default total is 0."""

    model: str
    config: str
    backend: str
    operators: tuple[OperatorTuneRow, ...]
    default_cycles: int
    tuned_cycles: int
    tuned_over_default: float | None
    log: str | None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["operators"] = [r.to_json() for r in self.operators]
        return out


def model_tune_report(rows: list[OperatorTuneRow], *, model: str, config: str, backend: str,
                      log: str | None) -> ModelTuneReport:
    """The report over `rows`; every row needs its default cycles."""

    def total(best: bool) -> int:
        out = 0
        for r in rows:
            assert r.default_cycles is not None, f"{r.steps[0]}: the default schedule was not measured"
            cycles = (r.best_cycles if best else r.default_cycles) or r.default_cycles
            out += len(r.steps) * min(cycles, r.default_cycles)
        return out

    default, tuned = total(best=False), total(best=True)
    return ModelTuneReport(model=model, config=config, backend=backend, operators=tuple(rows),
                           default_cycles=default, tuned_cycles=tuned,
                           tuned_over_default=tuned / default if default else None, log=log)


__all__ = ["ModelTuneReport", "OperatorTuneRow", "TuneReport", "model_tune_report", "tune_report"]
