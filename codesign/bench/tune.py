"""`codesign bench tune`: the tuner against exhaustive enumeration on the ten ResNet-18 layers
after the first, the model against random search, transfer between layers, and ResNet-18's
total cycles with the tuned schedules.

Every point of every layer's space is measured on the timing model once (cached in the store),
so the searches replay from the cache: a search trial costs a lookup, and the numbers are those
the same searches would get measuring live.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from codesign.tune import log
from codesign.tune.explore import Prior
from codesign.tune.measure import Measurer, task_for
from codesign.tune.records import TrialRecord
from codesign.tune.tuner import TuneResult, tune
from compiler.ops.accel import AccelOperator, Conv2d, Dense
from compiler.ops.accel.resnet18 import BENCH_EPILOGUE, CLASSIFIER, conv_specs
from compiler.target import AcceleratorTarget
from compiler.tune.space import MAX_INSNS, Space, build_space
from compiler.tune.workload import Workload
from hw.config import AcceleratorConfig

NEAR = 0.98  # "reaches 98% of the best": cycles <= best / 0.98
Report = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass
class Layer:
    name: str
    space: Space
    cycles: np.ndarray  # exhaustive, inf where the trial failed
    default_cycles: int | None

    @property
    def best(self) -> float:
        return float(self.cycles.min())

    @property
    def target(self) -> float:
        return self.best / NEAR


def _plain(record: Any) -> dict[str, Any]:
    """A flat record's fields as JSON, in declaration order."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True)
class Confirmation:
    """The tuned point of a layer re-run on fsim and rtl with seeded data (`--confirm`)."""

    fsim_correct: bool | None
    rtl_correct: bool | None
    rtl_cycles: int
    rtl_over_timing: float

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class LayerRow:
    """One layer's searches: `gap` is the budgeted best over the exhaustive best, minus 1;
    `trials_to_98_*` are mean trials (over seeds) to reach 98% of the exhaustive best."""

    name: str
    space_points: int
    cut_points: int
    best_cycles: int
    exhaustive_best_cycles: int
    default_cycles: int | None
    gap: float
    default_gap: float | None
    trials: int
    fraction_evaluated: float
    trials_to_98_model: float
    trials_to_98_random: float
    best_knobs: dict[str, int]
    confirmation: Confirmation | None = None  # only with --confirm
    trials_to_98_transfer: float | None = None  # set once the transfer runs are done

    def to_json(self) -> dict[str, Any]:
        """The confirmation's fields (if any) flat after best_knobs, then trials_to_98_transfer."""
        out = _plain(self)
        del out["confirmation"], out["trials_to_98_transfer"]
        if self.confirmation is not None:
            out.update(self.confirmation.to_json())
        out["trials_to_98_transfer"] = self.trials_to_98_transfer
        return out


@dataclass(frozen=True)
class TransferSummary:
    """Trials to 98% summed over layers, from scratch and with a pre-trained model."""

    trials_to_98_scratch: float
    trials_to_98_pretrained: float
    layers_fewer: int
    layers_more: int

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class CutSample:
    """Cut points measured: the fastest of them over each layer's best (`by_layer`)."""

    per_layer: int
    measured: int
    min_over_best: float | None
    by_layer: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class ResNet18Row:
    name: str
    default_cycles: int
    tuned_cycles: int

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class ResNet18Tuned:
    """ResNet-18's accelerator cycles, default schedules against the tuned ones."""

    default_cycles: int
    tuned_cycles: int
    ratio: float
    layers: tuple[ResNet18Row, ...]

    def to_json(self) -> dict[str, Any]:
        return {**_plain(self), "layers": [r.to_json() for r in self.layers]}


@dataclass(frozen=True)
class TuneBenchReport:
    """`codesign bench tune`'s result; `to_json()` is what `--json` prints."""

    config: str
    fingerprint: str
    backend: str
    max_insns: int
    seeds: int
    batch: int
    layers: tuple[LayerRow, ...]
    median_gap: float
    median_fraction_evaluated: float
    random_over_model_trials: float
    transfer: TransferSummary
    cut: CutSample
    resnet18: ResNet18Tuned

    def to_json(self) -> dict[str, Any]:
        return {**_plain(self), "layers": [r.to_json() for r in self.layers],
                "transfer": self.transfer.to_json(), "cut": self.cut.to_json(),
                "resnet18": self.resnet18.to_json()}


