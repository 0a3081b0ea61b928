"""Seeded image-like inputs for the ImageNet models, normalised as torchvision normalises images.

Each image is coloured noise with a natural-image spectrum (amplitude falling with frequency, a
random slope per image), correlated colour channels, a few flat-coloured shapes for edges, and a
random exposure. Image i of a seed depends only on (stream, seed, i), so a longer list starts
with the shorter one.
"""

from __future__ import annotations

import numpy as np

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
# Grid sizes of the noise octaves, coarse to fine.
OCTAVES = (2, 4, 8, 16, 32, 64)


def imagenet_like(count: int, seed: int, *, stream: int = 0, size: int = 224) -> np.ndarray:
    """[count, 3, size, size] float32, each pixel (x - IMAGENET_MEAN) / IMAGENET_STD of an x in [0, 1].

    `stream` separates uses of one seed: 0 for sample inputs, 1 for a builder's calibration batch.
    """
    images = [_image01(np.random.default_rng([stream, seed, i]), size) for i in range(count)]
    batch = np.stack(images) if images else np.zeros((0, 3, size, size), np.float32)
    return ((batch - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]).astype(np.float32)


def _image01(rng: np.random.Generator, size: int) -> np.ndarray:
    """One [3, size, size] image with values in [0, 1]."""
    slope = rng.uniform(0.6, 1.6)
    colour_mix = 0.5 * np.eye(3) + rng.uniform(0.0, 0.5, (3, 3))
    image = np.zeros((3, size, size))
    for grid in OCTAVES:
        up = _upsample_matrix(size, grid)
        noise = (colour_mix @ rng.standard_normal((3, grid * grid))).reshape(3, grid, grid)
        for channel in range(3):  # 2-D products: numpy's broadcast 3-D matmul does not use BLAS
            image[channel] += grid**-slope * (up @ noise[channel] @ up.T)
    image = (image - image.mean()) / (image.std() + 1e-12)
    for _ in range(rng.integers(0, 4)):
        image = _paint_ellipse(rng, image)
    exposure = rng.normal(0.0, 0.5) + rng.normal(0.0, 0.3, 3)[:, None, None]
    return (1.0 / (1.0 + np.exp(-(rng.uniform(0.6, 2.0) * image + exposure)))).astype(np.float32)


def _upsample_matrix(size_out: int, size_in: int) -> np.ndarray:
    """[size_out, size_in] linear interpolation weights (pixel centres aligned, edges clamped)."""
    pos = np.clip((np.arange(size_out) + 0.5) * size_in / size_out - 0.5, 0, size_in - 1)
    low = np.floor(pos).astype(int)
    high = np.minimum(low + 1, size_in - 1)
    frac = pos - low
    up = np.zeros((size_out, size_in))
    up[np.arange(size_out), low] += 1.0 - frac
    up[np.arange(size_out), high] += frac
    return up


def _paint_ellipse(rng: np.random.Generator, image: np.ndarray) -> np.ndarray:
    """The image with a flat-coloured ellipse blended in (objects give real images their edges)."""
    size = image.shape[1]
    cy, cx = rng.uniform(0, size, 2)
    ry, rx = rng.uniform(0.05, 0.35, 2) * size
    yy, xx = np.mgrid[0:size, 0:size]
    inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
    colour = rng.normal(0.0, 1.2, 3)[:, None]
    out = image.copy()
    out[:, inside] = 0.3 * out[:, inside] + colour
    return out
