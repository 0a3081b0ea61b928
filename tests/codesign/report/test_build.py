import json
import sqlite3

import pytest

from codesign.report.build import ReportError, build_report, strongest, varied
from codesign.sweep.engine import run_sweep
from codesign.sweep.records import LayerResult, PointResult, WorkloadResult
from codesign.sweep.space import space_from_text
from codesign.sweep.store import StoreError

from ..sweep.conftest import TINY_SPACE, fake_metrics


def evaluate_with_layers(point):
    """The sweep tests' fake metrics, with one workload of two layers so every figure has data."""
    cfg = point.config
    metrics = {**fake_metrics(cfg), "energy_uj": 5.0 + cfg.block_out}
    cycles = int(metrics["latency_cycles"])
    layers = tuple(LayerResult(f"conv{i}", "conv2d", "accel", 4096 * (i + 1), cycles=cycles // 2,
                               stats={"gemm_busy_cycles": cycles // 4, "compute_busy_cycles": cycles // 3,
                                      "inp_load_bytes": 512, "out_store_bytes": 256}) for i in range(2))
    wl = WorkloadResult("mlp", 1.0, 1, cycles, {}, 1.0, layers)
    return PointResult(point.id, (wl,), metrics, {"latency_cycles": "timing", "area_mm2": "estimate"})


@pytest.fixture
def tiny_space(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_SPACE)
    return space_from_text(TINY_SPACE, path=path)


@pytest.fixture
def store(tmp_path, tiny_space):
    path = tmp_path / "s.db"
    run_sweep(tiny_space, path, evaluate_with_layers, strategy="grid", workers=0)
    return path


def test_report_writes_every_figure_and_a_page_that_agrees_with_the_store(store, tmp_path):
    out = tmp_path / "report"
    summary = build_report(store, out, top=3)
    names = {p.split("/")[-1] for p in summary.files}
    for stem in ("pareto_latency_area", "layers", "roofline", "effects"):
        assert {f"{stem}.png", f"{stem}.svg"} <= names
    assert {"index.html", "report.md"} <= names
    rows = sqlite3.connect(store).execute("SELECT id, latency_cycles, area_mm2 FROM points WHERE status='ok'")
    stored = {r[0]: (r[1], r[2]) for r in rows}
    assert summary.evaluated == len(stored) == 9
    assert 1 <= len(summary.best) <= 3
    latencies = [b["latency_cycles"] for b in summary.best]
    assert latencies == sorted(latencies)  # best first, by the first objective
    for b in summary.best:
        assert stored[b["id"]] == (b["latency_cycles"], b["area_mm2"])
        # nothing stored dominates a listed design
        assert not any(lat <= b["latency_cycles"] and area <= b["area_mm2"] and (lat, area) !=
                       (b["latency_cycles"], b["area_mm2"]) for lat, area in stored.values())
    page = (out / "index.html").read_text()
    assert all(b["id"] in page for b in summary.best)
    assert json.loads(json.dumps(summary.to_json()))["evaluated"] == 9


def test_varied_parameters_and_the_one_that_moves_latency_most(store, tmp_path):
    from codesign.report.build import _designs
    from codesign.sweep.store import SweepStore

    with SweepStore.read(store) as db:
        designs = _designs(db.points("ok"), set())
    params = varied(designs)
    assert params == ["block_in", "block_out"]  # wgt_bytes 8 KiB was infeasible: one value left
    # fake latency is 1e6 / (block_in * block_out) + block_in: both move it alike, so either
    assert strongest(designs, params, "latency_cycles") in params


def failing(point):
    raise RuntimeError("boom")


def test_refusals(tmp_path, tiny_space):
    failed = tmp_path / "failed.db"
    run_sweep(tiny_space, failed, failing, strategy="grid", workers=0)
    with pytest.raises(ReportError, match=r"failed.db: the store holds no evaluated point yet "
                                          r"\(infeasible 9, error 9\)"):
        build_report(failed, tmp_path / "r")
    with pytest.raises(StoreError, match="nothing.db: no such store"):
        build_report(tmp_path / "nothing.db", tmp_path / "r")
    with pytest.raises(ReportError, match="--top must be at least 1, not 0"):
        build_report(failed, tmp_path / "r", top=0)


def test_a_confirmation_that_could_not_run_a_workload_keeps_its_reason():
    from codesign.report.build import confirmation

    ran = {"workload": "mlp", "fsim_exact": True, "rtl_exact": True, "timing_cycles": 5, "rtl_cycles": 5,
           "reason": None}
    unbatched = {**ran, "workload": "bert", "fsim_exact": False, "rtl_exact": False, "timing_cycles": 0,
                 "rtl_cycles": 0, "reason": "cannot run at the core's batch 2: no batch axis"}
    assert confirmation([ran]) == {"fsim_exact": True, "timing_cycles": 5, "rtl_cycles": 5}
    assert confirmation([ran, unbatched]) == {
        "fsim_exact": False, "error": "bert not run: cannot run at the core's batch 2: no batch axis"}
