import json
import sqlite3

import pytest

from codesign.cli import main
from codesign.sweep import pipeline

from ..sweep.conftest import TINY_SPACE, fake_evaluate


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fake(monkeypatch):
    """The real evaluation needs the evaluator and the PPA models: a fake stands in, and counts
    the spaces it is made for."""
    made = []

    def make_evaluate(space):
        made.append(space.name)
        return fake_evaluate

    monkeypatch.setattr(pipeline, "make_evaluate", make_evaluate)
    monkeypatch.setattr(pipeline, "make_area", lambda: lambda cfg: cfg.macs_per_cycle / 100)
    return made


@pytest.fixture
def space_file(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SPACE)
    return path


def test_sweep_json_summary(capsys, fake, space_file, tmp_path):
    store = tmp_path / "s.db"
    code, out, err = run(capsys, "sweep", str(space_file), "--store", str(store), "--strategy", "grid",
                         "--workers", "2", "--json")
    data = json.loads(out)
    assert code == 0 and fake == ["tiny-test"] and err == ""  # quiet under --json
    assert data["points_evaluated"] == 9 and data["infeasible"] == 9 and data["store"] == str(store)
    assert data["failures"] == {"error": 0, "timeout": 0, "crash": 0} and data["strategy"] == "grid"
    assert data["objectives"] == ["latency_cycles", "area_mm2"] and data["pareto"]
    ids = {row[0] for row in sqlite3.connect(store).execute("SELECT id FROM points WHERE status = 'ok'")}
    assert {p["id"] for p in data["pareto"]} <= ids


def test_sweep_key_value_lines_and_a_resume(capsys, fake, space_file, tmp_path):
    store = str(tmp_path / "s.db")
    code, out, err = run(capsys, "sweep", str(space_file), "--store", store, "--budget", "4",
                         "--workers", "0")
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert code == 0 and lines["points_evaluated"] == "4" and lines["strategy"] == "surrogate"
    assert lines["failures"] == "error 0, timeout 0, crash 0" and int(lines["pareto_points"]) >= 1
    assert lines["pareto[0]"].startswith("id=")
    assert "sweep: 4/4" in err  # the progress bar's line on a stderr that is not a terminal
    code, out, _ = run(capsys, "sweep", str(space_file), "--store", store, "--resume", "--workers", "0",
                       "--json")
    assert code == 0 and json.loads(out)["points_evaluated"] == 9 and json.loads(out)["evaluated_now"] == 5


def test_a_packaged_space_by_name_with_its_area_model(capsys, fake, tmp_path):
    code, out, _ = run(capsys, "sweep", "small", "--store", str(tmp_path / "s.db"), "--budget", "3",
                       "--workers", "0", "--seed", "2", "--json")
    assert code == 0 and fake == ["small"] and json.loads(out)["points_evaluated"] == 3


def test_the_area_model_is_asked_for_only_by_spaces_with_an_area_budget_or_objective(capsys, fake,
                                                                                     monkeypatch, tmp_path):
    def no_area():
        raise AssertionError("the area model was not needed")

    monkeypatch.setattr(pipeline, "make_area", no_area)
    path = tmp_path / "area.toml"
    latency_only = TINY_SPACE.replace('objectives = ["latency", "area"]', 'objectives = ["latency"]')
    path.write_text(latency_only)
    argv = ["--budget", "1", "--workers", "0", "--json"]
    assert run(capsys, "sweep", str(path), "--store", str(tmp_path / "a.db"), *argv)[0] == 0
    path.write_text(latency_only.replace("[constraints]", "[constraints]\nmax_area_mm2 = 1.0"))
    with pytest.raises(AssertionError, match="the area model was not needed"):
        main(["sweep", str(path), "--store", str(tmp_path / "b.db"), "--workers", "0"])
    path.write_text(TINY_SPACE)  # area is an objective: the surrogate takes it exactly from the model
    with pytest.raises(AssertionError, match="the area model was not needed"):
        main(["sweep", str(path), "--store", str(tmp_path / "c.db"), "--workers", "0"])


def bad_store(tmp_path):
    path = tmp_path / "junk.db"
    path.write_text("not sqlite")
    return str(path)


