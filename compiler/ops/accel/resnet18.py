"""The convolution and classifier shapes of ResNet-18 at 224x224, batch 1."""

from __future__ import annotations

from compiler.ops.accel.common import Epilogue
from compiler.ops.accel.conv2d import Conv2dSpec
from compiler.ops.accel.dense import DenseSpec

# (name, N, C, H, W, K, kernel, stride, pad)
CONVS = [
    ("conv1", 1, 3, 224, 224, 64, 7, 2, 3),
    ("layer1", 1, 64, 56, 56, 64, 3, 1, 1),
    ("layer2_down", 1, 64, 56, 56, 128, 3, 2, 1),
    ("layer2_skip", 1, 64, 56, 56, 128, 1, 2, 0),
    ("layer2", 1, 128, 28, 28, 128, 3, 1, 1),
    ("layer3_down", 1, 128, 28, 28, 256, 3, 2, 1),
    ("layer3_skip", 1, 128, 28, 28, 256, 1, 2, 0),
    ("layer3", 1, 256, 14, 14, 256, 3, 1, 1),
    ("layer4_down", 1, 256, 14, 14, 512, 3, 2, 1),
    ("layer4_skip", 1, 256, 14, 14, 512, 1, 2, 0),
    ("layer4", 1, 512, 7, 7, 512, 3, 1, 1),
]
CLASSIFIER = DenseSpec(1, 512, 1000)
# VTA's epilogue in its convolution tutorial: shift right by 8, clip to [0, 127], cast to int8.
BENCH_EPILOGUE = Epilogue(bias=False, shift=8, clip=(0, 127))


def conv_specs(epilogue: Epilogue | None = None) -> list[tuple[str, Conv2dSpec]]:
    ep = epilogue or Epilogue()
    return [(str(row[0]), Conv2dSpec(*row[1:], epilogue=ep)) for row in CONVS]  # type: ignore[arg-type]
