"""codesign bench cpu-convs: onnxruntime's profile parsed into convolutions, the README table,
and the command's refusals (the benchmark itself runs outside pytest)."""

from __future__ import annotations

import pytest

from codesign.bench.cpu_convs import ConvRow, CpuConvsReport, _ort_convs, table
from codesign.cli import main


def _event(name: str, op: str, shapes: list[list[int]], dur_us: int) -> dict:  # type: ignore[type-arg]
    return {"cat": "Node", "name": f"{name}_kernel_time", "dur": dur_us,
            "args": {"op_name": op, "input_type_shape": [{"float": s} for s in shapes]}}


def test_the_profile_gives_each_convolution_its_shapes_and_median_time():
    events = [_event("c1", "FusedConv", [[1, 3, 8, 8], [4, 3, 3, 3], [4]], d) for d in (30, 10, 20)]
    events += [_event("relu", "Relu", [[1, 4, 8, 8]], 5), {"cat": "Session", "name": "x"},
               _event("c2", "QLinearConv", [[1, 4, 8, 8], [1], [1], [8, 4, 1, 1], [1], [1]], 7)]
    got = _ort_convs(events)
    assert [n["name"] for n in got] == ["c1", "c2"]
    assert got[0]["shapes"] == ((1, 3, 8, 8), (4, 3, 3, 3)) and got[0]["s"] == pytest.approx(20e-6)
    assert got[1]["shapes"] == ((1, 4, 8, 8), (8, 4, 1, 1)) and got[1]["s"] == pytest.approx(7e-6)


def test_the_table_has_a_row_per_convolution_with_both_fractions_of_peak():
    rows = (ConvRow("conv1", (1, 3, 8, 8), (4, 3, 3, 3), 0.5, 5.0, 100.0, 0.5, "c1", 2.5, 200.0, 1.0),
            ConvRow("conv2", (1, 4, 8, 8), (8, 4, 1, 1), 0.1, 1.0, 100.0, 0.5, None, None, None, None))
    text = table(CpuConvsReport("m", "fp32", 200.0, "measured", 3, 6.0, 3.0, rows))
    lines = text.splitlines()
    assert "peak 200 GFLOP/s" in lines[0] and "ours 6.0 ms, onnxruntime 3.0 ms" in lines[0]
    assert lines[4] == "| conv1 | 1x3x8x8 | 4x3x3x3 | 0.500 | 100.0 | 50% | 200.0 | 100% |"
    assert lines[5].endswith("| 100.0 | 50% | - | - |")


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "nope"], "--model 'nope' is no zoo model; known: "),
    (["--rounds", "0"], "--rounds must be at least 1, not 0"),
])
def test_bad_options_are_refused(capsys, argv, message):
    assert main(["bench", "cpu-convs", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_int8_nodes_match_by_their_nhwc_data_without_a_weight_shape():
    from codesign.bench.cpu_convs import _same

    assert _same(((1, 8, 8, 3),), (1, 3, 8, 8), (4, 3, 3, 3))
    assert not _same(((1, 8, 8, 3), (5, 3, 3, 3)), (1, 3, 8, 8), (4, 3, 3, 3))
    assert not _same((), (1, 3, 8, 8), (4, 3, 3, 3))
