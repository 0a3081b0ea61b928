import json

import pytest

from codesign.bench import sweep_search as bench
from codesign.cli import main
from codesign.sweep import synthetic
from codesign.sweep.engine import run_sweep
from codesign.sweep.space import space_from_text
from hw.errors import InputError

from ..sweep.conftest import TINY_SPACE

THREE = TINY_SPACE.replace('objectives = ["latency", "area"]', 'objectives = ["latency", "area", "energy"]')


@pytest.fixture
def space(tmp_path):
    return space_from_text(THREE, path=tmp_path / "three.toml")


@pytest.fixture
def store(tmp_path, space):
    """An exhaustive sweep of the 9 feasible points, evaluated by the synthetic stand-in."""
    path = tmp_path / "all.db"
    run_sweep(space, path, synthetic.evaluate, strategy="grid", workers=0)
    return path


def test_a_stores_table_is_the_synthetic_table(store, space):
    table = bench.read_table(store)
    made = bench.synthetic_table(space)
    assert table.feasible == made.feasible == 9 and table.known_metrics == made.known_metrics == ("area_mm2",)
    metrics = {i: o.metrics for i, o in table.outcomes.items()}
    assert metrics == {i: o.metrics for i, o in made.outcomes.items()}
    point = next(iter(space))
    assert table.known()(point.config) == {"area_mm2": synthetic.area_mm2(point.config)}


def test_a_replay_ends_at_the_whole_front(space):
    table = bench.synthetic_table(space)
    run = bench.replay(table, "grid", 0, stop_at=1.0)
    assert run.fractions[-1] == pytest.approx(1.0) and len(run.fractions) <= 9
    assert list(run.fractions) == sorted(run.fractions) and run.reached(1.0 - 1e-12) == len(run.fractions)


def test_the_summary_compares_each_strategy_with_random(space):
    result = bench.run(bench.synthetic_table(space), strategies=["random", "surrogate"], seeds=2,
                       budget_fraction=0.5)
    data = json.loads(json.dumps(result.to_json()))
    assert data["feasible_points"] == 9 and data["seeds"] == 2 and data["known_metrics"] == ["area_mm2"]
    rand, model = data["strategies"]["random"], data["strategies"]["surrogate"]
    assert rand["ratio_to_random"] == 1.0
    ratio = model["mean_evaluations_to_98"] / rand["mean_evaluations_to_98"]
    assert model["ratio_to_random"] == pytest.approx(ratio)
    assert all(1 <= n <= 9 for n in model["evaluations_to_98"])
    must = data["must_show_3"]
    assert must["default"] == "surrogate" and must["budget"] == 4.5
    assert must["holds"] == (model["mean_evaluations_to_98"] <= 4.5 and model["ratio_to_random"] <= 0.5)
    assert "must-show 3 (surrogate)" in bench.table_text(result)


def test_a_store_that_is_not_exhaustive(tmp_path, space):
    path = tmp_path / "part.db"
    run_sweep(space, path, synthetic.evaluate, strategy="grid", budget=4, workers=0)
    with pytest.raises(InputError, match=r"part.db: not an exhaustive sweep \(5 of 9 feasible points were"):
        bench.read_table(path)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seeds": 0}, "--seeds must be at least 1, not 0"),
    ({"budget_fraction": 0.0}, r"--budget-fraction must be in \(0, 1\], not 0.0"),
    ({"strategies": ["annealing"]}, "unknown strategy 'annealing'"),
])
def test_bad_options(space, kwargs, message):
    with pytest.raises(InputError, match=message):
        bench.run(bench.synthetic_table(space), **kwargs)


def test_a_table_without_results(space):
    empty = bench.Table(space, {}, "empty.db")
    with pytest.raises(InputError, match="empty.db: the table has no evaluated point with the space's"):
        bench.run(empty)


def test_the_command(capsys, store):
    code = main(["bench", "sweep-search", "--table", str(store), "--seeds", "1",
                 "--strategies", "random,nsga2", "--no-proxy", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and set(data["strategies"]) == {"random", "nsga2"} and "must_show_3" not in data
    assert data["proxy"] is False and data["proxy_s_per_point"] is None
    assert main(["bench", "sweep-search", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "sweep-search needs one table: --table STORE.db or --synthetic [SPACE]" in err
    assert err.count("\n") == 1


def test_a_table_with_proxies_gives_them_to_the_strategies(space):
    table = bench.synthetic_table(space).with_proxies()
    assert set(table.proxies) == set(table.outcomes) and table.proxy_s > 0
    point = next(iter(space))
    assert table.proxy()(point.config) == synthetic.proxy_metrics(point.config)
    assert bench.synthetic_table(space).proxy() is None
    data = bench.run(table, strategies=["random", "surrogate"], seeds=1).to_json()
    assert data["proxy"] is True and data["proxy_s_per_point"] == pytest.approx(table.proxy_s / len(space))
