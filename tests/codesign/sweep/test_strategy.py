import pytest

from codesign.sweep.strategy import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    Failure,
    GridStrategy,
    RandomStrategy,
    make_strategy,
)
from hw.errors import InputError


def drain(strategy, n=5):
    asked = []
    while batch := strategy.ask(n):
        assert len(batch) <= n
        asked += batch
    return asked


def test_grid_asks_every_valid_combination_in_order(tiny_space):
    asked = drain(GridStrategy(tiny_space))
    valid = [tiny_space.point_at(i) for i in range(tiny_space.size)]
    assert [p.id for p in asked] == [p.id for p in valid if p is not None]
    assert len(asked) == 18  # infeasible ones too: the engine records those without evaluating them


def test_random_is_a_seeded_permutation_without_repeats(tiny_space):
    a, b, c = (drain(RandomStrategy(tiny_space, seed)) for seed in (1, 1, 2))
    assert [p.id for p in a] == [p.id for p in b] != [p.id for p in c]
    assert sorted(p.id for p in a) == sorted(p.id for p in drain(GridStrategy(tiny_space)))
    assert len({p.id for p in a}) == len(a)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_strategy_told_of_points_does_not_ask_them_again(tiny_space, name):
    everything = drain(make_strategy(name, tiny_space, 7))
    resumed = make_strategy(name, tiny_space, 7)
    for point in everything[:5]:
        resumed.tell(point, Failure("error", "boom"))
    assert [p.id for p in drain(resumed)] == [p.id for p in everything[5:]]


def test_an_unknown_strategy():
    message = r"unknown strategy 'nsga3' \(one of grid, random, nsga2, surrogate\)"
    with pytest.raises(InputError, match=message):
        make_strategy("nsga3", None, 0)


def test_the_default_is_a_known_strategy_and_known_metrics_reach_it(tiny_space):
    assert DEFAULT_STRATEGY in STRATEGIES
    strategy = make_strategy("surrogate", tiny_space, 0, known=lambda cfg: {"area_mm2": 1.0})
    assert strategy.known_metrics == ("area_mm2",)


@pytest.mark.parametrize("name", ["grid", "random", "nsga2", "surrogate"])
def test_every_strategy_takes_a_proxy_and_the_surrogate_uses_it(tiny_space, name):
    calls = []

    def proxy(cfg):
        calls.append(cfg)
        return {"latency_cycles": 1e6 / cfg.macs_per_cycle}

    strategy = make_strategy(name, tiny_space, 0, known=lambda cfg: {"area_mm2": 1.0}, proxy=proxy)
    assert len(strategy.ask(2)) == 2
    assert len(calls) == (len(tiny_space) if name == "surrogate" else 0)
