import numpy as np
import pytest

from codesign.sweep.nsga2 import Individual, Nsga2Strategy, rank_and_crowding, survivors
from codesign.sweep.space import load_space, resolve_space_path, space_from_text
from codesign.sweep.strategy import Failure
from hw.errors import InputError

from .strategy_helpers import hv_fraction, run

# 4 x 4 x 5 x 5 x 5 combinations, about 1500 feasible: large enough for a search to matter.
MID_SPACE = '''
name = "mid-test"
base = "vta"
objectives = ["latency", "area", "energy"]
[params]
block_in = [8, 16, 32, 64]
block_out = [8, 16, 32, 64]
inp_bytes = { min = "8KiB", max = "128KiB" }
wgt_bytes = { min = "32KiB", max = "512KiB" }
acc_bytes = { min = "16KiB", max = "256KiB" }
[constraints]
max_sram_bytes = "768KiB"
[[workloads]]
model = "resnet18"
'''


@pytest.fixture(scope="module")
def small():
    return load_space(resolve_space_path("small"))


def test_every_point_once_and_only_feasible_ones(small):
    asked, values = run(Nsga2Strategy(small, 3, population=12), small, len(small) + 10)
    ids = [p.id for p in asked]
    assert len(ids) == len(set(ids)) == len(small) == len(values)  # then it ran out
    assert all(small.violation(p) is None for p in asked)


def test_one_seed_one_search_and_another_seed_another(small):
    first, again, other = (run(Nsga2Strategy(small, seed), small, 60)[0] for seed in (1, 1, 2))
    assert [p.id for p in first] == [p.id for p in again] != [p.id for p in other]


@pytest.mark.parametrize("evaluations", [20, 30, 64])  # a generation's end, mid-generation, later
def test_a_strategy_rebuilt_from_its_tells_asks_what_it_would_have(small, evaluations):
    going = Nsga2Strategy(small, 5)
    fail = lambda p: p.config.block_in == 16 and p.config.inp_bytes == 8192
    asked, _ = run(going, small, evaluations, fail=fail)
    rebuilt = Nsga2Strategy(small, 5)
    for point in asked:  # the same outcomes, told in the same order
        outcome = Failure("error", "injected") if fail(point) else None
        rebuilt.tell(point, outcome or _result(point))
    assert rebuilt.generation == going.generation == evaluations // 20
    assert [p.id for p in rebuilt.ask(16)] == [p.id for p in going.ask(16)]


def _result(point):
    from codesign.sweep import synthetic
    return synthetic.evaluate(point)


def test_failed_points_are_never_asked_again_and_do_not_survive(small):
    fail = lambda p: p.config.block_out == 32
    strategy = Nsga2Strategy(small, 0)
    asked, _ = run(strategy, small, 120, fail=fail)
    assert len({p.id for p in asked}) == len(asked) == 120
    assert sum(fail(p) for p in asked) >= 10
    assert all(x.values is not None for x in strategy.parents)  # failures do not survive


def test_ranks_crowding_and_survivors_by_hand():
    pool = [Individual("a", (0,), (1.0, 4.0)), Individual("b", (1,), (2.0, 2.0)),
            Individual("c", (2,), (4.0, 1.0)), Individual("d", (3,), (3.0, 3.0)), Individual("e", (4,), None)]
    ranks, crowding = rank_and_crowding(pool)
    assert ranks == [0, 0, 0, 1, 2]
    assert crowding[0] == crowding[2] == np.inf
    assert crowding[1] == pytest.approx((4 - 1) / 3 + (4 - 1) / 3)
    assert [x.id for x in survivors(pool, 4)] == ["a", "c", "b", "d"]
    assert [x.id for x in survivors(pool, 2)] == ["a", "c"]


@pytest.mark.slow
def test_nsga2_beats_random_search_at_a_fixed_budget():
    from codesign.sweep.strategy import RandomStrategy

    space = space_from_text(MID_SPACE, path="mid.toml")
    nsga2 = [hv_fraction(space, run(Nsga2Strategy(space, seed), space, 200)[1]) for seed in range(5)]
    rand = [hv_fraction(space, run(RandomStrategy(space, seed), space, 200)[1]) for seed in range(5)]
    assert np.mean(nsga2) > np.mean(rand) + 0.01


def test_a_population_below_two():
    with pytest.raises(InputError, match="nsga2: population must be at least 2, not 1"):
        Nsga2Strategy(None, 0, population=1)
