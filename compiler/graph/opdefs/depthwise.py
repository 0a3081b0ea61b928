"""A 2-D depthwise convolution (one input and one output channel per group) as long contiguous
multiply-adds, for the reference interpreter (calibration and the integer reference run every
depthwise layer of a model once per input).

The input is padded into a zero grid whose rows and columns are multiples of the stride, split
into its stride x stride phases (stride 1: the grid is its only phase), and each phase flattened
per channel. Output (i, j) of kernel tap (ky, kx) reads phase (ky mod s, kx mod s) at row
i + ky // s and column j + kx // s, so in a phase's flat rows the whole tap is one slice starting
at (ky // s) * width + kx // s: the output is computed on rows of the phase's width (the
columns past the output's are discarded) and every tap is one multiply and one add over
contiguous memory, instead of strided windows whose inner loop is an output row.

The arithmetic is `compiler.graph.opdefs.nn`'s tap sum, element for element: the first tap's
product, then each later tap's product added in kernel order, in the input's float type, so
the results are the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int],
                     out: Sequence[int]) -> np.ndarray:
    """The depthwise convolution of float `x` (N, C, H, W) by `w` (C, 1, KH, KW) with `strides`,
    ONNX `pads` (top, left, bottom, right) and output size `out` (OH, OW), no dilation and no
    bias: an (N, C, OH, OW) array (a view of a wider one)."""
    (kh, kw), (sh, sw), (oh, ow) = w.shape[2:], strides, out
    rows = max(oh + (kh - 1) // sh, -(-(pads[0] + x.shape[2]) // sh))  # rows of each phase
    cols = max(ow + (kw - 1) // sw, -(-(pads[1] + x.shape[3]) // sw))
    phases = _phases(x, pads[:2], (sh, sw), (rows, cols))
    taps = w.reshape(w.shape[0], -1).astype(x.dtype)
    length = oh * cols
    y = np.empty((*x.shape[:2], length), x.dtype)
    product = np.empty_like(y)  # one buffer for every later tap's product
    for t, (ky, kx) in enumerate(np.ndindex(kh, kw)):
        start = (ky // sh) * cols + kx // sw
        view = phases[ky % sh][kx % sw][..., start:start + length]
        np.multiply(view, taps[:, t, None], out=y if t == 0 else product)
        if t:
            y += product
    return y.reshape(*x.shape[:2], oh, cols)[..., :ow]


def _phases(x: np.ndarray, begin: Sequence[int], strides: tuple[int, int],
            size: tuple[int, int]) -> list[list[np.ndarray]]:
    """The phases [py][px] of `x` placed at (`begin`) in a zero grid of `size` x `strides`,
    each flattened per channel to (N, C, rows * cols + cols): a tap's slice may run up to a
    row past the phase into those zeros (columns no output keeps)."""
    (sh, sw), (rows, cols) = strides, size
    flat = rows * cols
    if strides == (1, 1):  # the grid is the phase: x goes straight into it
        buf = np.zeros((*x.shape[:2], flat + cols), x.dtype)
        grid = buf[..., :flat].reshape(*x.shape[:2], rows, cols)
        grid[..., begin[0]:begin[0] + x.shape[2], begin[1]:begin[1] + x.shape[3]] = x
        return [[buf]]
    grid = np.zeros((*x.shape[:2], rows * sh, cols * sw), x.dtype)
    grid[..., begin[0]:begin[0] + x.shape[2], begin[1]:begin[1] + x.shape[3]] = x
    phases = []
    for py in range(sh):
        row = []
        for px in range(sw):
            buf = np.zeros((*x.shape[:2], flat + cols), x.dtype)
            buf[..., :flat].reshape(*x.shape[:2], rows, cols)[...] = grid[..., py::sh, px::sw]
            row.append(buf)
        phases.append(row)
    return phases
