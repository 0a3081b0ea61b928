"""GPTQ rounding of weights: the rows a layer's weights multiply, the rounding itself against a
textbook implementation and round-to-nearest, and its use by quantize."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, Node, const, run_graph
from compiler.graph.builder import append
from compiler.quant import QuantizationError, quantize, rounding
from compiler.quant.requant import quantize_weight
from compiler.quant.rounding import _patches, _picks, gptq_levels, layer_rows, moment_plan
from tests.compiler.quant.graphs import inputs, small_cnn


def _textbook_gptq(w: np.ndarray, h: np.ndarray, scales: np.ndarray, damping: float = 0.01) -> np.ndarray:
    """GPTQ as Frantar et al. write it (one group): columns by decreasing diagonal, U the upper
    Cholesky factor of H^-1, each column's scaled error subtracted along U's row."""
    h = h + damping * np.mean(np.diag(h)) * np.eye(len(h))
    order = np.argsort(-np.diag(h), kind="stable")
    w, h = w[:, order].copy(), h[np.ix_(order, order)]
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    q = np.zeros_like(w)
    for i in range(w.shape[1]):
        q[:, i] = np.clip(np.rint(w[:, i] / scales), -127, 127)
        err = (w[:, i] - q[:, i] * scales) / u[i, i]
        w[:, i + 1 :] -= np.outer(err, u[i, i + 1 :])
    out = np.empty_like(q)
    out[:, order] = q
    return out


def _correlated_inputs(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """Inputs with correlated columns and nonzero means, as a ReLU layer's are."""
    return np.maximum(rng.standard_normal((rows, n)) @ rng.standard_normal((n, n)) + 0.5, 0.0)


@pytest.mark.parametrize("n", [1, 9, 130, 300])  # one column, a 3x3 kernel, past one block (128)
def test_gptq_levels_are_the_textbook_algorithms(n: int) -> None:
    rng = np.random.default_rng(n)
    x = _correlated_inputs(rng, 4 * n + 8, n)
    w = rng.standard_normal((5, n))
    scales = np.abs(w).max(axis=1) / 127
    levels = gptq_levels(w[None], (x.T @ x / len(x))[None], scales[None])
    assert levels.dtype == np.int8
    np.testing.assert_array_equal(levels[0], _textbook_gptq(w, x.T @ x / len(x), scales))


def _plain_round_columns(w: np.ndarray, v: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """rounding._round_columns as first written (on strided columns): the reference that the
    buffered loop must match bit for bit."""
    v = v / np.einsum("gjj->gj", v)[:, None, :]
    target = w.copy()
    levels = np.empty_like(w)
    n = w.shape[2]
    for start in range(0, n, rounding.BLOCK):
        stop = min(start + rounding.BLOCK, n)
        for j in range(start, stop):
            levels[:, :, j] = np.clip(np.rint(target[:, :, j] / scales[:, :, 0]), -127, 127)
            error = w[:, :, j] - levels[:, :, j] * scales[:, :, 0]
            target[:, :, j + 1 : stop] += error[:, :, None] * v[:, None, j, j + 1 : stop]
        errors = w[:, :, start:stop] - levels[:, :, start:stop] * scales
        target[:, :, stop:] += errors @ v[:, start:stop, stop:]
    return levels


@pytest.mark.parametrize(("groups", "k", "n"),
                         [(1, 7, 300), (3, 5, 129), (40, 1, 25), (2, 16, 128), (1, 3, 1)])
def test_the_buffered_column_loop_is_the_plain_loop_bit_for_bit(groups: int, k: int, n: int) -> None:
    rng = np.random.default_rng(groups * 1000 + n)
    x = _correlated_inputs(rng, 2 * n + 8, n)
    h = np.stack([x.T @ x / len(x) + 0.01 * np.eye(n) * (g + 1) for g in range(groups)])
    v = rounding._upper_factor(h)
    w = rng.standard_normal((groups, k, n))
    scales = np.abs(w).max(axis=2, keepdims=True) / 127
    scales[0, 0] *= 0.25  # a row whose levels saturate at +-127
    got = rounding._round_columns(w, v, scales)
    assert got.flags.c_contiguous and got.shape == w.shape
    np.testing.assert_array_equal(got, _plain_round_columns(w, v, scales))
    assert np.abs(got[0, 0]).max() == 127


def test_uncorrelated_inputs_make_gptq_round_to_nearest() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 4, 20))
    scales = np.abs(w).max(axis=2) / 127
    moment = np.stack([np.diag(rng.uniform(0.5, 2.0, 20)) for _ in range(2)])
    np.testing.assert_array_equal(gptq_levels(w, moment, scales), np.rint(w / scales[:, :, None]))


