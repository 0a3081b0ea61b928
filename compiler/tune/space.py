"""The tuning space of one operator on one target: its knob grid, cut to the points worth
measuring, with each point's features.

A point is in the space when it fits the scratchpads (`op.fits`), lowers, and issues at most
`max_insns` DMA and GEMM/ALU instructions (counted on its IR, `features.static_insns`).  The cut
is a definition, not a heuristic of the search: points over it have tiles so small that the
instruction stream, not the GEMM core, sets their time, and compiling one costs seconds.  `codesign
bench tune` measures a sample of the cut points to show none is near the best.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from compiler.errors import ScheduleError
from compiler.ops.accel import AccelOperator, knobs_from_json
from compiler.tune import features as F
from compiler.tune.workload import Workload, config_key

MAX_INSNS = 20_000


class FeatureCache(Protocol):
    """Where features of lowered points are kept between runs (codesign.exec.store)."""

    def get_features(self, key: str) -> list[float] | None: ...
    def put_features(self, items: dict[str, list[float]]) -> None: ...


@dataclass(frozen=True)
class CutPoint:
    """A fitting point left out of the space, and why."""

    knobs: Any
    reason: str  # "insns" (over max_insns) or "lowering" (a ScheduleError)
    insns: int = 0


@dataclass
class Space:
    op: AccelOperator
    workload: Workload
    knob_names: tuple[str, ...]
    knob_values: dict[str, list[int]]
    points: list[Any]  # knobs, grid order
    features: np.ndarray  # (points, features)
    insns: np.ndarray  # static instruction count of each point
    cut: list[CutPoint] = field(default_factory=list)
    max_insns: int = MAX_INSNS

    def __post_init__(self) -> None:
        self._index = {knob_key(k): i for i, k in enumerate(self.points)}
        self._neighbours: list[list[int]] | None = None

    def __len__(self) -> int:
        return len(self.points)

    def index(self, knobs: Any) -> int | None:
        return self._index.get(knob_key(knobs))

    def neighbours(self, i: int) -> list[int]:
        """Points that differ from point `i` in one knob, by one step along its value list."""
        if self._neighbours is None:
            self._neighbours = self._neighbour_lists()
        return self._neighbours[i]

    def _neighbour_lists(self) -> list[list[int]]:
        names = self.knob_names
        pos = [tuple(self.knob_values[n].index(getattr(k, n)) for n in names) for k in self.points]
        where = {p: i for i, p in enumerate(pos)}
        out = []
        for p in pos:
            near = []
            for d in range(len(names)):
                for step in (-1, 1):
                    j = where.get(p[:d] + (p[d] + step,) + p[d + 1 :])
                    if j is not None:
                        near.append(j)
            out.append(near)
        return out

    def knobs_from_json(self, data: dict[str, Any]) -> Any:
        return knobs_from_json(self.op, data)


def knob_key(knobs: Any) -> str:
    return _key(knobs.to_json())


def _key(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


def build_space(op: AccelOperator, *, max_insns: int = MAX_INSNS, cache: FeatureCache | None = None,
                progress: Callable[[int, int], None] | None = None) -> Space:
    """Enumerate, lower and featurize every fitting point of `op` (features from `cache` when
    there, about 4 ms a point when not)."""
    workload = Workload.of(op)
    target = op.target
    prefix = f"{workload.key}:{config_key(target.cfg.to_dict())}:"
    fitting = [k for k in op.points() if op.fits(k)]  # type: ignore[attr-defined]
    kept, rows, insns, cut = [], [], [], []
    fresh: dict[str, list[float]] = {}
    for n, k in enumerate(fitting):
        key = prefix + knob_key(k)
        row = cache.get_features(key) if cache is not None else None
        if row is None:
            row = fresh[key] = _featurize(op, k)
        if row[0] < 0:
            cut.append(CutPoint(k, "lowering"))
        elif row[1] > max_insns:
            cut.append(CutPoint(k, "insns", int(row[1])))
        else:
            kept.append(k)
            insns.append(int(row[1]))
            rows.append(row[2:])
        if progress is not None:
            progress(n + 1, len(fitting))
    if cache is not None and fresh:
        cache.put_features(fresh)
    if not kept:
        raise ScheduleError(f"{op.op}: no schedule point fits and issues at most {max_insns} instructions")
    space = dict(op.space())  # type: ignore[attr-defined]
    return Space(op, workload, tuple(space), space, kept,
                 np.array(rows, dtype=np.float64).reshape(len(kept), -1), np.array(insns), cut, max_insns)


def _featurize(op: AccelOperator, knobs: Any) -> list[float]:
    """[ok flag, static instructions, *features]; the flag is -1 when lowering fails."""
    try:
        low = F.lower_point(op.schedule(knobs), op.target, op.op)
    except ScheduleError:
        return [-1.0, 0.0] + [0.0] * len(F.names())
    return [1.0, float(F.static_insns(low)), *F.vector(F.features(low, op.target)).tolist()]
