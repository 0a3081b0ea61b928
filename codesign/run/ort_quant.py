"""onnxruntime's own int8 model of a float ONNX file: `quantize_static` in QDQ format, u8
activations and s8 weights (per tensor: onnxruntime's fast x86 path), MinMax calibration on the
same calibration inputs our quantizer uses (codesign.run.inputs.calibration_inputs), the vendor
reference the CPU target's int8 is compared with; a transformer's matrix products only (see
TRANSFORMER_OPS)."""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

Inputs = dict[str, np.ndarray]
_CACHE: dict[str, bytes] = {}


def ort_qdq(onnx_bytes: bytes, calibration: Sequence[Inputs]) -> bytes:
    """The QDQ model onnxruntime's quantizer writes for `onnx_bytes` from `calibration` (kept
    for the process: quantizing ResNet-18 takes seconds)."""
    from onnxruntime.quantization import CalibrationDataReader

    digest = hashlib.sha256(onnx_bytes)
    for feeds in calibration:
        for name in sorted(feeds):
            digest.update(name.encode() + np.ascontiguousarray(feeds[name]).tobytes())
    key = digest.hexdigest()
    if key in _CACHE:
        return _CACHE[key]

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.items: Iterator[Inputs] = iter(list(calibration))

        def get_next(self) -> Inputs | None:
            return next(self.items, None)

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process, printed on every call
    try:
        _CACHE[key] = _quantize(onnx_bytes, Reader())
    finally:
        root.setLevel(level)
    return _CACHE[key]


# A transformer (a Softmax in the graph) is quantized on its matrix products only, as
# onnxruntime's transformer guidance does: quantizing the attention mask's add and the residual
# adds to u8 loses the model (bert-tiny: mean cosine 0.64 against fp32 with every operator, 0.97
# with these).
TRANSFORMER_OPS = ["Conv", "MatMul", "Gemm"]


def _op_types(onnx_bytes: bytes) -> list[str] | None:
    """The operator kinds onnxruntime's quantizer may quantize (None: its default, all)."""
    import onnx

    model = onnx.load_from_string(onnx_bytes)
    return TRANSFORMER_OPS if any(n.op_type == "Softmax" for n in model.graph.node) else None


def _quantize(onnx_bytes: bytes, reader: object) -> bytes:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        src.write_bytes(onnx_bytes)
        quantize_static(str(src), str(out), reader, quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=False, calibrate_method=CalibrationMethod.MinMax,
                        op_types_to_quantize=_op_types(onnx_bytes))
        return out.read_bytes()


def vendor_session_options(threads: int) -> object:
    """onnxruntime as a vendor runs it: every graph optimisation (QDQ groups fused into its int8
    kernels), `threads` intra-op threads, one inter-op thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options
