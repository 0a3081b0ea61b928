"""correct_int8: the integer part exactly, the float tail within a stated tolerance."""

from __future__ import annotations

import numpy as np

from codesign.model_run import FLOAT_RTOL, matches_reference
from compiler.graph.builder import append
from compiler.graph.ir import Graph
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
