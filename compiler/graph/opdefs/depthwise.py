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

Each phase is filled straight from the input's rows of that phase, one input row at a time
where the input is channels-last in memory (the interpreter's GEMM convolutions leave it so):
a whole-tensor copy from that layout into the channel-major phases is 1.6x slower.

The arithmetic is `compiler.graph.opdefs.nn`'s tap sum, element for element: the first tap's
product, then each later tap's product added in kernel order, in the input's float type, then
the bias added, so the results are the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int],
                     out: Sequence[int], bias: np.ndarray | None = None) -> np.ndarray:
    """The depthwise convolution of float `x` (N, C, H, W) by `w` (C, 1, KH, KW) with `strides`,
    ONNX `pads` (top, left, bottom, right) and output size `out` (OH, OW), no dilation, plus
    `bias` (C,) if given (added after the tap sum, as numpy's `y + bias` adds): a new
    C-contiguous (N, C, OH, OW) array of x's dtype."""
    (kh, kw), (sh, sw), (oh, ow) = w.shape[2:], strides, out
    rows = max(oh + (kh - 1) // sh, -(-(pads[0] + x.shape[2]) // sh))  # rows of each phase
    cols = max(ow + (kw - 1) // sw, -(-(pads[1] + x.shape[3]) // sw))
    phases = _phases(x, pads[:2], (sh, sw), (rows, cols))
    taps = w.reshape(w.shape[0], -1).astype(x.dtype)
    length = oh * cols
    sums = np.empty((*x.shape[:2], length), x.dtype)
    product = np.empty_like(sums)  # one buffer for every later tap's product
    for t, (ky, kx) in enumerate(np.ndindex(kh, kw)):
        start = (ky // sh) * cols + kx // sw
        view = phases[ky % sh][kx % sw][..., start:start + length]
        np.multiply(view, taps[:, t, None], out=sums if t == 0 else product)
        if t:
            sums += product
    window = sums.reshape(*x.shape[:2], oh, cols)[..., :ow]
    y = np.empty((*x.shape[:2], oh, ow), x.dtype)
    if bias is None:
        y[...] = window
    else:
        np.add(window, bias.reshape(-1, 1, 1), out=y)
    return y


def _phases(x: np.ndarray, begin: Sequence[int], strides: tuple[int, int],
            size: tuple[int, int]) -> list[list[np.ndarray]]:
    """The phases [py][px] of `x` placed at (`begin`) in a zero grid of `size` x `strides`,
    each flattened per channel to (N, C, rows * cols + cols): a tap's slice may run up to a
    row past the phase into those zeros (columns no output keeps)."""
    (sh, sw), (rows, cols) = strides, size
    phases = []
    for py in range(sh):
        row = []
        for px in range(sw):
            buf = np.zeros((*x.shape[:2], (rows + 1) * cols), x.dtype)
            _fill(buf[..., : rows * cols].reshape(*x.shape[:2], rows, cols), x,
                  _placement(py, begin[0], sh, x.shape[2]), _placement(px, begin[1], sw, x.shape[3]), strides)
            row.append(buf)
        phases.append(row)
    return phases


def _placement(phase: int, begin: int, stride: int, size: int) -> tuple[int, int, int]:
    """Along one axis, where phase `phase` of the grid (x placed at `begin`, every `stride`-th
    grid line) first meets x: (its first line in the phase, x's line there, how many lines)."""
    first = max(0, -(-(begin - phase) // stride))
    start = first * stride + phase - begin
    return first, start, len(range(start, size, stride))


def _fill(phase: np.ndarray, x: np.ndarray, along_h: tuple[int, int, int],
          along_w: tuple[int, int, int], strides: tuple[int, int]) -> None:
    """Copy x's lines of one phase (`along_h`, `along_w`: `_placement`) into it (N, C, rows,
    cols), one input row at a time where x's channels are innermost in memory."""
    (r, i, count), (q, j, width) = along_h, along_w
    source = x[..., i::strides[0], j::strides[1]]
    target = phase[..., r:r + count, q:q + width]
    if x.strides[1] < x.strides[3]:
        for k in range(count):
            target[..., k, :] = source[..., k, :]
    else:
        target[...] = source
