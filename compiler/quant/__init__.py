"""Int8 quantization: calibration, static quantization of float graphs, QDQ import.

    quantize(graph, calibration_inputs, method="percentile")     -> quantized Graph
    import_qdq(graph, calibration_inputs=None, strict=True)        -> quantized Graph
    accuracy.agreement / step_agreement / classification_accuracy  -> figures against references
    check.wrap_margins(graph, inputs)                              -> how close each requant is to wrapping

The first two produce the quantized-graph contract of compiler.graph.opdefs.qops (QConv, QGemm, QAdd,
QGlobalAvgPool, Quantize, Dequantize; MaxPool/Relu/Flatten/Reshape on int8), which
`compiler.graph.run_graph` evaluates exactly: that is the workbench's integer reference.
"""

from compiler.quant.calibrate import CALIBRATORS, Calibration, collect
from compiler.quant.errors import QuantizationError
from compiler.quant.plan import Coding, Plan, codings
from compiler.quant.qdq import import_qdq, strip_qdq
from compiler.quant.rewrite import rewrite
from compiler.quant.static import DEFAULT_METHOD, activation_scales, quantize

__all__ = [
    "CALIBRATORS",
    "DEFAULT_METHOD",
    "Calibration",
    "Coding",
    "Plan",
    "QuantizationError",
    "activation_scales",
    "codings",
    "collect",
    "import_qdq",
    "quantize",
    "rewrite",
    "strip_qdq",
]
