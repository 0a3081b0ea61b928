"""sim.trace: activity records and their Chrome/Perfetto trace-event JSON."""

from __future__ import annotations

import json

import numpy as np

from sim.trace import QUEUES, TRACKS, Activity, Interval, insn_label, runs, split_at_starts, token_steps


def test_runs_of_true():
    mask = np.array([0, 1, 1, 0, 1, 0, 0, 1], dtype=bool)
    assert runs(mask) == [(1, 3), (4, 5), (7, 8)]
    assert runs(mask, offset=10) == [(11, 13), (14, 15), (17, 18)]
    assert runs(np.zeros(4, dtype=bool)) == []


def test_busy_runs_are_cut_at_instruction_starts():
    pieces = split_at_starts([(2, 9), (12, 14)], [2, 5, 12], ["a", "b", "c"])
    assert pieces == [Interval(2, 5, "a"), Interval(5, 9, "b"), Interval(12, 14, "c")]
    assert split_at_starts([(0, 3)], [1], ["x"]) == [Interval(0, 1, ""), Interval(1, 3, "x")]


def test_token_steps_sum_changes_per_cycle():
    steps = token_steps({"l2c": [(5, +1), (7, -1), (7, +1), (9, -1)]})
    assert steps["l2c"] == [(0, 0), (5, 1), (9, 0)]  # the pop and push of cycle 7 cancel
    assert steps["c2l"] == [(0, 0)]


def test_labels():
    assert insn_label(12, 0, 1) == "#12 LOAD WGT"
    assert insn_label(3, 0, 3, x_size=0) == "#3 NOP"
    assert insn_label(5, 2, reset=True) == "#5 GEMM reset" and insn_label(9, 3) == "#9 FINISH"


def test_chrome_trace_has_a_track_per_module_and_channel(tmp_path):
    act = Activity("timing", 100)
    act.tracks["load"] = [Interval(0, 10, "#0 LOAD INP"), Interval(10, 30, "#1 LOAD WGT")]
    act.tracks["dram read"] = [Interval(3, 20, "read")]
    act.tokens["l2c"] = [(0, 0), (31, 1)]
    assert act.busy_cycles("load") == 30
    path = tmp_path / "t.json"
    act.write(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = [e["args"]["name"] for e in events if e["name"] == "thread_name"]
    assert names == list(TRACKS) and len(names) == 11
    slices = [e for e in events if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in slices[:2]] == [("#0 LOAD INP", 0.0, 0.01),
                                                                     ("#1 LOAD WGT", 0.01, 0.02)]
    counters = [e for e in events if e["ph"] == "C"]
    assert [(e["name"], e["ts"], e["args"]) for e in counters] == [
        ("tokens l2c", 0.0, {"tokens": 0}), ("tokens l2c", 0.031, {"tokens": 1})]
    assert set(QUEUES) == set(act.tokens)
    assert trace["otherData"]["cycles"] == 100 and trace["displayTimeUnit"] == "ns"
