"""A small CNN trained with numpy: conv3x3(1->16) + ReLU, conv3x3(16->32) + ReLU, max pool 2x2,
dense 512 -> 10, softmax cross-entropy, Adam. Written for 8x8 one-channel images (the digits).

Activations are NHWC inside the trainer (im2col is then one reshape); the weights are kept in
ONNX's layouts (conv [K, C, 3, 3], dense [out, in] over NCHW-flattened features) so the export
copies them unchanged.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import threadpool_limits

CHANNELS = (1, 16, 32)
CLASSES = 10


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 12
    batch: int = 32
    learning_rate: float = 3e-3  # Adam's, decayed linearly to 0 over the run


def init_weights(rng: np.random.Generator, image_size: int) -> dict[str, np.ndarray]:
    """He-initialised weights and zero biases under the names the ONNX export uses."""
    weights: dict[str, np.ndarray] = {}
    for layer, (cin, cout) in enumerate(itertools.pairwise(CHANNELS), start=1):
        weights[f"conv{layer}.weight"] = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        weights[f"conv{layer}.bias"] = np.zeros(cout)
    features = CHANNELS[-1] * (image_size // 2) ** 2
    weights["fc.weight"] = rng.standard_normal((CLASSES, features)) * np.sqrt(1.0 / features)
    weights["fc.bias"] = np.zeros(CLASSES)
    return {name: w.astype(np.float32) for name, w in weights.items()}


def _im2col(x: np.ndarray) -> np.ndarray:
    """[B, H, W, C] -> [B*H*W, C*9] of zero-padded 3x3 windows, columns in (c, ky, kx) order."""
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = sliding_window_view(padded, (3, 3), axis=(1, 2))  # [B, H, W, C, 3, 3]
    return windows.reshape(-1, x.shape[3] * 9)


def _col2im(cols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Adjoint of _im2col: sum each window's gradient back into a [B, H, W, C] input."""
    batch, height, width, channels = shape
    windows = cols.reshape(batch, height, width, channels, 3, 3)
    padded = np.zeros((batch, height + 2, width + 2, channels), cols.dtype)
    for ky in range(3):
        for kx in range(3):
            padded[:, ky : ky + height, kx : kx + width, :] += windows[..., ky, kx]
    return padded[:, 1:-1, 1:-1, :]


def forward(weights: dict[str, np.ndarray], images: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Logits [B, 10] of NCHW images [B, 1, H, W], and what the backward pass needs."""
    cache: dict[str, np.ndarray] = {}
    x = images.transpose(0, 2, 3, 1)
    for layer in (1, 2):
        w = weights[f"conv{layer}.weight"]
        cols = _im2col(x)
        out = cols @ w.reshape(w.shape[0], -1).T + weights[f"conv{layer}.bias"]
        x = np.maximum(out, 0).reshape(*x.shape[:3], w.shape[0])
        cache[f"cols{layer}"], cache[f"act{layer}"] = cols, x
    batch, height, width, channels = x.shape
    pooled = x.reshape(batch, height // 2, 2, width // 2, 2, channels).max(axis=(2, 4))
    flat = pooled.transpose(0, 3, 1, 2).reshape(batch, -1)  # ONNX Flatten of NCHW
    cache["pooled"], cache["flat"] = pooled, flat
    return flat @ weights["fc.weight"].T + weights["fc.bias"], cache


def gradients(weights: dict[str, np.ndarray], images: np.ndarray,
              labels: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """Mean softmax cross-entropy of the batch and its gradient for every weight."""
    logits, cache = forward(weights, images)
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs = shifted / shifted.sum(axis=1, keepdims=True)
    batch = len(labels)
    loss = float(-np.log(probs[np.arange(batch), labels] + 1e-12).mean())
    dlogits = probs
    dlogits[np.arange(batch), labels] -= 1.0
    dlogits /= batch
    grads = {"fc.weight": dlogits.T @ cache["flat"], "fc.bias": dlogits.sum(axis=0)}
    pooled, act = cache["pooled"], cache["act2"]
    batch, height, width, channels = pooled.shape
    dflat = dlogits @ weights["fc.weight"]
    dpooled = dflat.reshape(batch, channels, height, width).transpose(0, 2, 3, 1)
    upsampled = np.repeat(np.repeat(pooled, 2, axis=1), 2, axis=2)
    dx = np.repeat(np.repeat(dpooled, 2, axis=1), 2, axis=2) * (act == upsampled)
    for layer in (2, 1):
        act = cache[f"act{layer}"]
        dout = (dx * (act > 0)).reshape(-1, act.shape[3])
        w = weights[f"conv{layer}.weight"]
        grads[f"conv{layer}.weight"] = (dout.T @ cache[f"cols{layer}"]).reshape(w.shape)
        grads[f"conv{layer}.bias"] = dout.sum(axis=0)
        if layer == 2:
            dx = _col2im(dout @ w.reshape(w.shape[0], -1), cache["act1"].shape)
    return loss, grads


def train(images: np.ndarray, labels: np.ndarray, *, seed: int,
          config: TrainConfig = TrainConfig()) -> dict[str, np.ndarray]:
    """Weights after `config.epochs` of Adam on shuffled mini-batches; deterministic for a seed.

    Runs BLAS on one thread: the summation order, hence the weights, then do not depend on the
    thread count, and these small products are faster on one thread than split over several.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _train(images, labels, seed, config)


def _train(images: np.ndarray, labels: np.ndarray, seed: int, config: TrainConfig) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = init_weights(rng, images.shape[2])
    moments = {name: (np.zeros_like(w), np.zeros_like(w)) for name, w in weights.items()}
    steps_per_epoch = -(-len(images) // config.batch)
    total_steps, step = config.epochs * steps_per_epoch, 0
    for _ in range(config.epochs):
        order = rng.permutation(len(images))
        for start in range(0, len(images), config.batch):
            batch = order[start : start + config.batch]
            _, grads = gradients(weights, images[batch], labels[batch])
            step += 1
            lr = config.learning_rate * (1.0 - (step - 1) / total_steps)
            _adam_step(weights, grads, moments, lr, step)
    return weights


def _adam_step(weights: dict[str, np.ndarray], grads: dict[str, np.ndarray],
               moments: dict[str, tuple[np.ndarray, np.ndarray]], lr: float, step: int) -> None:
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for name, w in weights.items():
        m, v = moments[name]
        m *= beta1
        m += (1 - beta1) * grads[name]
        v *= beta2
        v += (1 - beta2) * grads[name] ** 2
        m_hat = m / (1 - beta1**step)
        v_hat = v / (1 - beta2**step)
        w -= (lr * m_hat / (np.sqrt(v_hat) + eps)).astype(w.dtype)
