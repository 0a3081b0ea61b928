"""Cost-model objectives on our data: which ranks schedule points best?

For each of the ten ResNet-18 layers after the first (on a config given like `codesign bench
tune`), from the exhaustive timing-model measurements (the tuning cache; `codesign bench tune`
fills it): train on a seeded sample of the layer's points ("online": what the tuner has after a
few rounds) or on every point of the other nine layers ("transfer"), predict the rest, and score
the ranking: Spearman correlation, recall of the true top 10 among the predicted top 50, and the
regret of the predicted best (its cycles over the best's).  Objectives:

  hgbr-log    sklearn HistGradientBoostingRegressor on log2(best / cycles) per workload (ours)
  hgbr-ratio  the same on best / cycles (AutoTVM's 'reg' target)
  lgbm-rank   LightGBM LGBMRanker, lambdarank on 31 relevance levels (only when lightgbm is
              installed; it is not a dependency)

Prints JSON.  Usage: python benchmarks/tune_objectives.py [--config vta] [--set k=v] [--sample 32]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from scipy.stats import spearmanr

from codesign.bench import tune as bench
from codesign.exec.store import Store
from codesign.tune.measure import Measurer
from codesign.tune.model import CostModel
from codesign.tune.tuner import tune
from compiler.ops.accel import Conv2d
from compiler.ops.accel.resnet18 import BENCH_EPILOGUE, conv_specs
from compiler.target import AcceleratorTarget
from compiler.tune.space import build_space
from hw.config import resolve


def _rank_model(x: np.ndarray, cycles: np.ndarray, groups: np.ndarray, seed: int):  # type: ignore[no-untyped-def]
    import lightgbm

    order = np.argsort(groups, kind="stable")
    x, cycles, groups = x[order], cycles[order], groups[order]
    rel = np.zeros(len(cycles), dtype=np.int64)
    for g in np.unique(groups):
        rows = groups == g
        ratio = cycles[rows].min() / cycles[rows]
        rel[rows] = np.clip((ratio * 30).round(), 0, 30).astype(np.int64)
    sizes = [int((groups == g).sum()) for g in np.unique(groups)]
    model = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=150, num_leaves=15, min_child_samples=2,
                                learning_rate=0.1, random_state=seed, verbose=-1, n_jobs=1,
                                label_gain=list(range(31)))
    model.fit(x, rel, group=sizes)
    return model.predict


def _predictor(name: str, x: np.ndarray, cycles: np.ndarray, groups: np.ndarray, seed: int):  # type: ignore[no-untyped-def]
    if name == "lgbm-rank":
        return _rank_model(x, cycles, groups, seed)
    return CostModel(name.removeprefix("hgbr-"), seed).fit(x, cycles, groups).predict


def _score(pred: np.ndarray, cycles: np.ndarray) -> dict[str, float]:
    true_top = set(np.argsort(cycles)[:10].tolist())
    pred_top = set(np.argsort(-pred)[:50].tolist())
    rho = spearmanr(-cycles, pred).statistic
    return {"spearman": float(rho), "top10_in_50": len(true_top & pred_top) / 10,
            "regret": float(cycles[int(np.argmax(pred))] / cycles.min())}


def _tuning(cfg, layers, seeds):  # type: ignore[no-untyped-def]
    """The tuner itself with each regression target: mean trials to 98% of the best, summed
    over layers (the search replays from the cache)."""
    measurer = Measurer(store=Store(), workers=2)
    out = {}
    for objective in ("log", "ratio"):
        total = 0.0
        for layer in layers:
            runs = [tune(layer.space, cfg, measurer, trials=len(layer.space), seed=s, until=layer.target,
                         objective=objective) for s in range(seeds)]
            total += float(np.mean([r.trials_to(layer.target) or len(layer.space) for r in runs]))
        out[f"hgbr-{objective}"] = {"trials_to_98_sum": total}
    measurer.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="vta")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--sample", type=int, default=32)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--online-seeds", type=int, default=5, help="tuner runs per layer and objective")
    args = p.parse_args()
    cfg = resolve(args.config, args.set)
    measurer = Measurer(store=Store(), workers=2)
    target = AcceleratorTarget(cfg)
    specs = conv_specs(BENCH_EPILOGUE)[1:]
    spaces = [(n, build_space(Conv2d(s, target), cache=measurer.store)) for n, s in specs]
    layers = bench.exhaustive(cfg, measurer, spaces)
    measurer.close()
    names = ["hgbr-log", "hgbr-ratio"]
    try:
        import lightgbm  # noqa: F401

        names.append("lgbm-rank")
    except ImportError:
        print("lightgbm not installed: lgbm-rank skipped", file=sys.stderr)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for setting in ("online", "transfer"):
        for name in names:
            scores = []
            for k, layer in enumerate(layers):
                ok = np.isfinite(layer.cycles)
                x, c = layer.space.features[ok], layer.cycles[ok]
                for seed in range(args.seeds if setting == "online" else 1):
                    if setting == "online":
                        rng = np.random.default_rng(seed)
                        train = rng.permutation(len(c))[: args.sample]
                        test = np.setdiff1d(np.arange(len(c)), train)
                        fit = _predictor(name, x[train], c[train], np.zeros(len(train)), seed)
                    else:
                        others = [o for j, o in enumerate(layers) if j != k]
                        xs = np.vstack([o.space.features[np.isfinite(o.cycles)] for o in others])
                        cs = np.concatenate([o.cycles[np.isfinite(o.cycles)] for o in others])
                        gs = np.concatenate([np.full(int(np.isfinite(o.cycles).sum()), j)
                                             for j, o in enumerate(others)])
                        test = np.arange(len(c))
                        fit = _predictor(name, xs, cs, gs, seed)
                    scores.append(_score(fit(x[test]), c[test]))
            mean = {key: float(np.mean([s[key] for s in scores])) for key in scores[0]}
            out.setdefault(setting, {})[name] = mean
    out["tuning"] = _tuning(cfg, layers, args.online_seeds)  # type: ignore[assignment]
    print(json.dumps({"config": cfg.name, "params": {k: v for k, v in cfg.to_dict().items() if k != "name"},
                      "sample": args.sample, "results": out}))


if __name__ == "__main__":
    main()
