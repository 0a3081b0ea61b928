"""ResNet-18 (He et al. 2016, torchvision's layout) at 224x224x3, batch 1, batch norms unfolded.

conv 7x7/2 + BN + ReLU, max pool 3x3/2, four stages of two BasicBlocks (64, 128, 256, 512
channels; stages 2-4 start with stride 2 and a 1x1/2 conv + BN downsample), global average pool,
Flatten, Gemm 512 -> 1000. Names follow torchvision's state dict (layer2.0.downsample.0.weight).
"""

from __future__ import annotations

import numpy as np
import onnx

from codesign.zoo import images, layers, ops
from codesign.zoo.writer import GraphWriter, Value

MIN_OPSET = 9
STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, stride of the first block)
CLASSES = 1000
PARAMETERS = 11_689_512  # torchvision's count: conv and fc weights, fc bias, BN gamma and beta
CALIBRATION_IMAGES = 8


def build(*, seed: int, opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    g = GraphWriter("resnet18", opset)
    x = g.input("input", images.imagenet_like(CALIBRATION_IMAGES, seed, stream=1))
    x = layers.conv_bn(g, rng, x, conv="conv1", bn="bn1", out_channels=64, kernel=7, stride=2)
    x = ops.relu(g, x, name="relu")
    x = ops.max_pool(g, x, name="maxpool", kernel=3, stride=2, pad=1)
    for stage, (channels, stride) in enumerate(STAGES, start=1):
        x = _basic_block(g, rng, x, f"layer{stage}.0", channels, stride)
        x = _basic_block(g, rng, x, f"layer{stage}.1", channels, 1)
    samples = layers.spatial_samples(x.data)
    x = ops.global_average_pool(g, x, name="avgpool")
    x = ops.flatten(g, x, name="flatten")
    g.output(layers.classifier(g, rng, x, samples, name="fc", classes=CLASSES), "logits")
    return g.to_model(doc=f"ResNet-18, seeded weights (seed {seed}), batch norms unfolded",
                      metadata={"zoo.name": "resnet18", "zoo.seed": str(seed)})


def _basic_block(g: GraphWriter, rng: np.random.Generator, x: Value, name: str, channels: int,
                 stride: int) -> Value:
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut); the shortcut is a 1x1 conv + BN when the
    shape changes, else x."""
    y = layers.conv_bn(g, rng, x, conv=f"{name}.conv1", bn=f"{name}.bn1", out_channels=channels,
                       kernel=3, stride=stride)
    y = ops.relu(g, y, name=f"{name}.relu1")
    y = layers.conv_bn(g, rng, y, conv=f"{name}.conv2", bn=f"{name}.bn2", out_channels=channels, kernel=3,
                       gamma_range=layers.RESIDUAL_GAMMA)
    shortcut = x
    if stride != 1 or x.data.shape[1] != channels:
        shortcut = layers.conv_bn(g, rng, x, conv=f"{name}.downsample.0", bn=f"{name}.downsample.1",
                                  out_channels=channels, kernel=1, stride=stride)
    return ops.relu(g, ops.add(g, y, shortcut, name=f"{name}.add"), name=f"{name}.relu2")


def sample_inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    return [{"input": image[None]} for image in images.imagenet_like(count, seed)]
