"""The reports of `codesign tune op|model` print the JSON the commands printed as dicts."""

import json

from codesign.tune.report import OperatorTuneRow, TuneReport, model_tune_report

# `codesign tune op dense --m 16 --k 64 --n 64 --config tiny --trials 8 --method random --json`
# as the dict-building command printed it.
OLD_OP = (
    '{"op": "dense", "workload": {"m": 16, "k": 64, "n": 64}, "config": "tiny", "backend": "timing", '
    '"method": "random", "space_points": 620, "cut_points": 0, "trials": 8, "new_trials": 8, '
    '"statuses": {"ok": 8}, "best_cycles": 9125, "best_knobs": {"tile_m": 2, "tile_k": 16, "tile_n": 4, '
    '"n_threads": 1, "m_threads": 2}, "default_cycles": 6842, "speedup_over_default": 0.7498082191780822, '
    '"log": "/tmp/tt_before.jsonl"}'
)


def test_tune_report_prints_the_old_json():
    report = TuneReport(
        op="dense", workload={"m": 16, "k": 64, "n": 64}, config="tiny", backend="timing", method="random",
        space_points=620, cut_points=0, trials=8, new_trials=8, statuses={"ok": 8}, best_cycles=9125,
        best_knobs={"tile_m": 2, "tile_k": 16, "tile_n": 4, "n_threads": 1, "m_threads": 2},
        default_cycles=6842, speedup_over_default=6842 / 9125, log="/tmp/tt_before.jsonl")
    assert json.dumps(report.to_json()) == OLD_OP


def test_model_report_totals_count_steps_and_never_exceed_the_default():
    rows = [OperatorTuneRow("dense", ("a", "b"), 81, 4, 100, 80),  # tuned faster, run twice
            OperatorTuneRow("dense", ("c",), 87, 4, 50, 70),  # tuned slower: the default stays
            OperatorTuneRow("conv2d", ("d",), 9, 4, 30, None)]  # no trial succeeded
    report = model_tune_report(rows, model="m.onnx", config="tiny", backend="timing", log=None)
    assert report.to_json() == {
        "model": "m.onnx", "config": "tiny", "backend": "timing",
        "operators": [
            {"op": "dense", "steps": ["a", "b"], "space_points": 81, "trials": 4, "default_cycles": 100,
             "best_cycles": 80},
            {"op": "dense", "steps": ["c"], "space_points": 87, "trials": 4, "default_cycles": 50,
             "best_cycles": 70},
            {"op": "conv2d", "steps": ["d"], "space_points": 9, "trials": 4, "default_cycles": 30,
             "best_cycles": None}],
        "default_cycles": 2 * 100 + 50 + 30, "tuned_cycles": 2 * 80 + 50 + 30,
        "tuned_over_default": (2 * 80 + 50 + 30) / (2 * 100 + 50 + 30), "log": None,
    }
    assert list(report.to_json()) == ["model", "config", "backend", "operators", "default_cycles",
                                      "tuned_cycles", "tuned_over_default", "log"]
