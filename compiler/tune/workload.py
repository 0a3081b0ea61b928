"""A workload: one operator spec (conv2d or dense) that can be rebuilt from JSON in any process,
and its identity for logs and caches."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from compiler.errors import ScheduleError
from compiler.ops.accel import AccelOperator, Conv2d, Conv2dSpec, Dense, DenseSpec, Epilogue
from compiler.target.accel import AcceleratorTarget

_SPECS: dict[str, tuple[type, type]] = {"conv2d": (Conv2dSpec, Conv2d), "dense": (DenseSpec, Dense)}


@dataclass(frozen=True)
class Workload:
    """`op` ("conv2d" or "dense") and its spec as plain JSON (epilogue included)."""

    op: str
    spec: dict[str, Any]

    @classmethod
    def of(cls, op: AccelOperator) -> Workload:
        if op.op not in _SPECS:
            raise ScheduleError(f"cannot tune {op.op}: tunable operators are {', '.join(_SPECS)}")
        return cls(op.op, json.loads(json.dumps(dataclasses.asdict(op.spec))))  # type: ignore[attr-defined]

    def make(self, target: AcceleratorTarget) -> AccelOperator:
        spec_cls, op_cls = _SPECS[self.op]
        fields = dict(self.spec)
        ep = dict(fields.pop("epilogue", {}))
        if ep.get("clip") is not None:
            ep["clip"] = tuple(ep["clip"])
        return op_cls(spec_cls(**fields, epilogue=Epilogue(**ep)), target)  # type: ignore[no-any-return]

    @property
    def key(self) -> str:
        """A stable identity: 16 hex digits of the canonical JSON."""
        return hashlib.sha256(self.to_json_text().encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "spec": self.spec}

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workload:
        if data.get("op") not in _SPECS or not isinstance(data.get("spec"), dict):
            raise ValueError(f"not a workload: {data!r}")
        return cls(data["op"], data["spec"])


def config_key(params: dict[str, Any]) -> str:
    """Identity of a config for measurements: every parameter but the name, the simulation-only
    DRAM model included (a fingerprint leaves it out, but it changes the cycles)."""
    canonical = json.dumps({k: v for k, v in params.items() if k != "name"}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