def test_gptq_has_less_output_error_than_nearest_on_new_inputs_of_the_same_kind() -> None:
    rng = np.random.default_rng(1)
    mixing = rng.standard_normal((64, 64))
    x_cal, x_new = (np.maximum(rng.standard_normal((r, 64)) @ mixing + 0.5, 0.0) for r in (500, 2000))
    w = rng.standard_normal((16, 64))
    nearest = quantize_weight(w)
    gptq = quantize_weight(w, moment=(x_cal.T @ x_cal / len(x_cal))[None])
    np.testing.assert_array_equal(gptq.scales, nearest.scales)  # same levels' scales: same integer ops

    def error(q: np.ndarray) -> float:
        return float(np.mean(((w - q * nearest.scales[:, None]) @ x_new.T) ** 2))

    assert error(gptq.data) < 0.7 * error(nearest.data)  # measured: 0.53 times
    assert np.abs(gptq.data.astype(np.int64) - nearest.data).max() <= 3  # neighbouring levels


def test_a_column_never_seen_nonzero_is_rounded_to_nearest() -> None:
    rng = np.random.default_rng(2)
    x = _correlated_inputs(rng, 200, 8)
    x[:, 3] = 0.0
    w = rng.standard_normal((4, 8))
    scales = np.abs(w).max(axis=1) / 127
    levels = gptq_levels(w[None], (x.T @ x / len(x))[None], scales[None])[0]
    np.testing.assert_array_equal(levels[:, 3], np.rint(w[:, 3] / scales))


def test_quantize_weight_rejects_a_moment_of_another_shape() -> None:
    with pytest.raises(QuantizationError, match=r"^input moment \(1, 3, 3\) does not fit a weight of 4 x 2$"):
        quantize_weight(np.ones((4, 2)), moment=np.ones((1, 3, 3)))


