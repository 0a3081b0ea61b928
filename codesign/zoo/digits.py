"""`digits`: a small CNN trained at export time on scikit-learn's handwritten digits.

The data set is the 1797 8x8 images of UCI's optical digits that scikit-learn ships (no
download). Pixels 0..16 are scaled to [0, 1]. A fixed permutation holds out 360 images (20 %)
for measuring accuracy, the same whatever the model seed; the seed sets the initial weights
and the order of the mini-batches. Graph: Conv 3x3 (1->16) + Relu, Conv 3x3 (16->32) + Relu,
MaxPool 2x2, Flatten, Gemm 512 -> 10; input [1, 1, 8, 8] float32, output logits [1, 10].
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import onnx

from codesign.zoo import ops, train
from codesign.zoo.writer import GraphWriter

MIN_OPSET = 9
HELD_OUT = 360
SPLIT_SEED = 20240  # fixes which images are held out; not the model seed
PIXEL_MAX = 16.0
PARAMETERS = 9_930  # conv1 160 + conv2 4,640 + fc 5,130


@dataclass(frozen=True)
class DigitsSplit:
    """Images [n, 1, 8, 8] float32 in [0, 1] and labels [n] int64, for training and held out."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


@functools.cache
def digits_split() -> DigitsSplit:
    """The fixed split (read-only arrays; cached because every export and test needs it)."""
    from sklearn.datasets import load_digits  # deferred: scikit-learn takes a second to import

    data = load_digits()
    images = (data.images / PIXEL_MAX).astype(np.float32)[:, None]
    labels = data.target.astype(np.int64)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    test, training = order[:HELD_OUT], order[HELD_OUT:]
    split = DigitsSplit(images[training], labels[training], images[test], labels[test])
    for array in (split.train_images, split.train_labels, split.test_images, split.test_labels):
        array.setflags(write=False)
    return split


def trained_weights(seed: int, config: train.TrainConfig | None = None) -> dict[str, np.ndarray]:
    split = digits_split()
    config = config or train.TrainConfig()
    return train.train(split.train_images, split.train_labels, seed=seed, config=config)


def build(*, seed: int, opset: int) -> onnx.ModelProto:
    """Train (a few seconds on one core) and write the graph; held-out images are its calibration batch."""
    weights = trained_weights(seed)
    g = GraphWriter("digits", opset)
    x = g.input("input", digits_split().test_images)
    for layer in (1, 2):
        x = ops.conv(g, x, g.param(f"conv{layer}.weight", weights[f"conv{layer}.weight"]),
                     g.param(f"conv{layer}.bias", weights[f"conv{layer}.bias"]), name=f"conv{layer}",
                     pad=1)
        x = ops.relu(g, x, name=f"relu{layer}")
    x = ops.max_pool(g, x, name="pool", kernel=2, stride=2)
    x = ops.flatten(g, x, name="flatten")
    x = ops.gemm(g, x, g.param("fc.weight", weights["fc.weight"]), g.param("fc.bias", weights["fc.bias"]),
                 name="fc")
    accuracy = float((x.data.argmax(axis=1) == digits_split().test_labels).mean())
    g.output(x, "logits")
    return g.to_model(doc=f"digits CNN trained with seed {seed}; held-out fp32 accuracy {accuracy:.4f}",
                      metadata={"zoo.name": "digits", "zoo.seed": str(seed),
                                "zoo.heldout_accuracy": f"{accuracy:.4f}"})


def sample_inputs(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Held-out images seed, seed + 1, ... (wrapping): seed 0 lines up with digits_split().test_labels."""
    images = digits_split().test_images
    return [{"input": images[(seed + i) % len(images)][None].copy()} for i in range(count)]
