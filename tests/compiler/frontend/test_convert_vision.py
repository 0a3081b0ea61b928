"""The operators of compiler/frontend/convert_vision.py (ConvTranspose, Resize/Upsample, LRN,
InstanceNormalization, PRelu, Split, Tile, ArgMax/ArgMin, Where, comparisons, logical ops)
against onnxruntime: on ONNX's own node cases for them, and on random shapes and attributes
(hypothesis). Integer and bool results are compared exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto

from compiler.errors import ModelImportError
from compiler.runtime.conformance import cases, node_tests
from compiler.runtime.onnx_backend import WorkbenchBackend
from tests.compiler.frontend.onnx_models import Builder, assert_matches_ort, import_and_simplify

NEW_OPS = ("ConvTranspose", "Resize", "Upsample", "LRN", "InstanceNormalization", "PRelu", "Split", "Tile",
           "ArgMax", "ArgMin", "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And",
           "Or", "Xor", "Not")
NEWEST_OPSET = min(onnx.defs.onnx_opset_version(), 21)  # a recent opset this onnxruntime runs
ort.set_default_logger_severity(3)

# Where onnxruntime and ONNX's reference (the suite's expected outputs) disagree; we follow the suite.
ORT_DISAGREES = {
    "test_resize_downsample_scales_linear_align_corners":
        "align_corners with scales: onnxruntime divides by the rounded output length - 1, ONNX's "
        "reference by scale * length - 1",
}


def _ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


def assert_same(got: np.ndarray, ref: np.ndarray, what: str) -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref, err_msg=what)
    else:
        scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * scale, err_msg=what)


@pytest.mark.parametrize("op", NEW_OPS)
def test_suite_node_cases_match_onnxruntime(op: str) -> None:
    """Every node case of the suite for `op` that we claim: our result equals onnxruntime's on the
    case's own inputs."""
    models = node_tests()
    claimed = [c for c in cases(("node",)) if c.subject == op and c.exclusion is None]
    assert claimed or op == "Upsample", op  # Upsample's one case is opset 9's; it must be claimed too
    for case in claimed:
        if case.name in ORT_DISAGREES:
            continue
        tc: Any = models[case.name]
        graph_inputs = [i.name for i in tc.model.graph.input]
        for inputs, _ in tc.data_sets:
            arrays = [np.asarray(a) for a in inputs]
            ours = WorkbenchBackend.prepare(tc.model).run(arrays)
            theirs = _ort(tc.model, dict(zip(graph_inputs, arrays, strict=False)))
            for i, (got, ref) in enumerate(zip(ours, theirs, strict=True)):
                assert_same(got, ref, f"{case.name} output {i}")


def _check(model: onnx.ModelProto) -> None:
    assert_matches_ort(model, import_and_simplify(model))


# -- random shapes and attributes -----------------------------------------------------------------

_SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)


@_SETTINGS
@given(c=st.integers(1, 4), m=st.integers(1, 3), g=st.integers(1, 2), k=st.integers(1, 3),
       s=st.integers(1, 3), d=st.integers(1, 2), p=st.integers(0, 1), hw=st.integers(2, 5),
       bias=st.booleans())
def test_conv_transpose_random(c: int, m: int, g: int, k: int, s: int, d: int, p: int, hw: int,
                               bias: bool) -> None:
    b = Builder(NEWEST_OPSET)
    inputs = ["x", b.weight("w", [c * g, m, k, k])] + ([b.weight("b", [m * g])] if bias else [])
    extra = min(s, d) - 1  # output_padding below both the stride and the dilation
    y = b.op("ConvTranspose", inputs, strides=[s, s], dilations=[d, d], pads=[p, 0, 0, p], group=g,
             output_padding=[extra, 0])
    _check(b.model({"x": [2, c * g, hw, hw + 1]}, [y]))