BAD = [
    (lambda t, s: ["sweep", str(t / "nope.toml"), "--store", str(t / "s.db")],
     r"space '.*nope.toml' is neither a file nor a packaged space \(realistic, small\)"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--budget", "0"],
     r"--budget must be at least 1, not 0"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--workers", "-2"],
     r"--workers must be at least 0, not -2"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--timeout", "0"],
     r"--timeout must be positive, not 0"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--confirm", "-1"],
     r"--confirm must be 0 or more, not -1"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--confirm", "1", "--confirm-timeout", "0"],
     r"--confirm-timeout must be positive, not 0"),
    (lambda t, s: ["sweep", s, "--store", bad_store(t)],
     r"junk.db: not an SQLite file, so not a sweep store"),
    (lambda t, s: ["sweep", s, "--store", str(t / "no" / "s.db")],
     r"s.db: cannot open the store \(unable to open database file\)"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--executor", "ray"],
     r"--executor must be local, dask or dask://HOST:PORT, not 'ray'"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--executor", "dask://127.0.0.1:1"],
     r"cannot reach the Dask scheduler at tcp://127.0.0.1:1 \(Connection refused\)"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--executor", "dask://127.0.0.1:1",
                   "--security", str(t / "none.toml")],
     r"--security .*none.toml: no such file"),
    (lambda t, s: ["sweep", s, "--store", str(t / "s.db"), "--executor", "dask", "--workers", "0"],
     r"--executor dask needs --workers 1 or more, not 0"),
]


@pytest.mark.parametrize(("argv", "message"), BAD)
def test_bad_input_is_one_line_with_status_2(capsys, fake, space_file, tmp_path, argv, message):
    code, out, err = run(capsys, *argv(tmp_path, str(space_file)))
    assert code == 2 and out == "" and fake == []  # refused before the workloads are prepared
    assert err.count("\n") == 1 and err.startswith("codesign sweep: error: ")
    assert __import__("re").search(message, err)


def test_bad_spaces_and_stores_in_use(capsys, fake, space_file, tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text(TINY_SPACE.replace("block_in = [4, 8, 16]", "block_in = [4, 8, 12]"))
    code, _, err = run(capsys, "sweep", str(broken), "--store", str(tmp_path / "s.db"))
    assert code == 2 and "params.block_in: 12 is not valid: block_in must be a power of two, not 12" in err
    store = str(tmp_path / "s.db")
    assert run(capsys, "sweep", str(space_file), "--store", store, "--budget", "2", "--workers", "0")[0] == 0
    code, _, err = run(capsys, "sweep", str(space_file), "--store", store)
    # 2 evaluated (the default strategy asks no infeasible point)
    assert code == 2 and "the store already holds 2 points of this sweep; pass --resume" in err
    code, _, err = run(capsys, "sweep", str(space_file), "--store", store, "--resume", "--seed", "9")
    assert code == 2 and "resume it with those, not strategy surrogate and seed 9" in err
    code, _, err = run(capsys, "sweep", "small", "--store", store, "--resume")
    assert code == 2 and "the store holds a sweep of another space ('tiny-test'" in err
    assert fake == ["tiny-test"]


def test_an_unknown_strategy_is_refused_by_the_parser(capsys, space_file, tmp_path):
    with pytest.raises(SystemExit) as info:
        main(["sweep", str(space_file), "--store", str(tmp_path / "s.db"), "--strategy", "nsga9"])
    assert info.value.code == 2 and "invalid choice: 'nsga9'" in capsys.readouterr().err


class ConfirmingFake:
    """The fake evaluation with a confirmation that passes, as the real one's `confirm` reports."""

    def __call__(self, point):
        return fake_evaluate(point)

    def confirm(self, point, swept):
        cycles = int(swept.metrics["latency_cycles"])
        return [{"point_id": point.id, "workload": "mlp", "ok": True, "fsim_exact": True, "rtl_exact": True,
                 "timing_cycles": cycles, "rtl_cycles": cycles}]


def test_confirm_runs_the_best_designs_and_reports_them(capsys, fake, monkeypatch, space_file, tmp_path):
    monkeypatch.setattr(pipeline, "make_evaluate", lambda space: ConfirmingFake())
    store = str(tmp_path / "s.db")
    code, out, _ = run(capsys, "sweep", str(space_file), "--store", store, "--strategy", "grid",
                       "--workers", "0", "--confirm", "2", "--json")
    data = json.loads(out)
    assert code == 0 and len(data["confirmed"]) == 2 and all(c["ok"] for c in data["confirmed"])
    best = sorted(data["pareto"], key=lambda p: p["latency_cycles"])[:2]
    assert [c["point_id"] for c in data["confirmed"]] == [p["id"] for p in best]
