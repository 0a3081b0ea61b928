import random

import numpy as np
import pytest

from codesign.sweep import surrogate, synthetic
from codesign.sweep.pareto import non_dominated
from codesign.sweep.space import load_space, resolve_space_path
from codesign.sweep.strategy import Failure, RandomStrategy
from codesign.sweep.surrogate import SurrogateStrategy, features, maximin_order
from hw.errors import InputError

from .strategy_helpers import hv_fraction, run


@pytest.fixture(scope="module")
def small():
    return load_space(resolve_space_path("small"))


def known_area(cfg):
    return {"area_mm2": synthetic.area_mm2(cfg)}


def test_every_feasible_point_once_then_nothing(tiny_space):
    strategy = SurrogateStrategy(tiny_space, 0, initial=3)
    asked, values = run(strategy, tiny_space, 100)
    assert len({p.id for p in asked}) == len(asked) == len(values) == len(tiny_space)
    assert strategy.ask(4) == []


def test_one_seed_one_search_and_another_seed_another(small):
    first, again, other = (run(SurrogateStrategy(small, seed, known=known_area), small, 16)[0]
                           for seed in (1, 1, 2))
    assert [p.id for p in first] == [p.id for p in again] != [p.id for p in other]


def test_a_strategy_rebuilt_from_its_tells_asks_what_it_would_have(small):
    fail = lambda p: p.config.block_in == 16 and p.config.acc_bytes == 32768
    going = SurrogateStrategy(small, 4, known=known_area)
    asked, _ = run(going, small, 14, fail=fail)
    rebuilt = SurrogateStrategy(small, 4, known=known_area)
    for point in asked:
        rebuilt.tell(point, Failure("error", "injected") if fail(point) else synthetic.evaluate(point))
    assert [p.id for p in rebuilt.ask(16)] == [p.id for p in going.ask(16)]


def test_failed_points_train_nothing_and_are_never_asked_again(small):
    fail = lambda p: p.config.block_out == 32
    strategy = SurrogateStrategy(small, 0, known=known_area)
    asked, values = run(strategy, small, 30, fail=fail)
    assert len({p.id for p in asked}) == len(asked) == 30 and sum(v is None for v in values) >= 1
    assert all(not fail(p) for p in asked if p.id in strategy.results)


def test_known_metrics_are_used_exactly_not_predicted(small):
    calls = []

    def known(cfg):
        calls.append(cfg)
        return known_area(cfg)

    strategy = SurrogateStrategy(small, 0, known=known)
    assert strategy.known_metrics == ("area_mm2",) and strategy.predicted == ("latency_cycles", "energy_uj")
    run(strategy, small, 12)
    assert len(calls) == len(small) + 1  # every candidate once, and the probe of the base config
    without = SurrogateStrategy(small, 0)
    assert without.known_metrics == () and without.predicted == small.metrics


def test_the_surrogate_beats_random_search_at_a_tenth_of_the_space(small):
    budget = len(small) // 10
    model = [hv_fraction(small, run(SurrogateStrategy(small, s, known=known_area), small, budget)[1])
             for s in range(3)]
    rand = [hv_fraction(small, run(RandomStrategy(small, s), small, budget)[1]) for s in range(3)]
    assert np.mean(model) > np.mean(rand) + 0.05 and min(model) > 0.9


def test_features_are_log2_of_the_parameters_macs_and_sram(small):
    point = next(iter(small))
    row = features([point.config], small)[0]
    cfg = point.config
    assert list(row[:5]) == [np.log2(getattr(cfg, d.name)) for d in small.dimensions]
    assert row[5] == np.log2(cfg.macs_per_cycle)
    assert row[6] == np.log2(cfg.uop_bytes + cfg.inp_bytes + cfg.wgt_bytes + cfg.acc_bytes + cfg.out_bytes)


def test_maximin_spreads_and_continues_an_order():
    x = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5], [0.0, 1.0], [0.1, 0.0]])
    order = maximin_order(x, 3, random.Random(0), [0])
    assert order == [0, 1, 3]
    assert maximin_order(x, 5, random.Random(0), order) == [0, 1, 3, 2, 4]
    assert maximin_order(x[:0], 3, random.Random(0)) == []


