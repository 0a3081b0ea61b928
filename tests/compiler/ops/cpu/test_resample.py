"""Nearest upsampling by integer factors and PRelu on the host, bit for bit as their numpy
references and as the graph interpreter's Resize and PRelu; and which Resize nodes the host
runs natively (the others stay in the interpreter)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph.builder import append
from compiler.graph.ir import Graph
from compiler.graph.opdefs import OPS, make_attrs
from compiler.graph.opdefs.base import Attrs
from compiler.ops.cpu import PRelu, ResizeNearest
from compiler.runtime.cpu import host_spec
from compiler.runtime.cpu_model import CpuModel
from tests.compiler.ops.cpu.util import SIZES, assert_exact, run


def _resize_attrs(shape: tuple[int, ...], factors: tuple[int, ...], coord: str, nearest: str) -> Attrs:
    sizes = tuple(n * f for n, f in zip(shape, factors, strict=True))
    return make_attrs("Resize", {"mode": "nearest", "coordinate_transformation_mode": coord,
                                 "nearest_mode": nearest, "sizes": sizes,
                                 "scales": tuple(float(f) for f in factors)})


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.lists(SIZES, min_size=2, max_size=4), st.lists(st.integers(1, 3), min_size=4, max_size=4),
       st.integers(0, 99))
def test_resize_nearest_equals_the_interpreter(shape: list[int], factors: list[int], seed: int) -> None:
    shape_t, factors_t = tuple(shape), tuple(factors[: len(shape)])
    op = ResizeNearest(shape_t, factors_t)
    assert_exact(op, seed)
    x = op.random_inputs(seed)[0]
    (want,) = OPS["Resize"].evaluate([x], _resize_attrs(shape_t, factors_t, "asymmetric", "floor"))
    np.testing.assert_array_equal(run(op, inputs=[x])[0], want)


@pytest.mark.parametrize("slope_shape", [(1,), (3, 1, 1), (5,), (2, 3, 4, 5)])
def test_prelu_equals_the_interpreter(slope_shape: tuple[int, ...]) -> None:
    op = PRelu((2, 3, 4, 5), slope_shape)
    x, slope = op.random_inputs(0)
    got, ref = run(op, inputs=[x, slope])
    (want,) = OPS["PRelu"].evaluate([x, slope], {})
    assert np.array_equal(got, ref) and np.array_equal(got, want)


def test_parameters_are_checked() -> None:
    with pytest.raises(ValueError, match=r"resize_nearest: factors \(2,\) must be one positive int per axis"):
        ResizeNearest((2, 3), (2,))
    with pytest.raises(ValueError, match=r"prelu: slope \(4,\) does not broadcast to \(2, 3\)"):
        PRelu((2, 3), (4,))


def _resize_graph(coord: str, nearest: str, factors: tuple[int, ...]) -> Graph:
    g = Graph()
    g.add_input("x", (1, 2, 3, 4), "float32")
    attrs = _resize_attrs((1, 2, 3, 4), factors, coord, nearest)
    append(g, "Resize", ["x"], ["y"], attrs, "resize")
    g.outputs = ["y"]
    return g


@pytest.mark.parametrize(("coord", "nearest", "factors", "native"), [
    ("asymmetric", "floor", (1, 1, 2, 2), True),
    ("half_pixel", "round_prefer_floor", (1, 1, 2, 3), True),   # the same indices for integer factors
    ("align_corners", "round_prefer_floor", (1, 1, 2, 2), True),  # here too (3 -> 6, 4 -> 8)
    ("asymmetric", "ceil", (1, 1, 2, 2), False),  # ceil(i / 2): other indices, the interpreter
])
def test_which_resize_runs_natively(coord: str, nearest: str, factors: tuple[int, ...],
                                    native: bool) -> None:
    graph = _resize_graph(coord, nearest, factors)
    assert (host_spec(graph, graph.nodes[0]) is not None) == native
    model = CpuModel.compile(graph)
    assert model.steps[0].where == ("host" if native else "host-numpy")
    x = {"x": np.random.default_rng(0).normal(size=(1, 2, 3, 4)).astype(np.float32)}
    (want,) = OPS["Resize"].evaluate([x["x"]], graph.nodes[0].attrs)
    np.testing.assert_array_equal(model.run(x).outputs["y"], want)