def _conv_graph(channels: int, out_channels: int, group: int, stride: int, pads: tuple[int, ...]) -> Graph:
    rng = np.random.default_rng(channels + group)
    g = Graph()
    g.add_input("x", (2, channels, 7, 6), "float32")
    w = rng.standard_normal((out_channels, channels // group, 3, 2)).astype(np.float32)
    g.add_value(const("w", w))
    attrs = {"strides": (stride, stride), "pads": pads, "dilations": (1, 1), "group": group}
    append(g, "Conv", ["x", "w"], ["y"], attrs)
    g.outputs = ["y"]
    return g


@pytest.mark.parametrize(
    "channels,out_channels,group,stride,pads",
    [(3, 4, 1, 1, (1, 1, 1, 1)), (4, 4, 4, 2, (1, 0, 2, 1)), (6, 4, 2, 2, (0, 1, 1, 0))],
    ids=["dense", "depthwise", "grouped"],
)
def test_conv_rows_times_the_weights_are_the_convolution(
    channels: int, out_channels: int, group: int, stride: int, pads: tuple[int, ...]
) -> None:
    g = _conv_graph(channels, out_channels, group, stride, pads)
    x = inputs(g, 1, seed=3)[0]
    rows = layer_rows(g, g.nodes[0], x["x"])
    assert rows is not None and rows.dtype == np.float32
    y = run_graph(g, x)["y"]  # [n, out, oh, ow]
    w = g.const_data("w").reshape(group, out_channels // group, -1)
    products = rows @ np.swapaxes(w, 1, 2)  # [group, n * oh * ow, out / group]
    expected = np.moveaxis(y, 1, -1).reshape(-1, group, out_channels // group).swapaxes(0, 1)
    np.testing.assert_allclose(products, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("keep", [1, 17, 97])
def test_sampled_rows_are_distinct_rows_in_order(keep: int) -> None:
    g = _conv_graph(3, 4, 1, 1, (1, 1, 1, 1))  # 2 images x 7 x 7 = 98 rows of 18
    x = inputs(g, 1, seed=3)[0]["x"]
    full = layer_rows(g, g.nodes[0], x)
    sampled = layer_rows(g, g.nodes[0], x, keep, np.random.default_rng(1))
    assert full is not None and sampled is not None and sampled.shape == (1, keep, 18)
    index = [int(np.flatnonzero((full[0] == row).all(axis=1))[0]) for row in sampled[0]]
    assert index == sorted(set(index))  # distinct rows of the full set, in its order
    assert layer_rows(g, g.nodes[0], x, 98, np.random.default_rng(1)).shape == (1, 98, 18)


def test_moment_plan_samples_rows_and_leaves_out_layers_with_too_few(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _conv_graph(3, 4, 1, 1, (1, 1, 1, 1))  # 98 rows per input, 18 columns
    assert moment_plan(g, {"Conv"}, 1) == {"w": 98}  # all rows: fewer than SAMPLED_ROWS_MIN
    assert moment_plan(g, {"MatMul"}, 1) == {}
    monkeypatch.setattr(rounding, "SAMPLED_ROWS_MIN", 0)
    monkeypatch.setattr(rounding, "SAMPLED_ROWS_PER_COLUMN", 2)  # 36 rows over all inputs
    assert moment_plan(g, {"Conv"}, 1) == {"w": 36}
    assert moment_plan(g, {"Conv"}, 5) == {"w": 8}  # 36 / 5 rounded up
    monkeypatch.setattr(rounding, "MIN_ROWS_PER_COLUMN", 6)  # 108 rows needed
    assert moment_plan(g, {"Conv"}, 1) == {}
    assert moment_plan(g, {"Conv"}, 2) == {"w": 18}


def test_rows_of_dense_layers_and_of_other_nodes() -> None:
    g = Graph()
    g.add_input("x", (2, 3, 4), "float32")
    g.add_value(const("w", np.ones((4, 5), np.float32)))
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    matmul = Node("MatMul", ["x", "w"], ["y"], {}, "m")
    rows = layer_rows(g, matmul, x)
    assert rows is not None
    np.testing.assert_array_equal(rows, x.reshape(1, 6, 4))
    assert layer_rows(g, Node("Relu", ["x"], ["r"], {}, "r"), x) is None
    assert layer_rows(g, Node("MatMul", ["x", "x"], ["s"], {}, "s"), x) is None  # no constant weight


def _int_weights(graph: Graph, calibration: list, rounding: str) -> dict[str, np.ndarray]:
    q = quantize(graph, calibration, rounding=rounding)
    return {n.outputs[0]: q.const_data(n.inputs[1]) for n in q.nodes if n.op in ("QConv", "QGemm")}


def _two_dense_layers() -> Graph:
    """x[4, 16] -> Gemm + Relu -> MatMul -> y[4, 8] (the MatMul's output is the graph's, so float)."""
    rng = np.random.default_rng(4)
    g = Graph()
    g.add_input("x", (4, 16), "float32")
    g.add_value(const("w1", rng.standard_normal((24, 16)).astype(np.float32)))
    g.add_value(const("w2", rng.standard_normal((24, 8)).astype(np.float32)))
    append(g, "Gemm", ["x", "w1"], ["h"], {"transB": 1})
    append(g, "Relu", ["h"], ["r"])
    append(g, "MatMul", ["r", "w2"], ["y"])
    g.outputs = ["y"]
    return g


def test_gptq_rounds_the_convolutions_and_with_gptq_all_the_dense_layers_too() -> None:
    cnn, dense = small_cnn(), _two_dense_layers()
    for graph, method, changed in [(cnn, "gptq", True), (dense, "gptq", False), (dense, "gptq-all", True)]:
        calibration = inputs(graph, 16, seed=1)
        nearest, rounded = (_int_weights(graph, calibration, r) for r in ("nearest", method))
        assert nearest.keys() == rounded.keys() and nearest
        for name, w in nearest.items():
            assert np.abs(w.astype(np.int64) - rounded[name]).max() <= 3  # neighbouring levels
        assert any(not np.array_equal(w, rounded[k]) for k, w in nearest.items()) == changed, method


def test_unknown_rounding() -> None:
    with pytest.raises(
        QuantizationError, match=r"^unknown weight rounding 'up'; known: gptq, gptq-all, nearest$"
    ):
        quantize(small_cnn(), inputs(small_cnn(), 1, seed=1), rounding="up")


@pytest.mark.parametrize("keep", [None, 5])
def test_depthwise_patches_are_each_rows_taps_by_index(keep: int | None) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 7, 6), dtype=np.float32).transpose(0, 3, 1, 2)  # NHWC in memory
    pads, strides, kernel = (1, 2, 0, 1), (2, 1), (3, 2)
    rows = _patches(x, kernel, strides, pads, 6, keep, np.random.default_rng(0))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 1)))
    oh, ow = (padded.shape[2] - 3) // 2 + 1, padded.shape[3] - 2 + 1
    picks = _picks(2 * oh * ow, keep, np.random.default_rng(0))
    assert rows.shape == (6, picks.size, 6) and rows.flags.c_contiguous
    for r, pick in enumerate(picks):
        image, y, xs = np.unravel_index(pick, (2, oh, ow))
        for t, (ky, kx) in enumerate(np.ndindex(*kernel)):
            np.testing.assert_array_equal(rows[:, r, t], padded[image, :, y * 2 + ky, xs + kx])