def test_a_batch_below_one():
    with pytest.raises(InputError, match="surrogate: batch must be at least 1, not 0"):
        SurrogateStrategy(None, 0, batch=0)


def test_four_objectives_are_searched_by_a_proxy(tmp_path):
    from codesign.sweep.space import space_from_text

    from .conftest import TINY_SPACE

    text = TINY_SPACE.replace('["latency", "area"]', '["latency", "area", "energy", "edp"]')
    space = space_from_text(text, path=tmp_path / "four.toml")
    asked, values = run(SurrogateStrategy(space, 0, initial=3), space, 6)
    assert len({p.id for p in asked}) == len(values) == 6


def test_with_a_proxy_the_front_is_found_within_a_tenth_of_the_space(small):
    budget = len(small) // 10
    with_proxy = [hv_fraction(small, run(SurrogateStrategy(small, s, known=known_area,
                                                           proxy=synthetic.proxy_metrics), small, budget)[1])
                  for s in range(2)]
    without = hv_fraction(small, run(SurrogateStrategy(small, 0, known=known_area), small, budget)[1])
    assert min(with_proxy) >= 0.98 and min(with_proxy) > without


def test_the_proxys_front_runs_first_in_one_batch(small):
    strategy = SurrogateStrategy(small, 0, known=known_area, proxy=synthetic.proxy_metrics)
    first = strategy.ask(16)
    assert strategy.proxied == ("latency_cycles", "energy_uj") and len(first) == 16
    # Each pick is on the front the proxy predicts for the points (known area exact).
    every = list(small)
    estimate = np.log([[synthetic.area_mm2(p.config), synthetic.proxy_metrics(p.config)["latency_cycles"],
                        synthetic.proxy_metrics(p.config)["energy_uj"]] for p in every])
    front = {p.id for p, keep in zip(every, non_dominated(estimate), strict=True) if keep}
    assert {p.id for p in first} <= front


def test_a_proxy_strategy_rebuilt_from_its_tells_asks_what_it_would_have(small):
    make = lambda: SurrogateStrategy(small, 3, known=known_area, proxy=synthetic.proxy_metrics)
    going = make()
    asked, _ = run(going, small, 30)
    rebuilt = make()
    for point in reversed(asked):  # the order of tells does not matter
        rebuilt.tell(point, synthetic.evaluate(point))
    assert [p.id for p in rebuilt.ask(16)] == [p.id for p in going.ask(16)]


def test_a_proxy_of_some_metrics_is_a_feature_only_and_above_the_limit_none(small, monkeypatch):
    calls = []

    def latency_only(cfg):
        calls.append(cfg)
        return {"latency_cycles": synthetic.proxy_metrics(cfg)["latency_cycles"]}

    partial = SurrogateStrategy(small, 0, known=known_area, proxy=latency_only)
    asked, values = run(partial, small, 12)
    assert partial.proxied == ("latency_cycles",) and not partial._proxy_design()
    assert len(calls) == len(small) and len({p.id for p in asked}) == len(values) == 12
    monkeypatch.setattr(surrogate, "PROXY_LIMIT", len(small) - 1)
    calls.clear()
    limited = SurrogateStrategy(small, 0, known=known_area, proxy=latency_only)
    plain = SurrogateStrategy(small, 0, known=known_area)
    assert [p.id for p in limited.ask(8)] == [p.id for p in plain.ask(8)] and calls == []


def test_a_proxy_that_fails_on_a_candidate_is_not_used(small):
    from hw.errors import WorkbenchError

    def failing(cfg):
        if cfg.block_in == 32 and cfg.acc_bytes == 131072:
            raise WorkbenchError("no estimate")
        return synthetic.proxy_metrics(cfg)

    broken = SurrogateStrategy(small, 0, known=known_area, proxy=failing)
    plain = SurrogateStrategy(small, 0, known=known_area)
    assert [p.id for p in broken.ask(8)] == [p.id for p in plain.ask(8)] and broken.proxied == ()
