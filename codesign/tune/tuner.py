"""The tuning loop: propose a batch, measure it in the pool, log it, learn, repeat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.tune import log
from codesign.tune.explore import History, Prior, make_explorer
from codesign.tune.measure import Measurer, task_for
from codesign.tune.records import Measurement, TrialRecord
from compiler.tune.space import Space
from hw.config import AcceleratorConfig
from hw.errors import InputError

Progress = Callable[[int, int, int | None], None]  # (trials done, trials planned, best cycles)


@dataclass
class TuneResult:
    space: Space
    method: str
    seed: int
    order: list[int] = field(default_factory=list)  # points in the order measured
    cycles: list[int | None] = field(default_factory=list)
    records: list[TrialRecord] = field(default_factory=list)  # this run's log lines

    @property
    def best_cycles(self) -> int | None:
        ok = [c for c in self.cycles if c is not None]
        return min(ok) if ok else None

    @property
    def best_knobs(self) -> Any:
        ok = [(c, i) for i, c in zip(self.order, self.cycles, strict=True) if c is not None]
        return self.space.points[min(ok)[1]] if ok else None

    def trials_to(self, cycles: float) -> int | None:
        """Trials until a point at most `cycles` was measured (None: never)."""
        for n, c in enumerate(self.cycles, 1):
            if c is not None and c <= cycles:
                return n
        return None


def tune(space: Space, cfg: AcceleratorConfig, measurer: Measurer, *, trials: int, method: str = "model",
         batch: int = 4, seed: int = 0, backend: str = "timing", log_path: str | Path | None = None,
         resume: list[TrialRecord] | None = None, prior: Prior | None = None,
         until: float | None = None, min_trials: int = 0, objective: str = "log",
         progress: Progress | None = None) -> TuneResult:
    """Search `space` for at most `trials` trials (those in `resume`, earlier records of this
    workload, config and backend, included), or, once `min_trials` are done, until a point of at
    most `until` cycles was measured."""
    if trials < 1:
        raise InputError(f"--trials must be at least 1, not {trials}")
    if batch < 1:
        raise InputError(f"--batch must be at least 1, not {batch}")
    options: dict[str, Any] = {"prior": prior, "objective": objective} if method == "model" else {}
    explorer = make_explorer(method, space, seed, **options)
    result = TuneResult(space, method, seed)
    history = History()
    for r in log.matching(resume or [], space.workload, cfg, backend):
        if r.method == "default":  # a reference measurement, not a trial of the search
            continue
        i = space.index(space.knobs_from_json(r.knobs))
        if i is not None and i not in history.cycles:
            history.cycles[i] = r.cycles if r.status == "ok" else None
            result.order.append(i)
            result.cycles.append(history.cycles[i])
    while len(result.order) < min(trials, len(space)):
        reached = until is not None and (result.best_cycles or until + 1) <= until
        if reached and len(result.order) >= min_trials:
            break
        n = min(batch, trials - len(result.order), len(space) - len(history.cycles))
        picked = explorer.propose(history, n)
        if not picked:
            break
        _measure(space, cfg, measurer, picked, history, result, backend, method, log_path)
        if progress is not None:
            progress(len(result.order), min(trials, len(space)), result.best_cycles)
    return result


def _measure(space: Space, cfg: AcceleratorConfig, measurer: Measurer, picked: list[int],
             history: History, result: TuneResult, backend: str, method: str,
             log_path: str | Path | None) -> None:
    tasks = [task_for(space.workload, cfg, space.points[i], backend) for i in picked]
    outcomes: dict[int, tuple[Measurement, bool]] = {}
    for j, res, cached in measurer.run(tasks):
        outcomes[j] = (res, cached)
    lines = []
    for j, i in enumerate(picked):
        res, cached = outcomes[j]
        history.cycles[i] = int(res.cycles) if res.ok and res.cycles is not None else None
        result.order.append(i)
        result.cycles.append(history.cycles[i])
        lines.append(log.record(space.workload, cfg, backend, tasks[j].knobs, res, method=method,
                                trial=len(result.order), cached=cached))
    result.records += lines
    if log_path is not None:
        log.append(log_path, lines)
