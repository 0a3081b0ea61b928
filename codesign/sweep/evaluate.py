"""Evaluating one hardware point of a sweep: every workload's accelerator operators compiled with
schedules chosen for that hardware and run on the timing model.

`Evaluator(workloads)` prepares each workload once (codesign/sweep/prepare.py: import and
quantization, in the process that builds it; pool workers forked from it inherit the result);
`evaluator(cfg)` then gives one `WorkloadResult` per workload and the wall seconds by phase.

Per point and workload:
- each step of the quantized graph is an accelerator operator or a host step with its reason
  (codesign/sweep/operators.py): shallow convolutions, operators the accelerator has no
  operator for, float layers, and operators with no compiling schedule on this core all say why;
- the batch: a model whose batch is not a multiple of the core's (a batch-1 model on `rect`'s
  batch-2 core) runs at the next multiple.  `batch_policy` 'pad' reports the model's own batch
  and the cycles of one padded run as its latency; 'raise' reports the padded batch (that many
  inferences per run, so the latency per inference is cycles / batch);
- operators of identical shape are compiled once (`LayerResult.count` steps share one);
- each operator's schedule is chosen by `codesign/sweep/schedules.choose`: its default schedule,
  its best-estimated point and up to `measured` more, ranked by the estimate corrected by a
  `Ranker` (codesign/sweep/ranker.py), all measured on the timing model, the best by the layer
  objective kept ('cycles', or 'energy' / 'edp' with the caller's `energy_of(stats, cfg)`);
- the ranker: the evaluator learns a prior once, when it is made, by evaluating its
  `calibration` configs in order (all of them: stopping once it was trained, at 4 of ResNet-18's
  8, left 9% of its layers more than 5% off their best, against 4% with all 8), and each point
  starts from a copy of that prior and learns from its own timing runs only.  A result is a function
  of the point, the workloads and the calibration configs: not of the points evaluated before
  it in the same process, so a sweep gives the same results on any number of workers, in any
  order (the prior travels with the evaluator to every worker);
- compiled streams and their timing runs are shared between points (`ProgramCache`,
  codesign/sweep/programs.py): a point re-encodes what an earlier point with the same GEMM shape
  compiled, and reuses the Stats of a stream already run under the same memory system;
- the workload's cycles and stats are the sums over its accelerator steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from codesign.sweep.operators import Spec, Step, batch_for, is_shallow, make_operator, padded
from codesign.sweep.prepare import Prepared, prepare
from codesign.sweep.ranker import Ranker
from codesign.sweep.records import LayerResult, WorkloadResult, WorkloadSpec
from codesign.sweep.schedules import MEASURED, Choice, Objective, ProgramCache, Timer, choose
from compiler.errors import ScheduleError
from compiler.target.accel import AcceleratorTarget
from hw.config import AcceleratorConfig
from hw.errors import InputError
from sim.backend import Backend, Stats
from sim.backends import make_backend

LAYER_OBJECTIVES = ("cycles", "energy", "edp")
CALIBRATION_POINTS = 8  # configs a sweep's ranker prior is learned on
BATCH_POLICIES = ("pad", "raise")
EnergyOf = Callable[[Stats, AcceleratorConfig], float]


class Evaluator:
    """Evaluates hardware points for `workloads` (see the module doc)."""

    def __init__(self, workloads: Sequence[WorkloadSpec], *, layer_objective: str = "cycles",
                 batch_policy: str = "pad", energy_of: EnergyOf | None = None,
                 measured: int = MEASURED, block_ins: tuple[int, ...] = (8, 16, 32),
                 calibration: Sequence[AcceleratorConfig] = ()) -> None:
        """`measured`: candidates measured per operator beyond its default and best-estimated ones;
        `block_ins`: the cores' block_in values to quantize for now (others on first need);
        `calibration`: the configs the ranker's prior is learned on, in order (none: every
        point starts from an untrained ranker, and measures more)."""
        if layer_objective not in LAYER_OBJECTIVES:
            raise InputError(f"layer_objective must be one of {', '.join(LAYER_OBJECTIVES)}, "
                             f"not {layer_objective!r}")
        if batch_policy not in BATCH_POLICIES:
            raise InputError(f"batch_policy must be one of {', '.join(BATCH_POLICIES)}, not {batch_policy!r}")
        if layer_objective != "cycles" and energy_of is None:
            raise InputError(f"layer_objective {layer_objective!r} needs energy_of, an energy model "
                             "(Stats, AcceleratorConfig) -> energy")
        if measured < 0:
            raise InputError(f"measured must be at least 0, not {measured}")
        self.layer_objective, self.batch_policy = layer_objective, batch_policy
        self.energy_of, self.measured = energy_of, measured
        self.workloads = [prepare(w, block_ins) for w in workloads]
        self.cache = ProgramCache()
        self.prior = Ranker()
        self.measured_total = self.chosen_total = 0  # candidates measured, operators chosen for
        self.calibration_points, self.calibration_s = self._calibrate(calibration)
        self.measured_total = self.chosen_total = 0  # the calibration's are not the points'

    def _calibrate(self, configs: Sequence[AcceleratorConfig]) -> tuple[int, float]:
        """Learn the prior from every one of `configs`, in order: (configs used, seconds)."""
        start = time.perf_counter()
        for cfg in configs:
            self._evaluate(cfg, self.prior)
        return len(configs), time.perf_counter() - start

    def __call__(self, cfg: AcceleratorConfig) -> tuple[list[WorkloadResult], dict[str, float]]:
        """`cfg`'s result per workload, and the wall seconds by phase."""
        return self._evaluate(cfg, self.prior.copy())

    def _evaluate(self, cfg: AcceleratorConfig, ranker: Ranker
                  ) -> tuple[list[WorkloadResult], dict[str, float]]:
        start = time.perf_counter()
        timer = Timer()
        # validate=False: these Programs come from the compiler in this process (the simulators'
        # pre-flight check is for Programs from elsewhere; the timing model still checks the
        # ranges it indexes with), and it was a tenth of a point's time
        point = _Point(AcceleratorTarget(cfg), make_backend("timing", cfg, validate=False),
                       self.objective(cfg), timer, ranker)
        results = [self._workload(w, point) for w in self.workloads]
        timer.seconds["total"] = time.perf_counter() - start
        return results, timer.seconds

    def objective(self, cfg: AcceleratorConfig) -> Objective:
        """What a layer's schedule minimises on `cfg` (from the Stats of its Program)."""
        energy_of = self.energy_of
        if self.layer_objective == "cycles" or energy_of is None:
            return lambda stats: float(stats.cycles or 0)
        if self.layer_objective == "energy":
            return lambda stats: energy_of(stats, cfg)
        return lambda stats: energy_of(stats, cfg) * float(stats.cycles or 0)

    def choice(self, op: Any, point: _Point) -> Choice | None:
        """The schedule of `op` on this point (once per shape and point)."""
        key = (op.op, op.spec)
        if key not in point.choices:
            found = choose(op, point.backend, point.objective, self.cache, point.timer, self.measured,
                           point.ranker)
            point.choices[key] = found
            if found is not None:
                self.measured_total += found.measured
                self.chosen_total += 1
        return point.choices[key]

    def _workload(self, prepared: Prepared, point: _Point) -> WorkloadResult:
        start = time.perf_counter()
        steps = prepared.steps_for(point.target.block_in)
        point.timer.add("quantize", start)
        own = prepared.batch
        run_batch = batch_for(own, point.target.batch)
        layers: list[LayerResult] = []
        where: dict[Spec, int] = {}  # spec at the run's batch -> index of its layer
        for step in steps:
            spec = padded(step.spec, own, point.target.batch) if step.spec is not None else None
            if spec is not None and spec in where:
                i = where[spec]
                layers[i] = replace(layers[i], count=layers[i].count + 1)
                continue
            layer = self._layer(step, spec, point)
            if spec is not None and layer.placement == "accel":
                where[spec] = len(layers)
            layers.append(layer)
        return _summary(prepared.spec, own if self.batch_policy == "pad" else run_batch, layers)

    def _layer(self, step: Step, spec: Spec | None, point: _Point) -> LayerResult:
        host = LayerResult(step.name, step.op, "host", step.macs, reason=step.reason)
        target = point.target
        if is_shallow(step, target):
            return replace(host, reason=f"a shallow convolution ({step.shallow_channels} input channels "
                                        f"fill at most half of block_in {target.block_in}): the host runs"
                                        " it, as VTA's compiler does")
        if spec is None:
            return host
        try:
            op = make_operator(spec, target)
        except ScheduleError as exc:
            return replace(host, reason=f"the accelerator cannot run it: {exc}")
        choice = self.choice(op, point)
        if choice is None:
            return replace(host, reason=f"no schedule of its space compiles for this core ({op.op})")
        return LayerResult(step.name, step.op, "accel", step.macs, choice.stats.cycles, "timing",
                           choice.knobs.to_json(), choice.stats.to_dict())


class _Point:
    """What evaluating one hardware point shares between its workloads."""

    def __init__(self, target: AcceleratorTarget, backend: Backend, objective: Objective,
                 timer: Timer, ranker: Ranker) -> None:
        self.target, self.backend, self.objective, self.timer = target, backend, objective, timer
        self.ranker = ranker  # this point's: the evaluator's prior, then this point's own runs
        self.choices: dict[Any, Choice | None] = {}


def _summary(spec: WorkloadSpec, batch: int, layers: list[LayerResult]) -> WorkloadResult:
    accel = [x for x in layers if x.placement == "accel"]
    cycles = sum((x.cycles or 0) * x.count for x in accel)
    stats: dict[str, Any] = {}
    for x in accel:
        for key, value in (x.stats or {}).items():
            if value is not None:
                stats[key] = stats.get(key, 0) + value * x.count
    total = sum(x.macs * x.count for x in layers)
    offloaded = sum(x.macs * x.count for x in accel)
    return WorkloadResult(spec.name, spec.weight, batch, cycles, stats, offloaded / total if total else 0.0,
                          tuple(layers))


__all__ = ["BATCH_POLICIES", "CALIBRATION_POINTS", "LAYER_OBJECTIVES", "EnergyOf", "Evaluator"]
