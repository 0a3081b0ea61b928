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
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesign.tune import log
from codesign.tune.explore import Prior
from codesign.tune.measure import Measurer, task_for
from codesign.tune.records import TrialRecord
from codesign.tune.tuner import TuneResult, tune
from compiler.ops import Conv2d, Dense, Operator
from compiler.ops.resnet18 import BENCH_EPILOGUE, CLASSIFIER, conv_specs
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


def run(cfg: AcceleratorConfig, measurer: Measurer, *, seeds: int = 5, batch: int = 4,
        fraction: float = 0.05, min_trials: int = 16, layers: list[str] | None = None,
        max_insns: int = MAX_INSNS, cut_sample: int = 6, confirm: bool = False,
        progress: Report | None = None) -> dict[str, Any]:
    target = AcceleratorTarget(cfg)
    specs = [(n, s) for n, s in conv_specs(BENCH_EPILOGUE)[1:] if not layers or n in layers]
    spaces = [(n, build_space(Conv2d(s, target), max_insns=max_insns, cache=measurer.store))  # type: ignore[arg-type]
              for n, s in specs]
    rows = exhaustive(cfg, measurer, spaces, progress)
    out_layers, budgeted, logs, budgets = [], {}, {}, {}
    for k, layer in enumerate(rows):
        budget = min(len(layer.space), max(int(fraction * len(layer.space)), min_trials))
        model = [_search(layer, cfg, measurer, "model", s, batch, budget) for s in range(seeds)]
        random = [_search(layer, cfg, measurer, "random", s, batch, 0) for s in range(seeds)]
        budgeted[layer.name] = model[0]
        best, knobs = _best_within(model[0], budget)
        logs[layer.name] = model[0].records[:budget]
        budgets[layer.name] = budget
        out_layers.append({
            "name": layer.name, "space_points": len(layer.space), "cut_points": len(layer.space.cut),
            "best_cycles": best, "exhaustive_best_cycles": int(layer.best),
            "default_cycles": layer.default_cycles, "gap": best / layer.best - 1,
            "default_gap": None if layer.default_cycles is None else layer.default_cycles / layer.best - 1,
            "trials": budget, "fraction_evaluated": budget / len(layer.space),
            "trials_to_98_model": _mean_trials(model, layer),
            "trials_to_98_random": _mean_trials(random, layer),
            "best_knobs": knobs.to_json(),
        })
        if progress is not None:
            progress("search", k + 1, len(rows))
    transfer = _transfer(rows, cfg, measurer, budgeted, budgets, seeds, batch, progress)
    if confirm:
        for row, layer in zip(out_layers, rows, strict=True):
            row.update(_confirm(cfg, measurer, layer, budgeted[layer.name], row["trials"]))
    for row, t in zip(out_layers, transfer, strict=True):
        row["trials_to_98_transfer"] = t
    return {
        "config": cfg.name, "fingerprint": cfg.fingerprint(), "backend": "timing", "max_insns": max_insns,
        "seeds": seeds, "batch": batch, "layers": out_layers,
        "median_gap": statistics.median(r["gap"] for r in out_layers),
        "median_fraction_evaluated": statistics.median(r["fraction_evaluated"] for r in out_layers),
        "random_over_model_trials": sum(r["trials_to_98_random"] for r in out_layers)
        / sum(r["trials_to_98_model"] for r in out_layers),
        "transfer": {
            "trials_to_98_scratch": sum(r["trials_to_98_model"] for r in out_layers),
            "trials_to_98_pretrained": sum(r["trials_to_98_transfer"] for r in out_layers),
            "layers_fewer": sum(r["trials_to_98_transfer"] < r["trials_to_98_model"] for r in out_layers),
            "layers_more": sum(r["trials_to_98_transfer"] > r["trials_to_98_model"] for r in out_layers),
        },
        "cut": _cut_sample(rows, cfg, measurer, cut_sample),
        "resnet18": resnet18(cfg, measurer, logs, max_insns),
    }


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
             budget: int) -> dict[str, Any]:
    """The tuned point on fsim and rtl with seeded data: exact, and rtl's cycles against the
    timing model's (which is cycle-exact with rtl on compiled programs)."""
    timing, knobs = _best_within(run, budget)
    tasks = [task_for(layer.space.workload, cfg, knobs, backend, check=True) for backend in ("fsim", "rtl")]
    (fsim, rtl) = [res for _, res, _ in sorted(measurer.run(tasks), key=lambda t: t[0])]
    cycles = rtl.cycles or 0
    return {"fsim_correct": fsim.correct, "rtl_correct": rtl.correct,
            "rtl_cycles": cycles, "rtl_over_timing": cycles / timing}


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


def _cut_sample(rows: list[Layer], cfg: AcceleratorConfig, measurer: Measurer, n: int) -> dict[str, Any]:
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
    return {"per_layer": n, "measured": len(tasks), "min_over_best": min(ratios.values(), default=None),
            "by_layer": ratios}


def resnet18(cfg: AcceleratorConfig, measurer: Measurer, logs: dict[str, list[TrialRecord]],
             max_insns: int = MAX_INSNS, batch: int = 4, trials: int = 32) -> dict[str, Any]:
    """Total accelerator cycles of ResNet-18's convolutions and classifier, default schedules
    against the best in the tuning logs.  Layers without a log (conv1, the classifier) are
    tuned here with `trials` model-guided trials."""
    target = AcceleratorTarget(cfg)
    ops: list[tuple[str, Operator]] = [(n, Conv2d(s, target)) for n, s in conv_specs(BENCH_EPILOGUE)]
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
        rows.append({"name": name, "default_cycles": d, "tuned_cycles": t})
    return {"default_cycles": default, "tuned_cycles": tuned, "ratio": tuned / default, "layers": rows}


def _cycles(measurer: Measurer, cfg: AcceleratorConfig, op: Operator, knobs: Any) -> int:
    ((_, res, _),) = list(measurer.run([task_for(Workload.of(op), cfg, knobs)]))
    if res.status != "ok":
        raise RuntimeError(f"{op.op} default schedule failed: {res.error}")
    return int(res.cycles)  # type: ignore[arg-type]


def table(result: dict[str, Any]) -> str:
    """The human-readable form of `run`'s result."""
    head = f"{'layer':<13}{'points':>7}{'best':>10}{'exhaustive':>11}{'gap':>7}{'frac':>7}{'default':>9}" \
           f"{'t98 model':>10}{'random':>8}{'transfer':>9}"
    lines = [head]
    for r in result["layers"]:
        lines.append(f"{r['name']:<13}{r['space_points']:>7}{r['best_cycles']:>10}"
                     f"{r['exhaustive_best_cycles']:>11}{r['gap']:>7.3f}{r['fraction_evaluated']:>7.3f}"
                     f"{r['default_gap'] or 0:>9.3f}{r['trials_to_98_model']:>10.1f}"
                     f"{r['trials_to_98_random']:>8.1f}{r['trials_to_98_transfer']:>9.1f}")
    t, rn = result["transfer"], result["resnet18"]
    lines += [f"median gap {result['median_gap']:.4f}, median fraction evaluated "
              f"{result['median_fraction_evaluated']:.4f}, random/model trials "
              f"{result['random_over_model_trials']:.2f}",
              f"transfer: {t['trials_to_98_pretrained']:.1f} trials pre-trained vs "
              f"{t['trials_to_98_scratch']:.1f} from scratch",
              f"ResNet-18 cycles: default {rn['default_cycles']}, tuned {rn['tuned_cycles']}, "
              f"ratio {rn['ratio']:.4f}"]
    return "\n".join(lines)
