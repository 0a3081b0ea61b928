import sqlite3

import pytest

from codesign.sweep.space import space_from_text
from codesign.sweep.store import SCHEMA_VERSION, StoreError, SweepStore

from .conftest import TINY_SPACE, fake_evaluate


def open_store(path, space, **kw):
    return SweepStore.open(path, space, **{"strategy": "grid", "seed": 0, "resume": False, **kw})


def test_a_store_keeps_the_space_settings_and_every_point(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    points = list(tiny_space)
    with open_store(path, tiny_space) as store:
        store.record(points[0], "ok", result=fake_evaluate(points[0]), wall_s=0.5)
        store.record(points[1], "timeout", reason="no result within 1 s", wall_s=1.0)
        store.record(points[2], "crash", reason="the worker died (exit code -11)", attempts=2)
    with SweepStore.read(path) as store:
        meta = store.meta()
        assert meta["space_toml"] == TINY_SPACE and meta["space_digest"] == tiny_space.digest
        assert (meta["strategy"], meta["seed"], meta["schema_version"]) == ("grid", "0", str(SCHEMA_VERSION))
        rows = store.points()
        assert [r.id for r in rows] == [p.id for p in points[:3]] and [r.seq for r in rows] == [0, 1, 2]
        assert rows[0].result == fake_evaluate(points[0]) and rows[0].wall_s == 0.5
        assert rows[0].config == points[0].config.to_dict()
        assert (rows[1].status, rows[1].reason, rows[1].result) == ("timeout", "no result within 1 s", None)
        assert (rows[2].status, rows[2].attempts) == ("crash", 2)
        assert store.counts() == {"ok": 1, "infeasible": 0, "error": 0, "timeout": 1, "crash": 1}
        assert store.ids() == {p.id for p in points[:3]}
    db = sqlite3.connect(path)
    latency, area = db.execute("SELECT latency_cycles, area_mm2 FROM points WHERE status = 'ok'").fetchone()
    metrics = fake_evaluate(points[0]).metrics
    assert (latency, area) == (metrics["latency_cycles"], metrics["area_mm2"])
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_rows_are_committed_in_batches(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    store = SweepStore.open(path, tiny_space, strategy="grid", seed=0, resume=False, commit_s=3600)
    point = next(iter(tiny_space))
    store.record(point, "error", reason="boom")
    reader = sqlite3.connect(path)
    assert reader.execute("SELECT count(*) FROM points").fetchone()[0] == 0  # not yet committed
    store.flush()
    assert reader.execute("SELECT count(*) FROM points").fetchone()[0] == 1
    store.close()


def test_resuming_needs_the_flag_and_the_same_settings(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    with open_store(path, tiny_space) as store:
        store.record(next(iter(tiny_space)), "error", reason="boom")
    with pytest.raises(StoreError, match=r"s.db: the store already holds 1 points of this sweep; pass --res"):
        open_store(path, tiny_space)
    message = r"s.db: the sweep was started with strategy grid and seed 0; resume it with those, not "
    with pytest.raises(StoreError, match=message + "strategy random and seed 3"):
        open_store(path, tiny_space, strategy="random", seed=3, resume=True)
    with open_store(path, tiny_space, resume=True) as store:
        assert store.next_seq == 1 and len(store.points()) == 1


def test_an_empty_store_takes_new_settings(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    open_store(path, tiny_space).close()
    with open_store(path, tiny_space, strategy="random", seed=4) as store:
        assert (store.meta()["strategy"], store.meta()["seed"]) == ("random", "4")


def test_a_store_of_another_space_is_refused(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    open_store(path, tiny_space).close()
    other = space_from_text(TINY_SPACE.replace("[4, 8, 16]", "[4, 8]", 1), path=tmp_path / "other.toml")
    message = (rf"s.db: the store holds a sweep of another space \('tiny-test', digest {tiny_space.digest}\),"
               rf" not of 'tiny-test' \(digest {other.digest}\); use another --store")
    with pytest.raises(StoreError, match=message):
        open_store(path, other, resume=True)


def test_files_that_are_not_sweep_stores(tmp_path, tiny_space):
    text = tmp_path / "notes.db"
    text.write_text("hello, not a database at all\n")
    with pytest.raises(StoreError, match=r"notes.db: not an SQLite file, so not a sweep store"):
        open_store(text, tiny_space)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE things (x)")
    with pytest.raises(StoreError, match=r"other.db: not a sweep store \(it has no table 'meta'\)"):
        open_store(other, tiny_space)
    assert sqlite3.connect(other).execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # left as it was
    newer = tmp_path / "newer.db"
    open_store(newer, tiny_space).close()
    with sqlite3.connect(newer) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    message = (r"newer.db: the store's schema version 99 is newer than this workbench's "
               rf"\({SCHEMA_VERSION}\); open it with a newer workbench")
    with pytest.raises(StoreError, match=message):
        open_store(newer, tiny_space, resume=True)
    with pytest.raises(StoreError, match=r"missing.db: no such store"):
        SweepStore.read(tmp_path / "missing.db")
    with pytest.raises(StoreError, match=r"s.db: cannot open the store \(unable to open database file\)"):
        open_store(tmp_path / "no" / "such" / "s.db", tiny_space)


def test_a_bad_status_is_a_bug(tmp_path, tiny_space):
    with open_store(tmp_path / "s.db", tiny_space) as store, pytest.raises(ValueError, match="status must"):
        store.record(next(iter(tiny_space)), "lost")
