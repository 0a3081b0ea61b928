"""The refusals the fuzzers' fixes added that no corpus file reaches, each matched."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from codesign.fuzz import sweeps, tuning_logs
from codesign.sweep.space import space_from_text
from codesign.sweep.store import StoreError, SweepStore
from compiler.tune.cpu import read_log
from hw.errors import InputError


def test_a_cpu_log_whose_convolutions_are_no_list_is_refused(tmp_path: Path) -> None:
    record = json.loads(tuning_logs._cpu_log())
    record["convolutions"] = {"key": "x"}
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(record))
    with pytest.raises(InputError, match=r"tuning log \S+cpu.json: convolutions is not a list$"):
        read_log(path, tuning_logs.CPU)


def test_a_meta_value_with_a_newline_is_quoted_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(sweeps._store())
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'a\nb' WHERE key = 'space_digest'")
    db.commit()
    db.close()
    space = space_from_text(sweeps.TINY_SPACE, path=tmp_path / "tiny.toml")
    with pytest.raises(StoreError, match=r"another space \('tiny-fuzz', digest 'a\\nb'\)") as info:
        SweepStore.open(path, space, strategy="grid", seed=0, resume=True)
    assert "\n" not in str(info.value)


def test_a_cache_damaged_past_its_header_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    from codesign.exec.store import Store
    from codesign.tune.records import Measurement

    path = tmp_path / "cache.sqlite"
    path.write_bytes(tuning_logs._cache())
    db = sqlite3.connect(path)
    db.execute("DROP TABLE measurements")
    db.execute("CREATE TABLE measurements (other)")  # opens, fails when read
    db.commit()
    db.close()
    store = Store(path)
    assert store.get_measurements(["m1"]) == {}
    store.put_measurements({"m1": Measurement("ok", cycles=5)})
    assert store.get_measurements(["m1"]) == {"m1": Measurement("ok", cycles=5)}
    store.close()
    assert (tmp_path / "cache.sqlite.damaged").is_file()
