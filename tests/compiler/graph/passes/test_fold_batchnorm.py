"""Batch-norm folding into Conv/Gemm, and the Mul + Add form elsewhere."""

from __future__ import annotations

import numpy as np

from compiler.graph import Graph
from compiler.graph.passes import fold_batchnorm
from tests.compiler.graph.passes.graphs import check_pass, make

RNG = np.random.default_rng(1)
CONV = {"strides": (1, 1), "pads": (1, 1, 1, 1), "dilations": (1, 1)}


def _bn_params(c: int) -> dict[str, np.ndarray]:
    return {
        "gamma": RNG.uniform(0.5, 1.5, c).astype(np.float32),
        "beta": RNG.normal(size=c).astype(np.float32),
        "mean": RNG.normal(size=c).astype(np.float32),
        "var": RNG.uniform(0.5, 2.0, c).astype(np.float32),
    }


def _expected_affine(p: dict[str, np.ndarray], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """BN(x) = x * s + t, written out independently of the pass."""
    s = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + eps)
    return s, p["beta"] - p["mean"] * s


def _conv_bn(group: int = 1, bias: bool = True) -> tuple[Graph, dict[str, np.ndarray]]:
    p = _bn_params(6)
    consts = {"w": RNG.normal(size=(6, 6 // group, 3, 3)).astype(np.float32), **p}
    if bias:
        consts["b"] = RNG.normal(size=6).astype(np.float32)
    conv_in = ["x", "w", "b"] if bias else ["x", "w"]
    nodes = [
        ("Conv", conv_in, "c", {**CONV, "group": group}),
        ("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], "y", {"epsilon": 1e-3}),
    ]
    return make({"x": (1, 6, 5, 5)}, consts, nodes, ["y"]), consts


def test_conv_bn_folds_into_weights_and_bias() -> None:
    g, c = _conv_bn()
    out = check_pass(
        fold_batchnorm,
        g,
        """\
graph main(x: float32[1,6,5,5]) -> (y)
  const w: float32[6,6,3,3]
  const b: float32[6]
  y: float32[1,6,5,5] = Conv(x, w, b) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]""",
    )
    s, t = _expected_affine(c, 1e-3)
    np.testing.assert_allclose(out.values["w"].data, c["w"] * s[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(out.values["b"].data, c["b"] * s + t, rtol=1e-5, atol=1e-6)


def test_depthwise_conv_without_bias() -> None:
    g, c = _conv_bn(group=6, bias=False)
    out = check_pass(
        fold_batchnorm,
        g,
        """\
graph main(x: float32[1,6,5,5]) -> (y)
  const w: float32[6,1,3,3]
  const c.bias: float32[6]
  y: float32[1,6,5,5] = Conv(x, w, c.bias) dilations=[1,1] group=6 pads=[1,1,1,1] strides=[1,1]""",
    )
    _, t = _expected_affine(c, 1e-3)
    np.testing.assert_allclose(out.values["c.bias"].data, t, rtol=1e-5, atol=1e-6)


def test_conv_output_read_elsewhere_keeps_the_conv() -> None:
    g, _ = _conv_bn()
    g.outputs.append("c")
    check_pass(
        fold_batchnorm,
        g,
        """\
graph main(x: float32[1,6,5,5]) -> (y, c)
  const w: float32[6,6,3,3]
  const b: float32[6]
  const y.scale: float32[6,1,1]
  const y.shift: float32[6,1,1]
  c: float32[1,6,5,5] = Conv(x, w, b) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]
  y/scaled: float32[1,6,5,5] = Mul(c, y.scale)
  y: float32[1,6,5,5] = Add(y/scaled, y.shift)""",
    )


def test_gemm_bn() -> None:
    p = _bn_params(3)
    consts = {
        "w": RNG.normal(size=(3, 4)).astype(np.float32),
        "b": RNG.normal(size=3).astype(np.float32),
        **p,
    }
    nodes = [
        ("Gemm", ["x", "w", "b"], "g", {"transB": 1}),
        ("BatchNormalization", ["g", "gamma", "beta", "mean", "var"], "y", {}),
    ]
    out = check_pass(
        fold_batchnorm,
        make({"x": (2, 4)}, consts, nodes, ["y"]),
        """\
graph main(x: float32[2,4]) -> (y)
  const w: float32[3,4]
  const b: float32[3] = [*, *, *]
  y: float32[2,3] = Gemm(x, w, b) alpha=1.0 beta=1.0 transA=0 transB=1""".replace(
            "[*, *, *]", _fmt(consts, p)
        ),
    )
    s, _ = _expected_affine(p, 1e-5)
    np.testing.assert_allclose(out.values["w"].data, consts["w"] * s[:, None], rtol=1e-6)


def _fmt(consts: dict[str, np.ndarray], p: dict[str, np.ndarray]) -> str:
    s, t = _expected_affine(p, 1e-5)
    return "[" + ", ".join(str(np.float32(v)) for v in (consts["b"] * s + t).astype(np.float32)) + "]"


def test_unfolded_bn_as_mul_add_after_conv() -> None:
    scale = RNG.uniform(0.5, 1.5, (6, 1, 1)).astype(np.float32)
    shift = RNG.normal(size=(1, 6, 1, 1)).astype(np.float32)
    w = RNG.normal(size=(6, 2, 3, 3)).astype(np.float32)
    nodes = [
        ("Conv", ["x", "w"], "c", CONV),
        ("Mul", ["scale", "c"], "m", {}),
        ("Add", ["m", "shift"], "y", {}),
    ]
    out = check_pass(
        fold_batchnorm,
        make({"x": (1, 2, 4, 4)}, {"w": w, "scale": scale, "shift": shift}, nodes, ["y"]),
        """\
graph main(x: float32[1,2,4,4]) -> (y)
  const w: float32[6,2,3,3]
  const c.bias: float32[6]
  y: float32[1,6,4,4] = Conv(x, w, c.bias) dilations=[1,1] group=1 pads=[1,1,1,1] strides=[1,1]""",
    )
    np.testing.assert_allclose(out.values["c.bias"].data, shift.reshape(6), rtol=1e-6)


def test_standalone_bn_becomes_mul_add() -> None:
    p = _bn_params(5)
    nodes = [("Relu", ["x"], "r", {}), ("BatchNormalization", ["r", "gamma", "beta", "mean", "var"], "y", {})]
    out = check_pass(
        fold_batchnorm,
        make({"x": (2, 5, 4)}, p, nodes, ["y"]),
        """\
graph main(x: float32[2,5,4]) -> (y)
  const y.scale: float32[5,1]
  const y.shift: float32[5,1]
  r: float32[2,5,4] = Relu(x)
  y/scaled: float32[2,5,4] = Mul(r, y.scale)
  y: float32[2,5,4] = Add(y/scaled, y.shift)""",
    )
    s, t = _expected_affine(p, 1e-5)
    np.testing.assert_allclose(out.values["y.scale"].data.ravel(), s, rtol=1e-6)
    np.testing.assert_allclose(out.values["y.shift"].data.ravel(), t, rtol=1e-5, atol=1e-6)


def test_constants_that_are_not_per_channel_do_not_fold() -> None:
    spatial = RNG.normal(size=(4, 4)).astype(np.float32)  # broadcasts over H, W: not per channel
    w = RNG.normal(size=(6, 2, 3, 3)).astype(np.float32)
    g = make(
        {"x": (1, 2, 4, 4)},
        {"w": w, "s": spatial},
        [("Conv", ["x", "w"], "c", CONV), ("Add", ["c", "s"], "y", {})],
        ["y"],
    )
    assert [n.op for n in fold_batchnorm(g).nodes] == ["Conv", "Add"]