def run(cfg: AcceleratorConfig, measurer: Measurer, *, seeds: int = 5, batch: int = 4,
        fraction: float = 0.05, min_trials: int = 16, layers: list[str] | None = None,
        max_insns: int = MAX_INSNS, cut_sample: int = 6, confirm: bool = False,
        progress: Report | None = None) -> TuneBenchReport:
    """Search each layer (model and random, `seeds` each, within a budget of `fraction` of its
    space and at least `min_trials`), transfer between layers, and ResNet-18 with the results."""
    target = AcceleratorTarget(cfg)
    specs = [(n, s) for n, s in conv_specs(BENCH_EPILOGUE)[1:] if not layers or n in layers]
    spaces = [(n, build_space(Conv2d(s, target), max_insns=max_insns, cache=measurer.store))  # type: ignore[arg-type]
              for n, s in specs]
    rows = exhaustive(cfg, measurer, spaces, progress)
    out_layers: list[LayerRow] = []
    budgeted: dict[str, TuneResult] = {}
    logs: dict[str, list[TrialRecord]] = {}
    budgets: dict[str, int] = {}
    for k, layer in enumerate(rows):
        budget = min(len(layer.space), max(int(fraction * len(layer.space)), min_trials))
        model = [_search(layer, cfg, measurer, "model", s, batch, budget) for s in range(seeds)]
        random = [_search(layer, cfg, measurer, "random", s, batch, 0) for s in range(seeds)]
        budgeted[layer.name] = model[0]
        best, knobs = _best_within(model[0], budget)
        logs[layer.name] = model[0].records[:budget]
        budgets[layer.name] = budget
        out_layers.append(LayerRow(
            name=layer.name, space_points=len(layer.space), cut_points=len(layer.space.cut),
            best_cycles=best, exhaustive_best_cycles=int(layer.best),
            default_cycles=layer.default_cycles, gap=best / layer.best - 1,
            default_gap=None if layer.default_cycles is None else layer.default_cycles / layer.best - 1,
            trials=budget, fraction_evaluated=budget / len(layer.space),
            trials_to_98_model=_mean_trials(model, layer),
            trials_to_98_random=_mean_trials(random, layer),
            best_knobs=knobs.to_json(),
        ))
        if progress is not None:
            progress("search", k + 1, len(rows))
    transfer = _transfer(rows, cfg, measurer, budgeted, budgets, seeds, batch, progress)
    if confirm:
        out_layers = [replace(r, confirmation=_confirm(cfg, measurer, layer, budgeted[layer.name], r.trials))
                      for r, layer in zip(out_layers, rows, strict=True)]
    out_layers = [replace(row, trials_to_98_transfer=t) for row, t in zip(out_layers, transfer, strict=True)]
    return TuneBenchReport(
        config=cfg.name, fingerprint=cfg.fingerprint(), backend="timing", max_insns=max_insns,
        seeds=seeds, batch=batch, layers=tuple(out_layers),
        median_gap=statistics.median(r.gap for r in out_layers),
        median_fraction_evaluated=statistics.median(r.fraction_evaluated for r in out_layers),
        random_over_model_trials=sum(r.trials_to_98_random for r in out_layers)
        / sum(r.trials_to_98_model for r in out_layers),
        transfer=TransferSummary(
            trials_to_98_scratch=sum(r.trials_to_98_model for r in out_layers),
            trials_to_98_pretrained=sum(transfer),
            layers_fewer=sum(t < r.trials_to_98_model for r, t in zip(out_layers, transfer, strict=True)),
            layers_more=sum(t > r.trials_to_98_model for r, t in zip(out_layers, transfer, strict=True)),
        ),
        cut=_cut_sample(rows, cfg, measurer, cut_sample),
        resnet18=resnet18(cfg, measurer, logs, max_insns),
    )


