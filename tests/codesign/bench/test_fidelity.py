"""`codesign bench fidelity` and `codesign bench timing`."""

from __future__ import annotations

import json

import pytest

from codesign.bench import fidelity as bench_fidelity
from codesign.cli import main
from hw.config import PRESETS
from tests.sim.rtl.stub_accel import needs_verilator


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bench_timing_reports_speed(capsys):
    code, out, _ = run(capsys, "bench", "timing", "--config", "tiny", "--repeats", "1", "--json")
    result = json.loads(out)
    assert code == 0 and result["config"] == "tiny" and result["cycles"] > 1_000_000
    assert result["cycles_per_s"] > 0 and result["shape"] == [3136, 576, 64]


def test_long_gemms_are_the_bench_workloads():
    programs = bench_fidelity.long_gemms(PRESETS["rect"])
    assert [p.name for p in programs] == ["gemm_3136x576x64_vt2", "gemm_1024x512x64_vt2",
                                          "gemm_1024x512x64_vt1"]
    assert all(p.long and p.klass == "gemm" for p in programs)


def test_negative_random_count_is_an_error(capsys):
    code, _, err = run(capsys, "bench", "fidelity", "--config", "tiny", "--random", "-1")
    assert code == 2 and "--random must be at least 0, not -1" in err


def test_unknown_class_is_an_error(capsys):
    code, _, err = run(capsys, "bench", "fidelity", "--config", "tiny", "--classes", "conformance,x")
    assert code == 2 and "unknown program class(es) x; known: conformance, gemm, random, resnet18" in err


@pytest.mark.rtl
@needs_verilator[1]
def test_bench_fidelity_json_and_table(capsys):
    code, out, _ = run(capsys, "bench", "fidelity", "--config", "tiny", "--classes",
                       "conformance,random", "--random", "6", "--json")
    report = json.loads(out)
    assert code == 0 and len(report["programs"]) == 26 + 6
    assert {"programs", "mape", "max_error", "speed_ratio"} <= set(report)
    assert report["mape"] <= 0.03 and report["functional_mismatches"] == []
    assert report["speed_ratio"] is None  # no long program in this corpus
    code, out, _ = run(capsys, "bench", "fidelity", "--config", "tiny", "--classes", "random",
                       "--random", "3")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:3] == ["program", "class", "lat"]
    assert any(line.startswith("random ") for line in lines) and "speed ratio" in out


def test_resnet18_layers_where_they_map():
    layers = bench_fidelity.resnet18_layers(PRESETS["tiny"])
    assert len(layers) == 10 and all(p.long and p.klass == "resnet18" for p in layers)
    assert layers[0].name == "resnet18_layer1" and set(layers[0].inputs) == {
        r.name for r in layers[0].program.regions_with_role("input")}
    assert bench_fidelity.resnet18_layers(PRESETS["rect"]) == []  # batch 1 on a batch-2 core
