"""Cheap analytical estimates of a point's latency and energy, computed before it runs, for a
model-guided strategy to start from (codesign/sweep/surrogate.py): no compiling, no timing run.

Per workload and accelerator step (the steps `Evaluator` would run on the accelerator; shallow
convolutions and steps with no operator are left out, as the evaluation leaves them to the host),
the operator's best point under the compiler's own analytical estimate (`schedules.ranking`, the
estimate that picks a default schedule) gives:

* cycles: that estimate (identical shapes counted once per shape and multiplied, as evaluated);
* event counts of that schedule from the operator's own tiling (`Conv2d.events`, `Dense.events`:
  GEMM and ALU micro-ops, input/weight load and output store bytes, instructions, as the timing
  model counts them; the same tiling the estimate is computed from), which the energy model
  (`codesign.ppa.energy`) turns into picojoules with the leakage over those cycles.

Workload weights and batch policies combine as `metrics.point_metrics` combines real results
(here: the weighted sum, per inference under 'raise').  The estimates ignore DRAM contention,
the epilogue's exact micro-ops and the host steps; a strategy uses them as features and as
a starting order, never as results.  About 0.05 s per point for ResNet-18.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codesign.sweep.operators import Spec, batch_for, is_shallow, make_operator, padded
from codesign.sweep.prepare import Prepared
from codesign.sweep.schedules import ranking
from compiler.errors import ScheduleError
from compiler.ops.accel import Conv2d, Conv2dKnobs, Dense, DenseKnobs
from compiler.target.accel import AcceleratorTarget
from hw.config import AcceleratorConfig
from sim.backend import Stats

PROXY_METRICS = ("latency_cycles", "latency_ms", "energy_uj", "edp")


@dataclass
class _Counts:
    """Estimated counters of one operator's schedule (a Stats in the making)."""

    cycles: float = 0.0
    gemm_uops: float = 0.0
    alu_uops: float = 0.0
    inp_load_bytes: float = 0.0
    wgt_load_bytes: float = 0.0
    out_store_bytes: float = 0.0
    load_insns: float = 0.0
    compute_insns: float = 0.0
    store_insns: float = 0.0

    def add(self, other: _Counts, times: float) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + times * getattr(other, name))

    def stats(self) -> Stats:
        return Stats(**{name: round(getattr(self, name)) for name in self.__dataclass_fields__})


def _op_counts(spec: Spec, target: AcceleratorTarget) -> _Counts | None:
    """The counters of `spec`'s best-estimated schedule on `target` (None: no operator, or no
    fitting schedule)."""
    try:
        op = make_operator(spec, target)
    except ScheduleError:
        return None
    if isinstance(op, (Conv2d, Dense)):  # the best estimate (the first of ranking's order)
        grid, costs = op.estimates()
        if np.isnan(costs).all():
            return None
        best = int(np.nanargmin(costs))
        knobs = {name: int(values[best]) for name, values in grid.items()}
        events = op.events(Conv2dKnobs(**knobs)) if isinstance(op, Conv2d) else op.events(DenseKnobs(**knobs))
        return _Counts(float(costs[best]), **events)
    points = ranking(op)
    return _Counts(points.estimate(0)) if len(points) else None  # an element-wise step: its cycles


class Proxy:
    """`proxy(cfg)`: estimated latency_cycles, latency_ms, energy_uj and edp of one inference of
    the workloads (weighted) on `cfg`, from the compiler's estimates (see the module doc)."""

    def __init__(self, workloads: Sequence[Prepared], batch_policy: str = "pad") -> None:
        self.workloads, self.batch_policy = list(workloads), batch_policy

    def counts(self, prepared: Prepared, target: AcceleratorTarget) -> tuple[_Counts, int]:
        """One workload's summed counters on `target` and the inferences one run serves (as
        `evaluate._summary` reports its batch)."""
        steps = prepared.steps_for(target.block_in)
        own = prepared.batch
        run_batch = batch_for(own, target.batch)
        total = _Counts()
        seen: dict[Spec, _Counts | None] = {}
        for step in steps:
            if step.spec is None or is_shallow(step, target):
                continue
            spec = padded(step.spec, own, target.batch)
            if spec not in seen:
                seen[spec] = _op_counts(spec, target)
            found = seen[spec]
            if found is not None:
                total.add(found, 1.0)
        return total, (run_batch if self.batch_policy == "raise" else own)

    def __call__(self, cfg: AcceleratorConfig) -> dict[str, float]:
        from codesign.ppa.energy import energy_model

        target = AcceleratorTarget(cfg)
        weights = [w.spec.weight for w in self.workloads]
        scale = sum(weights) or 1.0
        cycles = energy = 0.0
        for prepared, weight in zip(self.workloads, weights, strict=True):
            counts, per_run = self.counts(prepared, target)
            stats = counts.stats()
            cycles += weight / scale * counts.cycles / per_run
            energy += weight / scale * energy_model(stats, cfg).total_pj * 1e-6 / per_run
        ms = cycles / (cfg.clock_mhz * 1e3)
        return {"latency_cycles": cycles, "latency_ms": ms, "energy_uj": energy, "edp": energy * ms}


def make_proxy(workloads: Sequence[Prepared], batch_policy: str = "pad") -> Proxy:
    return Proxy(workloads, batch_policy)


__all__ = ["PROXY_METRICS", "Proxy", "make_proxy"]
