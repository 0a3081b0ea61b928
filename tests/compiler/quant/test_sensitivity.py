"""Layer sensitivity: each figure equals the rms error of the graph that `quantize` builds with
that layer kept float, computed here independently; the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph, run_graph
from compiler.graph.ir import Node
from compiler.quant import QuantizationError, quantize
from compiler.quant.fuse_residual import fuse_residual_adds
from compiler.quant.sensitivity import float_layer_gains
from compiler.quant.static import calibrate
from tests.compiler.quant.graphs import inputs, small_cnn


def _rms(g: Graph, q: Graph, xs: list[dict[str, np.ndarray]]) -> float:
    errors = [run_graph(q, x)["logits"].astype(np.float64) - run_graph(g, x)["logits"] for x in xs]
    return float(np.sqrt(np.mean(np.square(errors))))


def test_each_layer_figure_is_the_error_with_that_layer_float() -> None:
    g = small_cnn()
    calibration, xs = inputs(g, 4, 1), inputs(g, 6, 2)
    references = [run_graph(g, x)["logits"] for x in xs]
    def first(graph: Graph, node: Node) -> bool:  # kept float, as a stem
        return node.outputs[0] == "c1"

    result = float_layer_gains(calibrate(g, calibration), xs, references, keep_float=first)

    def quantized(*kept: str) -> Graph:
        def keep(graph: Graph, node: Node) -> bool:
            return node.outputs[0] in kept

        return fuse_residual_adds(quantize(g, calibration, keep_float=keep))

    assert result.baseline_rms_err == pytest.approx(_rms(g, quantized("c1"), xs), rel=1e-9)
    # c1 is kept; the classifier, whose output is the graph's, stays float by the quantizer's rules
    assert result.float_already == ["c1", "logits"]
    assert [(e.name, e.layers) for e in result.layers] == [("c2", ("c2",)), ("c3", ("c3",))]
    for entry in result.layers:
        assert entry.rms_err == pytest.approx(_rms(g, quantized("c1", entry.name), xs), rel=1e-9)
        assert result.gain(entry) == result.baseline_rms_err - entry.rms_err
    assert any(result.gain(e) > 0 for e in result.layers)  # a float layer takes its error away
    # a group's layers float together; layers the baseline leaves float drop out of it
    grouped = float_layer_gains(calibrate(g, calibration), xs, references, keep_float=first,
                                groups={"both": {"c1", "c2", "c3"}, "stem": {"c1"}})
    assert [(e.name, e.layers) for e in grouped.layers] == [("both", ("c2", "c3"))]
    assert grouped.layers[0].rms_err == pytest.approx(_rms(g, quantized("c1", "c2", "c3"), xs), rel=1e-9)


def test_candidates_and_progress() -> None:
    g = small_cnn()
    calibrated = calibrate(g, inputs(g, 4, 1))
    xs = inputs(g, 2, 2)
    references = [run_graph(g, x)["logits"] for x in xs]
    calls: list[tuple[int, int]] = []
    result = float_layer_gains(calibrated, xs, references, layers={"c3"}, progress=lambda *a: calls.append(a))
    assert [e.name for e in result.layers] == ["c3"] and calls == [(1, 2), (2, 2)]


def test_refusals() -> None:
    g = small_cnn()
    calibrated = calibrate(g, inputs(g, 2, 1))
    xs = inputs(g, 2, 2)
    references = [run_graph(g, x)["logits"] for x in xs]
    with pytest.raises(QuantizationError, match="^nope is no convolution or dense layer of small_cnn$"):
        float_layer_gains(calibrated, xs, references, layers={"nope", "c2"})
    with pytest.raises(QuantizationError, match="^gone is no convolution or dense layer of small_cnn$"):
        float_layer_gains(calibrated, xs, references, groups={"g": {"c2", "gone"}})
    with pytest.raises(QuantizationError, match="^need one reference per input, at least one: 1 for 2$"):
        float_layer_gains(calibrated, xs, references[:1])
