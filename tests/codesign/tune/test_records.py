"""The tuning records against the JSON the store and the log held when they were dicts: a line
written now is the line the old `log.record()` wrote (time aside), an old line reads back, and
a measurement round-trips through the store as the same stored JSON."""

import json

import pytest

from codesign.exec.store import Store
from codesign.tune import log
from codesign.tune.records import LoggedConfig, Measurement, TrialRecord
from compiler.tune.workload import Workload

from .conftest import TINY

EPILOGUE = {"bias": True, "multiplier": None, "shift": 8, "round": False, "clip": [0, 127],
            "channel_multiplier": False, "scaled_bias": False, "residual": None, "split": 0}
WORKLOAD = Workload("dense", {"m": 16, "k": 64, "n": 64, "epilogue": EPILOGUE})
KNOBS = {"tile_m": 2, "tile_k": 8, "tile_n": 2, "n_threads": 2, "m_threads": 4}
SCHEDULE = {"records": [{"kind": "split", "stage": "out", "axis": "m", "factor": 2}], "knobs": KNOBS}
STATS = {"cycles": 11359, "gemm_uops": 4096, "load_insns": 264}
OK = Measurement("ok", cycles=11359, stats=STATS, compile_s=0.07, run_s=11.2, instructions=826,
                 schedule=SCHEDULE)

# What the dict-building log.record() (before TrialRecord) wrote for OK, `time` aside: taken from
# a log that code wrote (`codesign tune op dense --m 16 --k 64 --n 64 --config tiny`), with the
# stats and schedule shortened.
OLD_LINE = {
    "version": 1, "time": 1795725409.9703565,
    "workload": {"op": "dense", "spec": {"m": 16, "k": 64, "n": 64, "epilogue": EPILOGUE}},
    "workload_key": "0e8f09afffc9fb9e",
    "config": {"name": "tiny", "fingerprint": "c1a1370746bbec81", "key": "15780a82ae962620",
               "params": {"name": "tiny", "batch": 1, "block_in": 4, "block_out": 4, "inp_bits": 8,
                          "wgt_bits": 8, "acc_bits": 32, "uop_bytes": 1024, "inp_bytes": 1024,
                          "wgt_bytes": 4096, "acc_bytes": 4096, "cmd_queue_depth": 16,
                          "token_counter_bits": 8, "bus_bits": 64, "max_burst_beats": 8, "mem_inflight": 4,
                          "dram_latency_cycles": 8, "dram_bytes_per_cycle": 8, "clock_mhz": 100.0}},
    "backend": "timing", "method": "random", "trial": 1, "knobs": KNOBS,
    "status": "ok", "error": None, "cycles": 11359, "stats": STATS, "correct": None,
    "compile_s": 0.07, "run_s": 11.2, "instructions": 826, "schedule": SCHEDULE, "cached": False,
}
# The old record() read a pool failure ({"status", "error"} only) with .get(): the rest None.
OLD_TIMEOUT = {**OLD_LINE, "method": "model", "trial": 2, "status": "timeout",
               "error": "no result within 2 s; the worker was killed", "cycles": None, "stats": None,
               "compile_s": None, "run_s": None, "instructions": None, "schedule": None}


def test_a_line_written_now_is_the_old_line_byte_for_byte_but_its_time(tmp_path):
    path = tmp_path / "log.jsonl"
    failed = Measurement.failed("timeout", "no result within 2 s; the worker was killed")
    written = [log.record(WORKLOAD, TINY, "timing", KNOBS, OK, method="random", trial=1, cached=False),
               log.record(WORKLOAD, TINY, "timing", KNOBS, failed, method="model", trial=2, cached=False)]
    log.append(path, written)
    lines = path.read_text().splitlines(keepends=True)
    expected = [OLD_LINE, OLD_TIMEOUT]
    assert len(lines) == 2
    for line, record, old in zip(lines, written, expected, strict=True):
        assert list(json.loads(line)) == list(old)  # the same keys in the same order
        assert line == json.dumps({**old, "time": record.time}) + "\n"
    assert log.read(path) == written


