"""The shape rules of opdefs/vision.py and opdefs/logic.py: each refusal's message, and the
evaluators on hand-computed cases (their agreement with onnxruntime is in
tests/compiler/frontend/test_convert_vision.py)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import GraphError
from compiler.graph.ir import Value
from compiler.graph.opdefs import OPS, make_attrs

F = "float32"


def _v(shape: tuple[int, ...], dtype: str = F) -> Value:
    return Value("v", shape, dtype)


_CT = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "output_padding": (0, 0)}
_RS = {"sizes": (1, 1, 4, 4), "scales": (1.0, 1.0, 2.0, 2.0)}


@pytest.mark.parametrize(("op", "values", "attrs", "message"), [
    ("ConvTranspose", [_v((1, 4, 3)), _v((4, 2, 3, 3))], _CT,
     r"input \(1, 4, 3\) and weight \(4, 2, 3, 3\) ranks"),
    ("ConvTranspose", [_v((1, 4, 3, 3)), _v((3, 2, 3, 3))], _CT, "does not fit 4 input channels in 1 groups"),
    ("ConvTranspose", [_v((1, 4, 3, 3)), _v((4, 2, 3, 3)), _v((3,))], _CT, r"bias \(3,\) is not \(2,\)"),
    ("ConvTranspose", [_v((1, 4, 3, 3)), _v((4, 2, 3, 3))], {**_CT, "strides": (1,)},
     "for 2 spatial dims"),
    ("ConvTranspose", [_v((1, 4, 3, 3)), _v((4, 2, 3, 3))], {**_CT, "strides": (0, 1)}, "must be positive"),
    ("ConvTranspose", [_v((1, 4, 1, 1)), _v((4, 2, 1, 1))], {**_CT, "pads": (1, 0, 0, 0)},
     r"output \(0, 1\) is empty"),
    ("Resize", [_v((1, 1, 2, 2))], {**_RS, "sizes": (4, 4)}, "do not fit rank 4"),
    ("Resize", [_v((1, 1, 2, 2))], {**_RS, "mode": "cubic"}, "mode 'cubic' is not nearest or linear"),
    ("Resize", [_v((1, 1, 2, 2))], {**_RS, "coordinate_transformation_mode": "tf_crop_and_resize"},
     "coordinate_transformation_mode 'tf_crop_and_resize' is not supported"),
    ("Resize", [_v((1, 1, 2, 2))], {**_RS, "nearest_mode": "up"}, "nearest_mode 'up' unknown"),
    ("LRN", [_v((4, 3))], {"size": 3}, r"LRN needs NC\* data, not \(4, 3\)"),
    ("LRN", [_v((1, 4, 3))], {"size": 0}, "size 0 must be positive"),
    ("InstanceNormalization", [_v((1, 4, 3)), _v((3,)), _v((4,))], {},
     r"scale \(3,\) and bias \(4,\) must be \(4,\)"),
    ("PRelu", [_v((1, 4, 3)), _v((2, 1, 1))], {}, r"slope \(2, 1, 1\) does not broadcast to \(1, 4, 3\)"),
    ("Where", [_v((2,), "int32"), _v((2,)), _v((2,))], {}, "Where's condition is int32, not bool"),
    ("Tile", [_v((2, 3))], {"repeats": (2,)}, r"repeats \(2,\) do not fit rank 2"),
    ("ArgMax", [_v((2, 3))], {"axis": 2}, "axis 2 is out of range for rank 2"),
    ("And", [_v((2,), "bool"), _v((2,), "int8")], {}, "inputs have different dtypes"),
])
def test_refusals(op: str, values: list[Value], attrs: dict[str, object], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        OPS[op].infer(values, make_attrs(op, attrs))


def test_conv_transpose_by_hand() -> None:
    """1-D, stride 2: each input scatters its kernel; overlaps add; the pads crop."""
    x = np.array([[[1.0, 2.0]]], np.float32)
    w = np.array([[[1.0, 10.0, 100.0]]], np.float32)
    attrs = make_attrs("ConvTranspose", {"strides": (2,), "pads": (0, 0), "dilations": (1,),
                                         "output_padding": (0,)})
    (y,) = OPS["ConvTranspose"].evaluate([x, w], attrs)
    np.testing.assert_array_equal(y, [[[1, 10, 102, 20, 200]]])
    cropped = make_attrs("ConvTranspose", {**attrs, "pads": (1, 1)})
    np.testing.assert_array_equal(OPS["ConvTranspose"].evaluate([x, w], cropped)[0], [[[10, 102, 20]]])


def test_lrn_by_hand() -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32).reshape(1, 3, 1)
    (y,) = OPS["LRN"].evaluate([x], make_attrs("LRN", {"size": 3, "alpha": 3.0, "beta": 1.0, "bias": 1.0}))
    # channel c divides by 1 + (sum of squares of c-1..c+1): 1 + 5, 1 + 14, 1 + 13
    np.testing.assert_allclose(y.reshape(-1), [1 / 6, 2 / 15, 3 / 14], rtol=1e-6)


def test_resize_linear_align_corners_by_hand() -> None:
    x = np.array([0.0, 3.0], np.float32).reshape(1, 2)
    attrs = make_attrs("Resize", {"mode": "linear", "coordinate_transformation_mode": "align_corners",
                                  "sizes": (1, 4), "scales": (1.0, 2.0)})
    np.testing.assert_allclose(OPS["Resize"].evaluate([x], attrs)[0], [[0, 1, 2, 3]])


def test_arg_select_last_index() -> None:
    x = np.array([[3, 1, 3]], np.int32)
    for last, want in ((0, 0), (1, 2)):
        attrs = make_attrs("ArgMax", {"axis": 1, "keepdims": 0, "select_last_index": last})
        assert OPS["ArgMax"].evaluate([x], attrs)[0].tolist() == [want]
