"""Confirming a sweep's best designs: each workload compiled for the design with the schedules
the sweep chose, run whole on fsim (outputs exact against the integer reference), on the timing
model and on the Verilated RTL (outputs exact, cycles equal to the timing model's step by step).

Each accelerator operator takes the schedule the sweep stored for its layer (read back, not
chosen again: the search is not repeated, and the point's ranker prior need not be at hand);
an operator the store has no schedule for is chosen by `codesign/sweep/schedules.choose`.  The
confirmed model is then the one the sweep measured: its timing cycles must equal the stored ones
(`swept_cycles`), which the confirmation checks too.

A model whose batch is not a multiple of the core's runs at the padded batch, as the sweep
evaluated it (codesign/sweep/operators.py `padded`): the model is imported again at that batch
(`Prepared.at_batch`, calibrated on each calibration input repeated, so its layers are the
sweep's padded layers), fed seeded samples stacked to the batch, and its outputs, every row,
compared exactly against the integer reference of the same batched graph.  A model that cannot
be re-batched is recorded as not confirmed with the reason (`Confirmation.reason`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from codesign.run.model import matches_reference
from codesign.sweep.operators import batch_for, padded
from codesign.sweep.prepare import Prepared
from codesign.sweep.records import PointResult
from codesign.sweep.schedules import MEASURED, Objective, ProgramCache, Timer, choose
from compiler.errors import ModelImportError
from compiler.ops.accel import knobs_from_json
from compiler.runtime.model import CompiledModel, ModelResult
from compiler.target.accel import AcceleratorTarget
from hw.config import AcceleratorConfig
from sim.backend import Backend
from sim.backends import make_backend


@dataclass(frozen=True)
class Confirmation:
    """One workload of one design, run whole on fsim, the timing model and the RTL.

    `timing_cycles` and `rtl_cycles` are the accelerator cycles of one run; `swept_cycles` what
    the sweep stored for it (None when not given); `mismatched_steps` names each accelerator step
    whose RTL cycles differ from the timing model's; `batch` the batch the model ran at (its
    own, padded to a multiple of the core's); `reason` why it could not run at all (nothing
    else then holds a measurement)."""

    point_id: str
    workload: str
    fsim_exact: bool
    rtl_exact: bool
    timing_cycles: int
    rtl_cycles: int
    swept_cycles: int | None
    mismatched_steps: tuple[str, ...]
    accel_steps: int
    seconds: float
    batch: int = 1
    reason: str | None = None

    @property
    def ok(self) -> bool:
        if self.reason is not None:
            return False
        same_as_swept = self.swept_cycles is None or self.swept_cycles == self.timing_cycles
        return (self.fsim_exact and self.rtl_exact and self.rtl_cycles == self.timing_cycles
                and not self.mismatched_steps and same_as_swept)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "mismatched_steps": list(self.mismatched_steps), "ok": self.ok}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Confirmation:
        kept = {k: v for k, v in data.items() if k != "ok"}
        return cls(**{**kept, "mismatched_steps": tuple(kept["mismatched_steps"])})


def confirm(cfg: AcceleratorConfig, point_id: str, workloads: list[Prepared], objective: Objective,
            swept: PointResult | None = None, *, measured: int = MEASURED, seed: int = 0,
            backends: Callable[[str, AcceleratorConfig], Backend] = make_backend) -> list[Confirmation]:
    """Every workload of the design `cfg` confirmed (see the module doc); `objective` and
    `measured` as the sweep chose its layers' schedules."""
    timing = backends("timing", cfg)
    choose_for = _chooser(timing, objective, measured)
    stored = {w.name: w.cycles for w in swept.workloads} if swept is not None else {}
    out = []
    for prepared in workloads:
        start = time.perf_counter()
        name, run = prepared.spec.name, batch_for(prepared.batch, cfg.batch)
        try:
            batched = prepared.at_batch(run)
        except ModelImportError as exc:
            out.append(Confirmation(point_id, name, False, False, 0, 0, stored.get(name), (), 0,
                                    round(time.perf_counter() - start, 3), run,
                                    f"cannot run at the core's batch {run}: {exc}"))
            continue
        graph = batched.quantized(cfg.block_in)
        knobs_for = _stored(prepared, cfg, swept, choose_for)
        model = CompiledModel.compile(graph, AcceleratorTarget(cfg), knobs_for=knobs_for)
        feeds = prepared.samples_at(run, seed)
        fsim = model.run(feeds, backends("fsim", cfg))
        timed = model.run(feeds, timing)
        rtl = model.run(feeds, backends("rtl", cfg))
        out.append(Confirmation(
            point_id, name, matches_reference(graph, feeds, fsim),
            matches_reference(graph, feeds, rtl), timed.cycles, rtl.cycles, stored.get(name),
            _mismatched(timed, rtl), sum(1 for s in model.steps if s.where == "accel"),
            round(time.perf_counter() - start, 3), run))
    return out


def _chooser(timing: Backend, objective: Objective, measured: int) -> Callable[[Any], Any]:
    """The runtime's knobs_for: each operator's schedule chosen as the sweep chose it."""
    cache, timer = ProgramCache(), Timer()
    chosen: dict[Any, Any] = {}

    def knobs_for(op: Any) -> Any:
        key = (op.op, op.spec)
        if key not in chosen:
            choice = choose(op, timing, objective, cache, timer, measured)
            chosen[key] = None if choice is None else choice.knobs
        return chosen[key]

    return knobs_for


def _stored(prepared: Prepared, cfg: AcceleratorConfig, swept: PointResult | None,
            otherwise: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """knobs_for: the schedule the sweep stored for each operator's layer (by its spec at the
    padded batch, as the sweep compiled it: layers of one shape share one schedule), else
    `otherwise(op)`."""
    layers = {layer.name: layer.knobs for w in (swept.workloads if swept else ())
              if w.name == prepared.spec.name for layer in w.layers
              if layer.placement == "accel" and layer.knobs is not None}
    by_spec = {padded(s.spec, prepared.batch, cfg.batch): layers[s.name]
               for s in prepared.steps_for(cfg.block_in)
               if s.spec is not None and s.name in layers}

    def knobs_for(op: Any) -> Any:
        found = by_spec.get(op.spec)
        return knobs_from_json(op, found) if found is not None else otherwise(op)

    return knobs_for


def _mismatched(timed: ModelResult, rtl: ModelResult) -> tuple[str, ...]:
    return tuple(a.name for a, b in zip(timed.steps, rtl.steps, strict=True)
                 if a.where == "accel" and a.cycles != b.cycles)


__all__ = ["Confirmation", "confirm"]
