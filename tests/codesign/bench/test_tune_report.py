"""`codesign bench tune`'s report prints the JSON the command printed as dicts: a layer row's
confirmation fields come flat after best_knobs, trials_to_98_transfer last."""

import json
from dataclasses import replace

from codesign.bench.tune import (
    Confirmation,
    CutSample,
    LayerRow,
    ResNet18Row,
    ResNet18Tuned,
    TransferSummary,
    TuneBenchReport,
    table,
)

ROW = LayerRow(name="layer1", space_points=100, cut_points=3, best_cycles=1000, exhaustive_best_cycles=800,
               default_cycles=1500, gap=0.25, default_gap=0.875, trials=16, fraction_evaluated=0.16,
               trials_to_98_model=5.0, trials_to_98_random=20.5, best_knobs={"tile_h": 2},
               trials_to_98_transfer=4.0)
CONFIRMED = Confirmation(fsim_correct=True, rtl_correct=True, rtl_cycles=1000, rtl_over_timing=1.0)
# A row as the dict-building run() printed it; CONFIRM marks where --confirm's fields went.
OLD_ROW = ('{"name": "layer1", "space_points": 100, "cut_points": 3, "best_cycles": 1000, '
           '"exhaustive_best_cycles": 800, "default_cycles": 1500, "gap": 0.25, "default_gap": 0.875, '
           '"trials": 16, "fraction_evaluated": 0.16, "trials_to_98_model": 5.0, '
           '"trials_to_98_random": 20.5, "best_knobs": {"tile_h": 2}CONFIRM, "trials_to_98_transfer": 4.0}')


def test_a_layer_row_with_and_without_confirmation():
    assert json.dumps(ROW.to_json()) == OLD_ROW.replace("CONFIRM", "")
    confirmed = ', "fsim_correct": true, "rtl_correct": true, "rtl_cycles": 1000, "rtl_over_timing": 1.0'
    assert json.dumps(replace(ROW, confirmation=CONFIRMED).to_json()) == OLD_ROW.replace("CONFIRM", confirmed)


def test_the_report_nests_as_before_and_its_table_reads_it():
    report = TuneBenchReport(
        config="tiny", fingerprint="f", backend="timing", max_insns=300, seeds=2, batch=4, layers=(ROW,),
        median_gap=ROW.gap, median_fraction_evaluated=0.16, random_over_model_trials=4.1,
        transfer=TransferSummary(trials_to_98_scratch=5.0, trials_to_98_pretrained=4.0, layers_fewer=1,
                                 layers_more=0),
        cut=CutSample(per_layer=2, measured=2, min_over_best=1.5, by_layer={"layer1": 1.5}),
        resnet18=ResNet18Tuned(default_cycles=1500, tuned_cycles=1000, ratio=1000 / 1500,
                               layers=(ResNet18Row("layer1", 1500, 1000),)))
    out = report.to_json()
    assert list(out) == ["config", "fingerprint", "backend", "max_insns", "seeds", "batch", "layers",
                         "median_gap", "median_fraction_evaluated", "random_over_model_trials", "transfer",
                         "cut", "resnet18"]
    assert out["layers"] == [json.loads(OLD_ROW.replace("CONFIRM", ""))]
    assert out["transfer"] == {"trials_to_98_scratch": 5.0, "trials_to_98_pretrained": 4.0, "layers_fewer": 1,
                               "layers_more": 0}
    assert out["cut"] == {"per_layer": 2, "measured": 2, "min_over_best": 1.5, "by_layer": {"layer1": 1.5}}
    assert out["resnet18"] == {"default_cycles": 1500, "tuned_cycles": 1000, "ratio": 1000 / 1500,
                               "layers": [{"name": "layer1", "default_cycles": 1500, "tuned_cycles": 1000}]}
    lines = table(report).splitlines()
    assert lines[1].split()[:3] == ["layer1", "100", "1000"] and lines[-1].endswith("ratio 0.6667")