@_SETTINGS
@given(mode=st.sampled_from(["nearest", "linear"]),
       coord=st.sampled_from(["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                              "half_pixel_symmetric"]),
       nearest=st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
       h=st.integers(1, 6), w=st.integers(2, 6), oh=st.integers(1, 12), ow=st.integers(1, 12))
def test_resize_sizes_random(mode: str, coord: str, nearest: str, h: int, w: int, oh: int, ow: int) -> None:
    b = Builder(NEWEST_OPSET)
    y = b.op("Resize", ["x", "", "", b.ints([1, 2, oh, ow])], mode=mode, coordinate_transformation_mode=coord,
             nearest_mode=nearest)
    _check(b.model({"x": [1, 2, h, w]}, [y]))


@_SETTINGS
@given(mode=st.sampled_from(["nearest", "linear"]), sh=st.sampled_from([0.5, 1.0, 2.0, 3.0, 1.5]),
       sw=st.sampled_from([0.5, 2.0, 4.0, 2.5]), opset=st.sampled_from([10, 13, NEWEST_OPSET]))
def test_resize_scales_random(mode: str, sh: float, sw: float, opset: int) -> None:
    """Scales that exporters write (integer upsampling, halving), every opset form."""
    b = Builder(opset)
    scales = b.floats([1, 1, sh, sw])
    ins = ["x", scales] if opset < 11 else ["x", "", scales]
    y = b.op("Resize", ins, mode=mode)
    _check(b.model({"x": [2, 3, 4, 6]}, [y]))


def test_upsample_opset9_nearest_and_linear() -> None:
    for mode in ("nearest", "linear"):
        b = Builder(9)
        _check(b.model({"x": [1, 2, 3, 5]}, [b.op("Upsample", ["x", b.floats([1, 1, 2, 3])], mode=mode)]))


@_SETTINGS
@given(size=st.sampled_from([1, 3, 5]), c=st.integers(1, 7), alpha=st.floats(1e-5, 1e-2),
       beta=st.floats(0.5, 1.0), bias=st.floats(0.5, 2.0))
def test_lrn_random(size: int, c: int, alpha: float, beta: float, bias: float) -> None:
    b = Builder(NEWEST_OPSET)
    _check(b.model({"x": [2, c, 3, 4]}, [b.op("LRN", ["x"], size=size, alpha=alpha, beta=beta, bias=bias)]))


@_SETTINGS
@given(c=st.integers(1, 5), rank=st.integers(3, 5), eps=st.sampled_from([1e-5, 1e-3]))
def test_instance_norm_random(c: int, rank: int, eps: float) -> None:
    b = Builder(NEWEST_OPSET)
    y = b.op("InstanceNormalization", ["x", b.weight("s", [c]), b.weight("b", [c])], epsilon=eps)
    _check(b.model({"x": [2, c, *([3] * (rank - 2))]}, [y]))


@_SETTINGS
@given(c=st.integers(1, 5), per_channel=st.booleans())
def test_prelu_random(c: int, per_channel: bool) -> None:
    b = Builder(NEWEST_OPSET)
    slope = b.weight("slope", [c, 1, 1] if per_channel else [1])
    _check(b.model({"x": [2, c, 3, 4]}, [b.op("PRelu", ["x", slope])]))


@_SETTINGS
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4), axis=st.integers(-3, 2),
       opset=st.sampled_from([11, 13, NEWEST_OPSET]))
def test_split_random(sizes: list[int], axis: int, opset: int) -> None:
    b = Builder(opset)
    shape = [2, 3, 4]
    shape[axis] = sum(sizes)
    outs = [f"y{i}" for i in range(len(sizes))]
    if opset < 13:
        b.nodes.append(onnx.helper.make_node("Split", ["x"], outs, axis=axis, split=sizes))
    else:
        b.nodes.append(onnx.helper.make_node("Split", ["x", b.ints(sizes)], outs, axis=axis))
    _check(b.model({"x": shape}, outs))


@_SETTINGS
@given(reps=st.lists(st.integers(1, 3), min_size=3, max_size=3))
def test_tile_random(reps: list[int]) -> None:
    b = Builder(NEWEST_OPSET)
    _check(b.model({"x": [2, 1, 3]}, [b.op("Tile", ["x", b.ints(reps)])]))


@_SETTINGS
@given(op=st.sampled_from(["ArgMax", "ArgMin"]), axis=st.integers(-3, 2), keep=st.integers(0, 1),
       last=st.integers(0, 1))
