"""The sweep's typed records: what evaluating one hardware point gives, layer by layer.

A `WorkloadSpec` names a model of the space (a zoo name or an ONNX file) with its weight in the
mixed objective; evaluating a point gives one `WorkloadResult` per workload, each with a
`LayerResult` per operator step, and the point's `PointResult` combines them with area and
energy into the objectives.  All are plain data that cross process boundaries and the store as
JSON (`to_json` / `from_json`, round-trip exact).

Every number says which fidelity produced it: 'estimate' (an analytical model: the compiler's
cycle estimate, the area or energy model), 'timing' (the cycle-exact timing model), 'rtl'
(the Verilated RTL) or 'measured' (wall time on this host).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

FIDELITIES = ("estimate", "timing", "rtl", "measured")
PLACEMENTS = ("accel", "host")


@dataclass(frozen=True)
class WorkloadSpec:
    """A model of the space: `model` is a zoo name or an ONNX file's path; `input_shapes` binds
    symbolic input dimensions (name -> shape); `weight` is its share of the mixed objective."""

    name: str
    model: str
    weight: float = 1.0
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def shapes(self) -> dict[str, tuple[int, ...]] | None:
        return dict(self.input_shapes) or None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "model": self.model, "weight": self.weight,
                "input_shapes": {k: list(v) for k, v in self.input_shapes}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadSpec:
        shapes = tuple((k, tuple(v)) for k, v in data.get("input_shapes", {}).items())
        return cls(data["name"], data["model"], float(data.get("weight", 1.0)), shapes)


@dataclass(frozen=True)
class LayerResult:
    """One operator step of a workload on one hardware point.

    `placement` is 'accel' or 'host'; a host step of an operator the accelerator could run says
    why in `reason` (never silently).  `cycles` and `stats` (Stats.to_dict()) are of the step's
    Program at `fidelity`; `knobs` is the schedule chosen for this hardware; `count` is how many
    steps of the model share this shape and schedule (their cycles are in the workload's total
    `count` times)."""

    name: str
    op: str
    placement: str
    macs: int
    cycles: int | None = None
    fidelity: str = "timing"
    knobs: dict[str, int] | None = None
    stats: dict[str, Any] | None = None
    reason: str | None = None
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayerResult:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class WorkloadResult:
    """A workload on one hardware point: accelerator `cycles` per run of `batch` inferences (the
    sum over its accelerator steps), `stats` summed over those steps (the energy model's event
    counts), the host's measured seconds per run where measured, and every step."""

    name: str
    weight: float
    batch: int
    cycles: int
    stats: dict[str, Any]
    offloaded_macs_fraction: float
    layers: tuple[LayerResult, ...]
    fidelity: str = "timing"
    host_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["layers"] = [layer.to_json() for layer in self.layers]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadResult:
        kept = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        kept["layers"] = tuple(LayerResult.from_json(x) for x in data.get("layers", ()))
        return cls(**kept)


@dataclass(frozen=True)
class PointResult:
    """One evaluated hardware point: `metrics` are the objectives and what explains them
    (latency_cycles, latency_ms, area_mm2, energy_uj, edp, per-component breakdowns flattened
    as 'area_mm2.gemm' ...), `fidelity` says for each metric which fidelity produced it, and
    `wall_s` where the evaluation's time went (compile, timing, search, ...)."""

    point_id: str
    workloads: tuple[WorkloadResult, ...]
    metrics: dict[str, float]
    fidelity: dict[str, str]
    wall_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"point_id": self.point_id, "workloads": [w.to_json() for w in self.workloads],
                "metrics": dict(self.metrics), "fidelity": dict(self.fidelity), "wall_s": dict(self.wall_s)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointResult:
        return cls(data["point_id"], tuple(WorkloadResult.from_json(w) for w in data["workloads"]),
                   dict(data["metrics"]), dict(data["fidelity"]), dict(data.get("wall_s", {})))


__all__ = ["FIDELITIES", "PLACEMENTS", "LayerResult", "PointResult", "WorkloadResult", "WorkloadSpec"]
