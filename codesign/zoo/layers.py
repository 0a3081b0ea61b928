"""Layers with the weight statistics of a trained network, set from the calibration batch.

Random weights alone give a network whose activations drift layer after layer, which amplifies
small perturbations (int8 rounding among them), and whose logits barely depend on the input. A
trained network is well conditioned: each batch norm's running statistics match its input,
residual branches are small next to the identity, depthwise filters pass smooth signals, and
the classifier reads the directions in which features differ between inputs. These helpers
reproduce each of those properties; the constants below say how.
"""

from __future__ import annotations

import numpy as np

from codesign.zoo import numeric, ops
from codesign.zoo.writer import GraphWriter, Value

BN_EPS = 1e-5
GAMMA_RANGE = (0.5, 1.5)
BETA_STD = 0.1
# Gamma of the last batch norm of a residual branch. It is small in trained ResNets and
# MobileNets (zero-init-residual training starts it at 0), so each block refines the identity
# rather than replacing it; with gamma near 1 a deep random network amplifies small
# perturbations (int8 rounding included) block after block, which trained networks do not.
RESIDUAL_GAMMA = (0.1, 0.5)
# Size of the random part of a depthwise filter relative to its blob (see `depthwise_weight`).
DEPTHWISE_NOISE = 0.5
# Standard deviation of the logits over classes and inputs; a trained ImageNet model's is a few units.
LOGIT_STD = 3.0
# Principal feature directions a classifier reads (see `classifier`).
CLASSIFIER_RANK = 16


def he_weight(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Normal with variance 2 / fan_in (He), fan_in = product of all axes but the first."""
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def depthwise_weight(rng: np.random.Generator, channels: int, kernel: int) -> np.ndarray:
    """[channels, 1, kernel, kernel]: a smooth blob of random sign and size plus a random part.

    Trained depthwise filters have a strong DC component (blobs, centre-surround). A zero-mean
    random filter passes almost nothing of a smooth input in many channels, and the batch norm
    after it then scales those channels' noise (int8 rounding included) up to unit variance.
    The overall scale is He's, as for a dense filter with fan_in kernel**2.
    """
    taps = 1.0 + np.minimum(np.arange(kernel), np.arange(kernel)[::-1])  # 1 2 1 for 3x3
    blob = np.outer(taps, taps)
    blob *= kernel / np.linalg.norm(blob)  # the energy of kernel**2 unit normals
    size = rng.uniform(GAMMA_RANGE[0], GAMMA_RANGE[1], size=channels) * rng.choice([-1.0, 1.0], channels)
    weight = size[:, None, None] * blob + DEPTHWISE_NOISE * rng.standard_normal((channels, kernel, kernel))
    return (weight * np.sqrt(2.0 / kernel**2)).astype(np.float32)[:, None]


def calibrated_batch_norm(g: GraphWriter, rng: np.random.Generator, x: Value, *, name: str,
                          gamma_range: tuple[float, float] = GAMMA_RANGE) -> Value:
    """BatchNormalization `name` whose running statistics are those of `x` on the calibration batch."""
    axes = (0, *range(2, x.data.ndim))
    channels = int(x.data.shape[1])
    mean = numeric.round_significant(x.data.mean(axis=axes))
    var = numeric.round_significant(x.data.var(axis=axes))
    gamma = rng.uniform(gamma_range[0], gamma_range[1], size=channels).astype(np.float32)
    beta = (rng.standard_normal(channels) * BETA_STD).astype(np.float32)
    return ops.batch_norm(g, x, g.param(f"{name}.weight", gamma), g.param(f"{name}.bias", beta),
                          g.param(f"{name}.running_mean", mean), g.param(f"{name}.running_var", var),
                          name=name, eps=BN_EPS)


def conv_bn(g: GraphWriter, rng: np.random.Generator, x: Value, *, conv: str, bn: str, out_channels: int,
            kernel: int, stride: int = 1, group: int = 1,
            gamma_range: tuple[float, float] = GAMMA_RANGE) -> Value:
    """Bias-free Conv (padding kernel // 2) followed by its calibrated, unfolded BatchNormalization."""
    in_channels = x.data.shape[1]
    if group == in_channels == out_channels and group > 1:
        array = depthwise_weight(rng, out_channels, kernel)
    else:
        array = he_weight(rng, (out_channels, in_channels // group, kernel, kernel))
    weight = g.param(f"{conv}.weight", array)
    y = ops.conv(g, x, weight, None, name=conv, stride=stride, pad=kernel // 2, group=group)
    return calibrated_batch_norm(g, rng, y, name=bn, gamma_range=gamma_range)


def classifier(g: GraphWriter, rng: np.random.Generator, features: Value, samples: np.ndarray, *,
               name: str, classes: int) -> Value:
    """Gemm (transB=1) from `features` [n, K] to `classes` logits that discriminate between inputs.

    A trained classifier reads the few directions in which features vary from input to input
    (its class means span them), not random ones, and ignores what all inputs share. So the
    weights mix the CLASSIFIER_RANK leading principal directions of `samples` [m, K] (feature
    vectors measured on calibration data), each whitened so that no single direction picks the
    class for every input; the bias cancels the mean calibration feature; the scale gives logits
    a standard deviation of LOGIT_STD on the calibration batch.
    """
    directions, spread = principal_directions(samples, CLASSIFIER_RANK)
    weight = rng.standard_normal((classes, len(spread))) @ (directions / spread[:, None])
    f = features.data.reshape(features.data.shape[0], -1).astype(np.float64)
    weight *= LOGIT_STD / max(float(((f - f.mean(axis=0)) @ weight.T).std()), 1e-30)
    weight32 = numeric.round_significant(weight)
    bias = numeric.round_significant(-(f.mean(axis=0) @ weight32.T.astype(np.float64)))
    return ops.gemm(g, features, g.param(f"{name}.weight", weight32), g.param(f"{name}.bias", bias),
                    name=name)


def principal_directions(samples: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The `rank` leading principal directions [k, K] of `samples` [m, K] and their singular values.

    Each direction's sign is fixed (largest component positive) so that the result does not
    depend on the LAPACK build; directions with no variance are dropped.
    """
    centred = samples.astype(np.float64) - samples.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    keep = min(rank, int((singular > singular[0] * 1e-6).sum()))
    directions = vt[:keep]
    signs = np.sign(directions[np.arange(keep), np.abs(directions).argmax(axis=1)])
    return directions * signs[:, None], singular[:keep]


def spatial_samples(feature_map: np.ndarray) -> np.ndarray:
    """[n, C, H, W] -> [n * H * W, C]: the feature vector at every position of every image."""
    return feature_map.transpose(0, 2, 3, 1).reshape(-1, feature_map.shape[1])
