"""codesign bench cpu-convs: onnxruntime's profile parsed into convolutions, the README table,
and the command's refusals (the benchmark itself runs outside pytest)."""

from __future__ import annotations

import pytest

from codesign.bench.cpu_convs import (
    ConvRow,
    CpuConvsReport,
    OpKind,
    _ort_convs,
    _ort_kinds,
    _our_kinds,
    _ratio,
    run,
    table,
)
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
    text = table(CpuConvsReport("m", "fp32", 200.0, "measured", 3, 6.0, 3.0, rows, (5.5, 6.5), (2.9, 3.2),
                                (1.8, 2.0, 2.1)))
    lines = text.splitlines()
    assert "peak 200 GFLOP/s" in lines[0]
    assert "ours 6.0 ms (5.5-6.5), onnxruntime 3.0 ms (2.9-3.2)" in lines[0]
    assert "ours/onnxruntime per round 2.00 (1.80-2.10)" in lines[0]
    assert len(lines) == 6  # no kinds: no second table
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


def test_every_kind_is_summed_from_the_medians_largest_first():
    events = [_event("a", "Gemm", [[1, 4]], d) for d in (10, 30, 20)] + [_event("b", "Gemm", [[1, 4]], 5)]
    events += [_event("c", "Softmax", [[1, 4]], 40), {"cat": "Session", "name": "x"}]
    assert _ort_kinds(events) == (OpKind("Softmax", 1, pytest.approx(0.04)),
                                  OpKind("Gemm", 2, pytest.approx(0.025)))

    class Step:
        def __init__(self, name: str, op: str, where: str = "host") -> None:
            self.name, self.op, self.where = name, op, where

    steps = [Step("m1", "MatMul+Add"), Step("r", "Reshape", "view"), Step("m2", "MatMul+Add"),
             Step("s", "Softmax")]
    per_step = {"m1": [1e-3, 3e-3, 2e-3], "r": [1.0], "m2": [1e-3], "s": [0.5e-3]}
    assert _our_kinds(steps, per_step) == (OpKind("MatMul+Add", 2, pytest.approx(3.0)),
                                           OpKind("Softmax", 1, pytest.approx(0.5)))


def test_the_ratio_is_taken_round_by_round():
    q1, median, q3 = _ratio([2.0, 4.0, 3.0, 9.0], [1.0, 4.0, 2.0, 3.0])  # ratios 2, 1, 1.5, 3
    assert median == pytest.approx(1.75) and q1 <= 1.5 <= median <= 2.0 <= q3


def test_the_kinds_table_puts_both_lists_side_by_side_with_totals():
    report = CpuConvsReport("m", "fp32", 200.0, "measured", 3, 6.0, 3.0, (), ours_kinds=(
        OpKind("Conv+Clip", 3, 2.0), OpKind("Gemm", 1, 0.5)), ort_kinds=(OpKind("FusedConv", 3, 1.5),))
    lines = table(report).splitlines()
    assert lines[-5] == "| ours: step kind | steps | ms | onnxruntime: node kind | nodes | ms |"
    assert lines[-2] == "| Gemm | 1 | 0.500 |  | |  |"
    assert lines[-1] == "| total | 4 | 2.500 | total | 3 | 1.500 |"
    assert report.to_json()["ours_kinds"][0] == {"kind": "Conv+Clip", "count": 3, "ms": 2.0}


def test_an_unknown_ops_choice_is_refused():
    with pytest.raises(ValueError, match="ops must be one of convs, all, not 'some'"):
        run("digits", ops="some")
