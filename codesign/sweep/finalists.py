"""`codesign sweep --confirm N`: the N best designs of a sweep's Pareto front (by its first
objective) confirmed on fsim and the RTL (codesign/sweep/confirm.py), each in a worker process
with a time limit, so a crash or a hang in a simulator costs only that design's confirmation;
every outcome is kept in the store beside the sweep's points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from codesign.exec.pool import Pool
from codesign.sweep.engine import pareto_front
from codesign.sweep.records import PointResult
from codesign.sweep.space import Point
from codesign.sweep.store import SweepStore
from hw.config import AcceleratorConfig

# (point, its stored result) -> one JSON object per workload (Confirmation.to_json())
Confirm = Callable[[Point, PointResult | None], list[dict[str, Any]]]


def best(db: SweepStore, metrics: Sequence[str], n: int) -> list[tuple[Point, PointResult | None]]:
    """The `n` designs of the front of `metrics` with the lowest first metric."""
    front = sorted(pareto_front(db, metrics), key=lambda p: p.metrics[metrics[0]])[:n]
    results = {r.id: r.result for r in db.points("ok")}
    return [(Point(AcceleratorConfig.from_dict(p.config, where=f"point {p.id}")), results.get(p.id))
            for p in front]


def confirm_best(store: str | Path, metrics: Sequence[str], confirm: Confirm, n: int, *,
                 timeout_s: float = 3600.0, workers: int = 1) -> list[dict[str, Any]]:
    """Confirm the `n` best designs of the sweep in `store`; every workload's outcome (or the
    design's failure: status 'error', 'timeout' or 'crash' with the reason) is stored and returned."""
    with SweepStore.read(store) as db:
        chosen = best(db, metrics, n)
        out: list[dict[str, Any]] = []
        with Pool(lambda item: confirm(*item), workers=workers, timeout_s=timeout_s) as pool:
            for i, found in pool.run(chosen):
                point = chosen[i][0]
                rows = found if isinstance(found, list) else [_failed(point, found)]
                for row in rows:
                    db.record_confirmation(point.id, str(row["workload"]), row)
                out += rows
    return out


def _failed(point: Point, failure: dict[str, Any]) -> dict[str, Any]:
    return {"point_id": point.id, "workload": "*", "ok": False, "status": failure.get("status"),
            "error": failure.get("error")}


__all__ = ["Confirm", "best", "confirm_best"]
