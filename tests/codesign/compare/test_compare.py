"""`compare`: the report's fields on a small model (every backend, both precisions), the
interleaved timing, agreement with onnxruntime fp32, and every bad request with its message."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import onnx
import pytest

from codesign import zoo
from codesign.compare import CompareRequest, Latency, Peak, accelerator_peak, compare
from hw.config import PRESETS
from hw.errors import WorkbenchError

# the package exports a function of that name: the module itself, for monkeypatching
compare_module = importlib.import_module("codesign.compare.compare")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(zoo.build("mlp"), path)
    return path


@pytest.fixture(autouse=True)
def fixed_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare_module, "cpu_peak", lambda threads: Peak(100.0, "stated for the test"))


def test_report_fields(mlp: Path) -> None:
    report = compare(CompareRequest(str(mlp), ("tiny",), repeat=4, warmup=1, inputs=2))
    names = [r.backend for r in report.results]
    assert names == ["accel:tiny", "cpu:fp32", "cpu:int8", "onnxruntime:fp32", "onnxruntime:int8"]
    assert report.macs == 64 * 256 + 256 * 128 + 128 * 10 and report.inputs == 2
    for r in report.results:
        simulated = r.backend.startswith("accel")
        assert r.timing == ("simulated" if simulated else "measured")
        assert r.latency.runs == (3 if simulated else 4)  # a simulation's cycles do not vary
        lat = r.latency
        assert lat.min_ms <= lat.p25_ms <= lat.median_ms <= lat.p75_ms <= lat.max_ms
        assert r.throughput_per_s == pytest.approx(1e3 / r.latency.median_ms)
        assert r.gops == pytest.approx(2 * report.macs / r.latency.median_ms / 1e6)
        assert r.peak_fraction == pytest.approx(r.gops / r.peak_gops)
        assert r.cosine is not None and r.cosine > 0.99
        if simulated:  # the energy model over the accelerator's steps
            assert r.energy_mj is not None and r.energy_mj > 0 and r.energy_source is not None
            assert r.energy_source.startswith("modeled: accelerator steps only")
        else:
            assert r.energy_mj is None  # no power stated
        assert r.top1_agreement is not None and r.top1_ci95 is not None
    assert report.results[1].cosine == pytest.approx(1.0, abs=1e-6)  # cpu fp32: onnxruntime's own maths
    assert report.results[0].peak_gops == accelerator_peak(PRESETS["tiny"]).gops
    assert report.results[1].peak_source == "stated for the test"
    assert report.fastest in names
    assert report.to_json()["results"][0]["latency"]["runs"] == 3


def test_accelerator_peak_is_macs_per_cycle_twice_at_the_clock() -> None:
    cfg = PRESETS["vta"]
    assert accelerator_peak(cfg).gops == pytest.approx(cfg.macs_per_cycle * 2 * cfg.clock_mhz / 1e3)


def test_latency_statistics() -> None:
    lat = Latency.of([0.004, 0.001, 0.002, 0.003])
    assert (lat.runs, lat.min_ms, lat.max_ms) == (4, 1.0, 4.0)
    assert lat.median_ms == pytest.approx(2.5) and lat.p25_ms == pytest.approx(1.75)
    assert np.isclose(lat.p75_ms, 3.25)


@pytest.mark.parametrize(("request_", "message"), [
    (dict(backends=("tpu",)), r"unknown backend 'tpu'; known: accel, cpu, onnxruntime, gpu"),
    (dict(precisions=("fp16",)), r"unknown precision 'fp16'; known: fp32, int8"),
    (dict(threads=0), r"--threads must be at least 1, not 0"),
    (dict(repeat=0), r"--repeat must be at least 1, not 0"),
    (dict(warmup=-1), r"--warmup must be at least 0, not -1"),
    (dict(inputs=0), r"--inputs must be at least 1, not 0"),
    (dict(cpu_watts=0.0), r"--cpu-watts must be a positive number of watts, not 0"),
    (dict(cpu_watts=float("nan")), r"--cpu-watts must be a positive number of watts, not nan"),
    (dict(configs=("nope",)), r"'nope' is neither a preset \(.*\) nor a config file"),
    (dict(backends=()), r"no backend to compare; known: accel, cpu, onnxruntime, gpu"),
])
def test_bad_requests(mlp: Path, request_: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(WorkbenchError, match=message):
        CompareRequest(str(mlp), **request_).check()


def test_missing_model(tmp_path: Path) -> None:
    with pytest.raises(WorkbenchError, match=r"nothing.onnx: no such model file"):
        CompareRequest(str(tmp_path / "nothing.onnx")).check()


def test_cpu_energy_is_latency_times_the_stated_power(mlp: Path) -> None:
    report = compare(CompareRequest(str(mlp), (), ("cpu",), ("fp32",), repeat=3, warmup=0, cpu_watts=12.5))
    (r,) = report.results
    assert r.energy_mj == pytest.approx(r.latency.median_ms / 1e3 * 12.5 * 1e3)  # s x W = J, in mJ
    assert r.energy_source == "estimate: median latency x 12.5 W stated with --cpu-watts"


def test_a_backend_whose_outputs_are_off_is_flagged_and_not_ranked(mlp: Path, tmp_path: Path) -> None:
    """A backend that computes something else (cosine below FAITHFUL_COSINE) is marked in the
    JSON, the table and the figure, and `fastest` names the fastest faithful backend."""
    import dataclasses
    import io

    from codesign.cli.compare import print_table
    from codesign.compare import write_figure
    from codesign.compare.records import FAITHFUL_COSINE

    report = compare(CompareRequest(str(mlp), (), backends=("cpu", "onnxruntime"), repeat=2, warmup=0,
                                    inputs=1, precisions=("fp32",)))
    quick = min(report.results, key=lambda r: r.latency.median_ms)
    off = dataclasses.replace(quick, cosine=FAITHFUL_COSINE - 0.35)
    bad = dataclasses.replace(report, results=tuple(off if r is quick else r for r in report.results))
    assert not off.faithful and off.to_json()["faithful"] is False
    assert bad.fastest != off.backend and bad.fastest in {r.backend for r in bad.results}
    table = io.StringIO()
    print_table(bad, table)
    assert (f"warning: {off.backend}'s outputs are off (cosine 0.600 against onnxruntime fp32, below 0.95): "
            "its latency is not comparable, and it is not ranked") in table.getvalue()
    assert f"fastest: {bad.fastest}" in table.getvalue()
    assert all(p.stat().st_size > 0 for p in write_figure(bad, tmp_path))
