"""codesign/exec/store.py: the tuning cache survives a damaged file, damaged rows and races."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from codesign.exec.store import Store
from codesign.tune.records import Measurement
from hw.cache import CacheError


@pytest.mark.parametrize("damage", [b"", b"garbage, not SQLite" * 100, b"SQLite format 3\0" + b"\xff" * 50])
def test_a_damaged_store_file_is_set_aside_and_started_afresh(tmp_path, damage):
    path = tmp_path / "tune" / "cache.sqlite"
    store = Store(path)
    store.put_measurements({"k": Measurement("ok", cycles=5)})
    store.close()
    path.write_bytes(damage)
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    fresh = Store(path)
    assert fresh.get_measurements(["k"]) == {} or damage == b""
    fresh.put_measurements({"j": Measurement("ok", cycles=7)})
    assert fresh.get_measurements(["j"])["j"].cycles == 7
    fresh.close()
    if damage:
        assert (tmp_path / "tune" / "cache.sqlite.damaged").read_bytes() == damage


def test_damaged_rows_count_as_absent(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    store.put_measurements({"a": Measurement("ok", cycles=1), "b": Measurement("ok", cycles=2)})
    with store.db:
        store.db.execute("UPDATE measurements SET value = ? WHERE key = 'b'", ('{"cycles": ',))
        store.db.execute("INSERT INTO features (key, value) VALUES (?, ?)", ("x", "[1, "))
    assert set(store.get_measurements(["a", "b"])) == {"a"}
    store.close()


def test_an_unwritable_store_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CacheError, match=rf"^tuning cache {blocker}/tune/cache.sqlite cannot be opened "
                                         r"\(.*\); set CODESIGN_CACHE to a writable directory$"):
        Store(blocker / "tune" / "cache.sqlite")


def _open_and_write(path: str, key: str, barrier) -> int:
    barrier.wait(timeout=60)
    store = Store(Path(path))
    store.put_measurements({key: Measurement("ok", cycles=len(key))})
    found = len(store.get_measurements([key]))
    store.close()
    return found


def test_two_processes_recovering_one_damaged_store_both_succeed(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"not a database" * 64)
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(2) as pool:
        barrier = manager.Barrier(2)
        jobs = [pool.apply_async(_open_and_write, (str(path), key, barrier)) for key in ("a", "bb")]
        assert [job.get(timeout=120) for job in jobs] == [1, 1]
    db = sqlite3.connect(path)
    assert sorted(k for (k,) in db.execute("SELECT key FROM measurements")) == ["a", "bb"]
    db.close()