def exhaustive(cfg: AcceleratorConfig, measurer: Measurer, spaces: list[tuple[str, Space]],
               progress: Report | None = None) -> list[Layer]:
    """Measure every point of every space (and each default schedule), in one pool run."""
    tasks, owner = [], []
    for k, (_, space) in enumerate(spaces):
        for i, knobs in enumerate(space.points):
            tasks.append(task_for(space.workload, cfg, knobs))
            owner.append((k, i))
        tasks.append(task_for(space.workload, cfg, space.op.default_knobs()))  # type: ignore[attr-defined]
        owner.append((k, -1))
    cycles = [np.full(len(s), np.inf) for _, s in spaces]
    defaults: list[int | None] = [None] * len(spaces)
    for done, (j, res, _) in enumerate(measurer.run(tasks), 1):
        k, i = owner[j]
        value = res.cycles if res.status == "ok" else None
        if i < 0:
            defaults[k] = value
        elif value is not None:
            cycles[k][i] = value
        if progress is not None and (done % 50 == 0 or done == len(tasks)):
            progress("exhaustive", done, len(tasks))
    return [Layer(n, s, c, d) for (n, s), c, d in zip(spaces, cycles, defaults, strict=True)]


def _search(layer: Layer, cfg: AcceleratorConfig, measurer: Measurer, method: str, seed: int,
            batch: int, min_trials: int, prior: Prior | None = None) -> TuneResult:
    return tune(layer.space, cfg, measurer, trials=len(layer.space), method=method, batch=batch,
                seed=seed, until=layer.target, min_trials=min_trials, prior=prior)


def _confirm(cfg: AcceleratorConfig, measurer: Measurer, layer: Layer, run: TuneResult,
             budget: int) -> Confirmation:
    """The tuned point on fsim and rtl with seeded data: exact, and rtl's cycles against the
    timing model's (which is cycle-exact with rtl on compiled programs)."""
    timing, knobs = _best_within(run, budget)
    tasks = [task_for(layer.space.workload, cfg, knobs, backend, check=True) for backend in ("fsim", "rtl")]
    (fsim, rtl) = [res for _, res, _ in sorted(measurer.run(tasks), key=lambda t: t[0])]
    cycles = rtl.cycles or 0
    return Confirmation(fsim_correct=fsim.correct, rtl_correct=rtl.correct, rtl_cycles=cycles,
                        rtl_over_timing=cycles / timing)


def _best_within(run: TuneResult, trials: int) -> tuple[int, Any]:
    """The fastest of the first `trials` trials: (cycles, knobs)."""
    ok = [(c, i) for i, c in zip(run.order[:trials], run.cycles[:trials], strict=True) if c is not None]
    cycles, index = min(ok)
    return cycles, run.space.points[index]


def _mean_trials(results: list[TuneResult], layer: Layer) -> float:
    return float(np.mean([r.trials_to(layer.target) or len(layer.space) for r in results]))


def _transfer(rows: list[Layer], cfg: AcceleratorConfig, measurer: Measurer,
              budgeted: dict[str, TuneResult], budgets: dict[str, int], seeds: int, batch: int,
              progress: Report | None) -> list[float]:
    """Trials to 98% with a model pre-trained on the other layers' tuning logs (their budgeted
    seed-0 runs), averaged over seeds, per layer."""
    out = []
    for k, layer in enumerate(rows):
        xs, cs, gs = [], [], []
        for g, other in enumerate(rows):
            if other.name == layer.name:
                continue
            run, n = budgeted[other.name], budgets[other.name]
            ok = [(i, c) for i, c in zip(run.order[:n], run.cycles[:n], strict=True) if c is not None]
            xs.append(other.space.features[[i for i, _ in ok]])
            cs.append(np.array([c for _, c in ok], dtype=np.float64))
            gs.append(np.full(len(ok), g))
        prior = Prior(np.vstack(xs), np.concatenate(cs), np.concatenate(gs)) if xs else None
        runs = [_search(layer, cfg, measurer, "model", s, batch, 0, prior) for s in range(seeds)]
        out.append(_mean_trials(runs, layer))
        if progress is not None:
            progress("transfer", k + 1, len(rows))
    return out


