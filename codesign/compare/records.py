"""The typed records of `codesign compare`: per backend a `BackendResult` (latency with its
spread, throughput, achieved GOP/s against the device's peak, agreement with onnxruntime fp32;
energy left empty until the energy model lands), per model a `CompareReport`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Latency:
    """Milliseconds over `runs` runs after warm-up: median, quartiles, extremes."""

    runs: int
    median_ms: float
    p25_ms: float
    p75_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> Latency:
        ms = np.asarray(seconds, np.float64) * 1e3
        p25, median, p75 = np.percentile(ms, [25, 50, 75])
        return cls(len(ms), float(median), float(p25), float(p75), float(ms.min()), float(ms.max()))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


FAITHFUL_COSINE = 0.95  # mean cosine against onnxruntime fp32 below which outputs are called off
# (int8 on bert-tiny's two logits: 0.98-0.99; onnxruntime's quantizer over every operator: 0.64)


@dataclass(frozen=True)
class BackendResult:
    """One backend on one model. `timing`: "simulated" (the accelerator: its timing model's
    cycles at the config's clock, plus the host steps it leaves, measured) or "measured";
    `gops`: 2 x the model's MACs per median latency, `peak_fraction` of `peak_gops`;
    `cosine`/`top1_*`: against onnxruntime fp32 on the same inputs (top-1 None for a model that
    is no classifier); `energy_mj`: None until an energy model gives it."""

    backend: str
    device: str
    precision: str
    timing: str
    threads: int | None
    latency: Latency
    throughput_per_s: float
    gops: float
    peak_gops: float
    peak_fraction: float
    peak_source: str
    cosine: float | None
    top1_agreement: float | None
    top1_ci95: tuple[float, float] | None
    compile_s: float
    fallbacks: tuple[str, ...] = ()
    energy_mj: float | None = None
    energy_source: str | None = None

    @property
    def faithful(self) -> bool:
        """Its outputs agree with onnxruntime fp32 (cosine at least FAITHFUL_COSINE, or not
        compared): a backend that computes something else has no place in a race."""
        return self.cosine is None or self.cosine >= FAITHFUL_COSINE

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["faithful"] = self.faithful
        out["latency"] = self.latency.to_json()
        out["top1_ci95"] = list(self.top1_ci95) if self.top1_ci95 else None
        out["fallbacks"] = list(self.fallbacks)
        return out


@dataclass(frozen=True)
class CompareReport:
    """Every backend on one model: `macs` per inference, `inputs` compared for agreement,
    `repeat` timed runs each (interleaved round by round), the fastest backend by median."""

    model: str
    macs: int
    inputs: int
    repeat: int
    threads: int
    results: tuple[BackendResult, ...] = field(default_factory=tuple)

    @property
    def fastest(self) -> str:
        """The backend with the lowest median latency among those whose outputs are faithful."""
        faithful = [r for r in self.results if r.faithful]
        return min(faithful, key=lambda r: r.latency.median_ms).backend if faithful else ""

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "macs": self.macs, "inputs": self.inputs, "repeat": self.repeat,
                "threads": self.threads, "fastest": self.fastest,
                "results": [r.to_json() for r in self.results]}
