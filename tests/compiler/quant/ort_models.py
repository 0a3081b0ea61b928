"""Float ONNX models for the QDQ tests, and onnxruntime's static quantization of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The onnxruntime options that write our contract: symmetric int8 activations and weights,
# weights per output channel.
SYMMETRIC = {"ActivationSymmetric": True, "WeightSymmetric": True}


def small_resnet(seed: int = 0) -> onnx.ModelProto:
    """conv+relu -> conv -> add(residual)+relu -> maxpool -> global average pool -> flatten -> gemm."""
    rng = np.random.default_rng(seed)
    inits = []

    def param(name: str, shape: tuple[int, ...], scale: float) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    conv = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
    nodes = [
        helper.make_node(
            "Conv", ["x", param("w1", (8, 3, 3, 3), 0.3), param("b1", (8,), 0.1)], ["c1"], **conv
        ),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node(
            "Conv", ["r1", param("w2", (8, 8, 3, 3), 0.1), param("b2", (8,), 0.1)], ["c2"], **conv
        ),
        helper.make_node("Add", ["c2", "r1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["f"]),
        helper.make_node(
            "Gemm", ["f", param("w3", (10, 8), 0.5), param("b3", (10,), 0.1)], ["logits"], transB=1
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "small_resnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def quantize_qdq(
    model: onnx.ModelProto,
    calibration: Sequence[Mapping[str, np.ndarray]],
    directory: Path,
    extra_options: Mapping[str, object] | None = None,
    activation_int8: bool = True,
) -> onnx.ModelProto:
    """onnxruntime.quantization.quantize_static in QDQ form, per channel (min/max calibration)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            item = next(self.items, None)
            return None if item is None else dict(item)

    source, prepared, out = directory / "float.onnx", directory / "prep.onnx", directory / "qdq.onnx"
    onnx.save(model, source)
    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    quantize_static(
        str(prepared),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8 if activation_int8 else QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
        calibrate_method=CalibrationMethod.MinMax,
        extra_options=dict(SYMMETRIC if extra_options is None else extra_options),
    )
    return onnx.load(out)