def test_an_old_line_reads_back_and_writes_out_unchanged(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(OLD_LINE) + "\n" + json.dumps(OLD_TIMEOUT) + "\n")
    ok, timeout = log.read(path)
    assert ok.to_json() == OLD_LINE and timeout.to_json() == OLD_TIMEOUT
    assert (ok.workload_key, ok.config.key, ok.method, ok.trial, ok.knobs) == \
        ("0e8f09afffc9fb9e", "15780a82ae962620", "random", 1, KNOBS)
    assert ok.measurement == OK and ok.status == "ok" and ok.cycles == 11359 and ok.cached is False
    assert timeout.status == "timeout" and timeout.cycles is None and "no result" in timeout.error
    assert log.best([ok, timeout], WORKLOAD, TINY) == ok
    assert log.best([ok, timeout], WORKLOAD, TINY.with_params(dram_latency_cycles=99)) is None


def test_a_minimal_line_reads_with_the_rest_none(tmp_path):
    path = tmp_path / "min.jsonl"
    path.write_text(json.dumps({"workload_key": "w", "config": {"key": "c"}, "knobs": {}, "status": "ok"}))
    (record,) = log.read(path)
    assert record == TrialRecord("w", LoggedConfig(key="c"), {}, Measurement("ok"))
    assert record.method is None and record.cycles is None and record.time is None


def test_a_config_that_is_not_an_object_is_not_a_tuning_record(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"workload_key": "w", "config": "tiny", "knobs": {}, "status": "ok"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl line 1: not a tuning record"):
        log.read(path)


def test_a_measurement_round_trips_through_the_store_as_the_same_json(tmp_path):
    store = Store(tmp_path / "cache.sqlite")
    failed = Measurement.failed("error", "RuntimeError: boom")
    store.put_measurements({"a": OK, "b": failed})
    assert store.get_measurements(["a", "b", "c"]) == {"a": OK, "b": failed}
    raw = dict(store.db.execute("SELECT key, value FROM measurements").fetchall())
    old_ok = {k: OLD_LINE[k] for k in ("status", "error", "cycles", "stats", "correct", "compile_s", "run_s",
                                        "instructions", "schedule")}
    assert raw["a"] == json.dumps(old_ok)  # what measure()'s dict was stored as
    assert Measurement.from_json(json.loads(raw["b"])) == failed
    store.close()


def test_an_old_stored_measurement_reads_back(tmp_path):
    store = Store(tmp_path / "cache.sqlite")
    old_failure = {"status": "error", "error": "RuntimeError: boom"}  # pool.failure(), as stored before
    old_ok = {k: OLD_LINE[k] for k in Measurement.__dataclass_fields__}
    store._put("measurements", [("f", json.dumps(old_failure)), ("o", json.dumps(old_ok))])
    found = store.get_measurements(["f", "o"])
    assert found["f"] == Measurement("error", error="RuntimeError: boom") and found["f"].finished
    assert found["o"] == OK and found["o"].to_json() == old_ok
    store.close()



@pytest.mark.parametrize("field, value, message", [
    ("cycles", "fast", r"field cycles is 'fast', not a non-negative integer"),
    ("cycles", -3, r"field cycles is -3, not a non-negative integer"),
    ("cycles", True, r"field cycles is True, not a non-negative integer"),
    ("run_s", float("nan"), r"field run_s is nan, not a finite number"),
    ("time", float("inf"), r"field time is inf, not a finite number"),
    ("knobs", {"tile": 2.5}, r"field knobs is \{'tile': 2.5\}, not an object of integer knobs"),
    ("knobs", [1], r"field knobs is \[1\], not an object of integer knobs"),
    ("status", 3, r"field status is 3, not a string"),
    ("workload_key", None, r"not a tuning record"),
    ("stats", "x", r"field stats is 'x', not an object"),
])
def test_malformed_fields_are_named_with_their_line(tmp_path, field, value, message):
    path = tmp_path / "bad.jsonl"
    line = {"workload_key": "w", "config": {"key": "c"}, "knobs": {}, "status": "ok", field: value}
    if value is None:
        del line[field]
    path.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=rf"bad.jsonl line 1: {message}"):
        log.read(path)