def _cut_sample(rows: list[Layer], cfg: AcceleratorConfig, measurer: Measurer, n: int) -> CutSample:
    """Measure `n` seeded cut points per layer, the fewest-instruction ones among them first:
    the fastest of them over the layer's best shows the cut loses nothing near the best."""
    tasks, owner = [], []
    rng = np.random.default_rng(0)
    for k, layer in enumerate(rows):
        cut = [c for c in layer.space.cut if c.reason == "insns"]
        cut.sort(key=lambda c: c.insns)
        chosen = cut[: n // 2] + [cut[int(i)] for i in rng.permutation(len(cut))[: n - n // 2]] if cut else []
        for c in chosen:
            tasks.append(task_for(layer.space.workload, cfg, c.knobs))
            owner.append(k)
    ratios: dict[str, float] = {}
    for j, res, _ in measurer.run(tasks):
        if res.status == "ok" and res.cycles:
            name = rows[owner[j]].name
            ratios[name] = min(ratios.get(name, math.inf), res.cycles / rows[owner[j]].best)
    return CutSample(per_layer=n, measured=len(tasks), min_over_best=min(ratios.values(), default=None),
                     by_layer=ratios)


def resnet18(cfg: AcceleratorConfig, measurer: Measurer, logs: dict[str, list[TrialRecord]],
             max_insns: int = MAX_INSNS, batch: int = 4, trials: int = 32) -> ResNet18Tuned:
    """Total accelerator cycles of ResNet-18's convolutions and classifier, default schedules
    against the best in the tuning logs.  Layers without a log (conv1, the classifier) are
    tuned here with `trials` model-guided trials."""
    target = AcceleratorTarget(cfg)
    ops: list[tuple[str, AccelOperator]] = [(n, Conv2d(s, target)) for n, s in conv_specs(BENCH_EPILOGUE)]
    ops.append(("fc", Dense(CLASSIFIER, target)))
    default, tuned, rows = 0, 0, []
    for name, op in ops:
        records = logs.get(name)
        if records is None:
            space = build_space(op, max_insns=max_insns, cache=measurer.store)  # type: ignore[arg-type]
            records = tune(space, cfg, measurer, trials=min(trials, len(space)), batch=batch).records
        found = log.best(records, Workload.of(op), cfg)
        d = _cycles(measurer, cfg, op, op.default_knobs())
        t = min(d, found.cycles or d) if found else d  # the log's best, or the default if slower
        default, tuned = default + d, tuned + t
        rows.append(ResNet18Row(name=name, default_cycles=d, tuned_cycles=t))
    return ResNet18Tuned(default_cycles=default, tuned_cycles=tuned, ratio=tuned / default,
                         layers=tuple(rows))


def _cycles(measurer: Measurer, cfg: AcceleratorConfig, op: AccelOperator, knobs: Any) -> int:
    ((_, res, _),) = list(measurer.run([task_for(Workload.of(op), cfg, knobs)]))
    if res.status != "ok":
        raise RuntimeError(f"{op.op} default schedule failed: {res.error}")
    return int(res.cycles)  # type: ignore[arg-type]


def table(report: TuneBenchReport) -> str:
    """The human-readable form of `run`'s report."""
    head = f"{'layer':<13}{'points':>7}{'best':>10}{'exhaustive':>11}{'gap':>7}{'frac':>7}{'default':>9}" \
           f"{'t98 model':>10}{'random':>8}{'transfer':>9}"
    lines = [head]
    for r in report.layers:
        lines.append(f"{r.name:<13}{r.space_points:>7}{r.best_cycles:>10}"
                     f"{r.exhaustive_best_cycles:>11}{r.gap:>7.3f}{r.fraction_evaluated:>7.3f}"
                     f"{r.default_gap or 0:>9.3f}{r.trials_to_98_model:>10.1f}"
                     f"{r.trials_to_98_random:>8.1f}{r.trials_to_98_transfer:>9.1f}")
    t, rn = report.transfer, report.resnet18
    lines += [f"median gap {report.median_gap:.4f}, median fraction evaluated "
              f"{report.median_fraction_evaluated:.4f}, random/model trials "
              f"{report.random_over_model_trials:.2f}",
              f"transfer: {t.trials_to_98_pretrained:.1f} trials pre-trained vs "
              f"{t.trials_to_98_scratch:.1f} from scratch",
              f"ResNet-18 cycles: default {rn.default_cycles}, tuned {rn.tuned_cycles}, "
              f"ratio {rn.ratio:.4f}"]
    return "\n".join(lines)
