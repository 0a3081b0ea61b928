import json

from codesign.sweep.records import LayerResult, PointResult, WorkloadResult, WorkloadSpec


def _point() -> PointResult:
    layer = LayerResult("conv1", "conv2d", "accel", 118013952, cycles=12345, knobs={"tile_h": 2},
                        stats={"cycles": 12345, "gemm_uops": 77}, count=2)
    host = LayerResult("pool", "MaxPool", "host", 0, fidelity="measured", reason="not an accelerator op")
    wl = WorkloadResult("resnet18", 1.0, 1, 24690, {"gemm_uops": 154}, 0.93, (layer, host), host_s=0.002)
    return PointResult("abc123", (wl,), {"latency_cycles": 24690.0, "area_mm2": 1.5},
                       {"latency_cycles": "timing", "area_mm2": "estimate"}, {"compile": 0.5})


def test_point_result_round_trips_through_json_text():
    point = _point()
    again = PointResult.from_json(json.loads(json.dumps(point.to_json())))
    assert again == point
    assert again.workloads[0].layers[0].knobs == {"tile_h": 2}


def test_workload_spec_round_trips_and_binds_shapes():
    spec = WorkloadSpec("bert", "bert_tiny", 0.5, (("input_ids", (1, 128)),))
    assert WorkloadSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert spec.shapes() == {"input_ids": (1, 128)}
    assert WorkloadSpec("r", "resnet18").shapes() is None
