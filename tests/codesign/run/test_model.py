"""correct_int8: the integer part exactly, the float tail within a stated tolerance."""

from __future__ import annotations

import numpy as np

from codesign.run.model import FLOAT_RTOL, matches_reference
from compiler.graph.builder import append
from compiler.graph.ir import Graph, const
from compiler.runtime.model import ModelResult, reference_boundary


def _graph() -> Graph:
    g = Graph("q")
    g.add_input("x", (1, 4), "float32")
    append(g, "Quantize", ["x"], ["xq"], {"scale": 0.1})
    append(g, "Dequantize", ["xq"], ["y"], {"scale": 0.1})
    g.outputs = ["y"]
    return g


def test_integers_must_be_equal_floats_close():
    g = _graph()
    feeds = {"x": np.array([[0.1, -0.26, 1.0, 3.0]], np.float32)}
    outputs, boundary = reference_boundary(g, feeds)
    assert boundary["xq"].tolist() == [[1, -3, 10, 30]]
    good = ModelResult(dict(outputs), [], dict(boundary))
    assert matches_reference(g, feeds, good)
    nudged = ModelResult({"y": outputs["y"] * (1 + FLOAT_RTOL / 10)}, [], dict(boundary))
    assert matches_reference(g, feeds, nudged)  # the float tail within tolerance
    off_by_one = ModelResult(dict(outputs), [], {"xq": boundary["xq"] + np.int8(1)})
    assert not matches_reference(g, feeds, off_by_one)  # an integer differs: not correct
    far = ModelResult({"y": outputs["y"] + 1.0}, [], dict(boundary))
    assert not matches_reference(g, feeds, far)


def test_the_reference_quantizes_the_floats_the_run_quantized():
    """A float step run natively may differ from numpy's in the last bit; at a rounding tie that
    moves the Quantize after it by one step. The integer part is checked on the run's floats."""
    g = Graph("q")
    g.add_input("x", (1, 2), "float32")
    append(g, "Relu", ["x"], ["r"])
    append(g, "Quantize", ["r"], ["rq"], {"scale": 1.0})
    append(g, "Dequantize", ["rq"], ["y"], {"scale": 1.0})
    g.outputs = ["y"]
    feeds = {"x": np.array([[2.5, 7.0]], np.float32)}  # 2.5 rounds to 2 (half to even)
    ulp_above = np.nextafter(np.float32(2.5), np.float32(3))
    run_floats = {"r": np.array([[ulp_above, 7.0]], np.float32)}  # a native Relu, one ulp off
    run_ints = {"rq": np.array([[3, 7]], np.int8)}  # what quantizing those floats gives
    outputs = {"y": np.array([[3.0, 7.0]], np.float32)}
    assert reference_boundary(g, feeds)[1]["rq"].tolist() == [[2, 7]]
    assert not matches_reference(g, feeds, ModelResult(outputs, [], run_ints))
    assert matches_reference(g, feeds, ModelResult(outputs, [], run_ints, run_floats))
    wrong = ModelResult(outputs, [], {"rq": np.array([[2, 7]], np.int8)}, run_floats)
    assert not matches_reference(g, feeds, wrong)  # the Quantize itself is still checked exactly


def _conv_graph() -> Graph:
    """float -> int8 -> depthwise QConv (padding reads -128) -> pointwise QConv with a fused
    residual -> two boundaries: a Dequantize, and the int8 value itself as an output."""
    rng = np.random.default_rng(21)
    g = Graph("qconv")
    g.add_input("x", (1, 8, 9, 9), "float32")
    consts: dict[str, np.ndarray] = {
        "w_dw": rng.integers(-127, 128, (8, 1, 3, 3), dtype=np.int8),
        "w_pw": rng.integers(-127, 128, (8, 8, 1, 1), dtype=np.int8),
        "b": rng.integers(-5000, 5000, 8).astype(np.int32),
        "m": rng.integers(1 << 14, 1 << 15, 8).astype(np.int32),
    }
    for name, data in consts.items():
        g.values[name] = const(name, data)
    append(g, "Quantize", ["x"], ["xq"], {"scale": 0.05, "zero_point": -128})
    conv = {"pads": (1, 1, 1, 1), "strides": (1, 1), "shift": 22}
    append(g, "QConv", ["xq", "w_dw", "b", "m"], ["d"], {**conv, "group": 8, "pad_value": -128})
    append(g, "QConv", ["d", "w_pw", "b", "m", "d"], ["p"], {**conv, "pads": (0, 0, 0, 0), "mult_r": 1 << 14})
    append(g, "Dequantize", ["p"], ["y"], {"scale": 0.1})
    g.outputs = ["y", "p"]
    return g


def test_one_wrong_value_anywhere_at_a_boundary_is_caught():
    """The integer reference of convolutions (the fused depthwise and pointwise kernels): the
    run's own boundary passes; one value off by one bit, at any of a few seeded places in either
    boundary (the Dequantize input, the int8 output), fails."""
    g = _conv_graph()
    feeds = {"x": np.random.default_rng(4).uniform(0, 12, (1, 8, 9, 9)).astype(np.float32)}
    outputs, boundary = reference_boundary(g, feeds)
    assert len(np.unique(boundary["p"])) > 20  # the convolutions' arithmetic, not only clipped values
    assert matches_reference(g, feeds, ModelResult(dict(outputs), [], dict(boundary)))
    rng = np.random.default_rng(5)
    for _ in range(6):
        i = tuple(int(rng.integers(0, n)) for n in boundary["p"].shape)
        bit = np.int8(1 << int(rng.integers(0, 7)))
        wrong = boundary["p"].copy()
        wrong[i] ^= bit
        assert not matches_reference(g, feeds, ModelResult(dict(outputs), [], {"p": wrong}))
        wrong_out = {**outputs, "p": wrong}
        assert not matches_reference(g, feeds, ModelResult(wrong_out, [], dict(boundary)))


def test_operator_rows_keep_the_counters_a_figure_splits(tmp_path) -> None:
    import onnx

    from codesign import plots, zoo
    from codesign.run.inputs import sample_inputs
    from codesign.run.model import load_model, run
    from hw.config import preset
    from sim.backends import make_backend

    onnx.save(zoo.build("mlp"), tmp_path / "mlp.onnx")
    cfg = preset("tiny")
    loaded = load_model(str(tmp_path / "mlp.onnx"), cfg)
    inputs = sample_inputs(loaded.model.graph, loaded.zoo_name, 2, seed=0)
    report = run(loaded, inputs, make_backend("timing", cfg))
    layers = plots.from_steps(report.operators)
    accel = [r for r in report.operators if r.where == "accel"]
    assert [x.name for x in layers] == [r.name for r in accel] and layers
    for layer, row in zip(layers, accel, strict=True):
        assert row.stats is not None and layer.cycles == row.cycles == row.stats["cycles"]
        assert layer.gemm_busy == row.stats["gemm_busy_cycles"] > 0
        assert layer.gemm_busy + layer.other_compute + layer.compute_stall + layer.compute_idle == row.cycles
        assert "stats" not in row.to_json()
