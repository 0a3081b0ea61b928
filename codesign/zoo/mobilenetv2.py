"""MobileNetV2 (Sandler et al. 2018, torchvision's layout), width 1.0, 224x224x3, batch 1.

conv 3x3/2 (32) + BN + ReLU6, 17 inverted residual blocks (1x1 expand + BN + ReLU6, 3x3
depthwise conv with group = channels + BN + ReLU6, 1x1 linear projection + BN; a residual Add
where stride is 1 and channels match), conv 1x1 to 1280 + BN + ReLU6, global average pool,
Flatten, Gemm 1280 -> 1000. ReLU6 is Clip(0, 6): bounds as inputs from opset 11, as attributes
before (as older exporters wrote it).
"""

from __future__ import annotations

import numpy as np
import onnx

from codesign.zoo import images, layers, ops
from codesign.zoo.writer import GraphWriter, Value

MIN_OPSET = 9
# (expansion t, output channels c, repeats n, stride of the first repeat s), the paper's table 2.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 1))
STEM_CHANNELS = 32
LAST_CHANNELS = 1280
CLASSES = 1000
PARAMETERS = 3_504_872  # torchvision's count: conv and classifier weights, classifier bias, BN gamma and beta
CALIBRATION_IMAGES = 8


def build(*, seed: int, opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    g = GraphWriter("mobilenetv2", opset)
    x = g.input("input", images.imagenet_like(CALIBRATION_IMAGES, seed, stream=1))
    x = _conv_bn_relu6(g, rng, x, "features.0", STEM_CHANNELS, kernel=3, stride=2)
    index = 1
    for expansion, channels, repeats, first_stride in SETTINGS:
        for repeat in range(repeats):
            stride = first_stride if repeat == 0 else 1
            x = _inverted_residual(g, rng, x, f"features.{index}", expansion, channels, stride)
            index += 1
    x = _conv_bn_relu6(g, rng, x, f"features.{index}", LAST_CHANNELS, kernel=1)
    samples = layers.spatial_samples(x.data)
    x = ops.global_average_pool(g, x, name="avgpool")
    x = ops.flatten(g, x, name="flatten")
    g.output(layers.classifier(g, rng, x, samples, name="classifier.1", classes=CLASSES), "logits")
    return g.to_model(doc=f"MobileNetV2 1.0, seeded weights (seed {seed}), batch norms unfolded",
                      metadata={"zoo.name": "mobilenetv2", "zoo.seed": str(seed)})


def _conv_bn_relu6(g: GraphWriter, rng: np.random.Generator, x: Value, name: str, channels: int, *,
                   kernel: int, stride: int = 1, group: int = 1) -> Value:
    """torchvision's Conv2dNormActivation: `name`.0 conv, `name`.1 BN, `name`.2 ReLU6."""
    y = layers.conv_bn(g, rng, x, conv=f"{name}.0", bn=f"{name}.1", out_channels=channels, kernel=kernel,
                       stride=stride, group=group)
    return ops.clip(g, y, 0.0, 6.0, name=f"{name}.2")


def _inverted_residual(g: GraphWriter, rng: np.random.Generator, x: Value, name: str, expansion: int,
                       channels: int, stride: int) -> Value:
    """Expand (unless t = 1), depthwise 3x3, project linearly; add the input when shapes allow."""
    in_channels = x.data.shape[1]
    hidden = in_channels * expansion
    residual = stride == 1 and in_channels == channels
    y, part = x, 0
    if expansion != 1:
        y = _conv_bn_relu6(g, rng, y, f"{name}.conv.{part}", hidden, kernel=1)
        part += 1
    y = _conv_bn_relu6(g, rng, y, f"{name}.conv.{part}", hidden, kernel=3, stride=stride, group=hidden)
    # The projection's batch norm is the residual branch's last one when the block adds its input.
    gamma = layers.RESIDUAL_GAMMA if residual else layers.GAMMA_RANGE
    y = layers.conv_bn(g, rng, y, conv=f"{name}.conv.{part + 1}", bn=f"{name}.conv.{part + 2}",
                       out_channels=channels, kernel=1, gamma_range=gamma)
    return ops.add(g, x, y, name=f"{name}.add") if residual else y


def sample_inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    return [{"input": image[None]} for image in images.imagenet_like(count, seed)]