def test_arg_random(op: str, axis: int, keep: int, last: int) -> None:
    """Small integers, so ties exist and select_last_index matters."""
    b = Builder(NEWEST_OPSET)
    y = b.op(op, ["x"], axis=axis, keepdims=keep, select_last_index=last)
    _check(b.model({"x": [3, 4, 5]}, [y], types={"x": TensorProto.INT32, y: TensorProto.INT64}))


@_SETTINGS
@given(op=st.sampled_from(["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]),
       shape_b=st.sampled_from([[3, 4], [4], [1], [2, 1, 4]]))
def test_compare_where_random(op: str, shape_b: list[int]) -> None:
    """A comparison feeding Where and the logical ops, broadcast (integers: ties)."""
    b = Builder(NEWEST_OPSET)
    cond = b.op(op, ["a", "b"])
    both = b.op("And", [cond, b.op("Not", [b.op("Xor", [cond, b.op("Or", [cond, cond])])])])
    y = b.op("Where", [both, "a", "b"])
    types = {"a": TensorProto.INT32, "b": TensorProto.INT32, y: TensorProto.INT32}
    _check(b.model({"a": [2, 3, 4], "b": shape_b}, [y], types=types))


# -- what is refused ------------------------------------------------------------------------------


@pytest.mark.parametrize(("attrs", "message"), [
    ({"mode": "cubic"}, "mode 'cubic' is not supported"),
    ({"antialias": 1}, "antialias=1 is not supported"),
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, "'tf_crop_and_resize' is not supported"),
])
def test_resize_refused_forms(attrs: dict[str, Any], message: str) -> None:
    b = Builder(NEWEST_OPSET)
    model = b.model({"x": [1, 1, 2, 2]}, [b.op("Resize", ["x", "", b.floats([1, 1, 2, 2])], **attrs)])
    with pytest.raises(ModelImportError, match=message):
        import_and_simplify(model)


def test_split_sizes_must_cut_the_axis() -> None:
    b = Builder(NEWEST_OPSET)
    b.nodes.append(onnx.helper.make_node("Split", ["x", b.ints([1, 1])], ["y0", "y1"], axis=0))
    model = b.model({"x": [3, 2]}, ["y0", "y1"])
    message = r"split sizes \(1, 1\) do not cut axis 0 \(3\) into 2 outputs"
    with pytest.raises(ModelImportError, match=message):
        import_and_simplify(model)



def test_conv_transpose_refusals() -> None:
    b = Builder(NEWEST_OPSET)
    y = b.op("ConvTranspose", ["x", b.weight("w", [2, 2, 3, 3])], kernel_shape=[2, 2])
    with pytest.raises(ModelImportError, match=r"kernel_shape \(2, 2\) differs from the weight's \(3, 3\)"):
        import_and_simplify(b.model({"x": [1, 2, 4, 4]}, [y]))
    b = Builder(NEWEST_OPSET)
    y = b.op("ConvTranspose", ["x", b.weight("w", [2, 2, 3, 3])], strides=[2])
    with pytest.raises(ModelImportError, match=r"strides \(2,\), dilations \(1, 1\), output_padding \(0, 0\) "
                       r"do not fit kernel \(3, 3\)"):
        import_and_simplify(b.model({"x": [1, 2, 4, 4]}, [y]))


@pytest.mark.parametrize(("inputs", "attrs", "message"), [
    (["x", "", "", "SIZES"], {"axes": [2]}, r"sizes \(1, 1, 4, 4\) do not fit axes \(2,\)"),
    (["x", "", "SCALES"], {}, r"scales \[1.0, 1.0, 2.0\] do not fit axes \(0, 1, 2, 3\)"),
    (["x", "", "", ""], {}, "needs scales or sizes"),
])
def test_resize_parameter_refusals(inputs: list[str], attrs: dict[str, Any], message: str) -> None:
    b = Builder(NEWEST_OPSET)
    names = {"SIZES": b.ints([1, 1, 4, 4]), "SCALES": b.floats([1, 1, 2])}
    y = b.op("Resize", [names.get(i, i) for i in inputs], **attrs)
    model = b.model({"x": [1, 1, 2, 2]}, [y])
    with pytest.raises(ModelImportError, match=message):
        import_and_simplify(model)
