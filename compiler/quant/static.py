"""Static int8 quantization of a float graph with calibration data.

    quantize(graph, calibration_inputs, method="...") -> quantized graph (verified)

The graph is cleaned first (`simplify`: batch norms folded, dense layers canonical), then run
on the calibration inputs; each activation's scale is amax / 127 with amax from the chosen
calibrator (compiler.quant.calibrate). Graph outputs get no scale, so the op that computes one
(a classifier's last dense layer) runs in float on the dequantized features: int8 logits
lose the top-1 class to ties and saturation (ResNet-18's fp32 logits rounded to int8 at their
calibrated min/max scale keep the top-1 class on 83 of 100 inputs). Weights are
quantized per output channel (max |w| / 127), biases to int32 at in_scale * w_scale, and the
requantization multipliers follow compiler.quant.requant's rule with the calibration bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from compiler.graph.ir import Graph
from compiler.graph.opdefs.qops import INT8_MAX
from compiler.graph.passes import simplify
from compiler.quant.calibrate import CALIBRATORS, Calibration, collect
from compiler.quant.errors import QuantizationError
from compiler.quant.lowering import QuantParams, lower

DEFAULT_METHOD = "percentile"


def quantize(
    graph: Graph,
    calibration_inputs: Iterable[Mapping[str, np.ndarray]],
    method: str = DEFAULT_METHOD,
    overrides: Mapping[str, str] | None = None,
) -> Graph:
    """The int8 graph of float `graph`, calibrated on `calibration_inputs` (dicts of graph inputs).

    `method` names the calibrator for every activation ("minmax", "percentile", "entropy",
    "mse"); `overrides` maps value names to another calibrator for those values.
    """
    g = simplify(graph)
    calibration = collect(g, calibration_inputs)
    return lower(
        g, QuantParams(activation_scales(g, calibration, method, overrides), calibration=calibration)
    )


def activation_scales(
    graph: Graph, calibration: Calibration, method: str, overrides: Mapping[str, str] | None = None
) -> dict[str, float]:
    """Scale (float32-exact) of every calibrated float activation of `graph` but its outputs."""
    overrides = dict(overrides or {})
    for name, m in [("*", method), *overrides.items()]:
        if m not in CALIBRATORS:
            raise QuantizationError(
                f"unknown calibration method {m!r} for {name}; known: {', '.join(CALIBRATORS)}"
            )
    unknown = sorted(set(overrides) - set(calibration.stats))
    if unknown:
        raise QuantizationError(f"override for {unknown[0]}, which is not a calibrated float activation")
    scales = {}
    for name in calibration.stats:
        if name in graph.outputs:
            continue
        amax = calibration.amax(name, overrides.get(name, method))
        scales[name] = float(np.float32((amax if amax > 0 else 1.0) / INT8_MAX))
    return scales
