"""Rounding int8 weights for the smallest output error on calibration data (GPTQ).

Rounding each weight to the nearest int8 level makes every weight's own error as small as it can
be, but a layer's output error is sum_i (w_i - q_i) * x_i, and its expected square is
e H e^T with e the row's rounding errors and H = E[x x^T] the second moment of the inputs that
the row multiplies. GPTQ (Frantar et al. 2023, after Optimal Brain Quantization) rounds one
input column at a time and moves each column's error onto the columns not rounded yet, in the
proportions that minimise e H e^T given the columns already fixed (the inverse of H, through
its Cholesky factor). The levels, the scales (max |w[k]| / 127 per output channel) and so the
integer ops are those of round-to-nearest; only which neighbouring level each weight takes
changes. The inputs' means are part of H, so the expected output shift that rounding causes
(what bias correction removes) is minimised too.

In MobileNetV2 (the zoo's, percentile activations), round-to-nearest weights alone (float
activations) cost a logit mean squared error of 0.19 on 12 validation inputs, GPTQ's 0.03,
although each layer's own output SQNR is already about 40 dB: the error of 52 layers adds up.

    moment_plan(graph, ops, samples) -> {weight: rows per input} of the layers GPTQ rounds
    layer_rows(graph, node, x, keep, rng) -> the input rows [groups, rows, n] of a dense layer
    gptq_levels(w, moment, scales) -> int8 levels of w [groups, k, n]
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.graph.ir import Graph, Node
from compiler.graph.opdefs.qops import INT8_MAX

# Added to H's diagonal, as a fraction of its mean (GPTQ's default): keeps H invertible when
# inputs are correlated or rarely nonzero, at a small cost in optimality.
DAMPING = 0.01
# Columns are rounded in blocks of BLOCK; the errors move onto later blocks in one product.
BLOCK = 128
# A layer's weights are rounded by GPTQ only when the calibration inputs give at least
# MIN_ROWS_PER_COLUMN rows per weight column; the others round to nearest. With fewer rows the
# second moment is a poor estimate (singular below one row per column) and GPTQ fits the
# calibration inputs rather than the data: on ResNet-18 the rule leaves layer3's and layer4's
# 3x3 convolutions (16 inputs: 3136 rows for 2304 columns, 784 for 4608) to nearest.
# Measured on validation inputs (seed 5000, 16 calibration inputs): MobileNetV2's logit mean
# squared error unchanged, ResNet-18's 0.0097 -> 0.0106, and ResNet-18's GPTQ 4x cheaper.
MIN_ROWS_PER_COLUMN = 2
# A layer's second moment is estimated from at most SAMPLED_ROWS_PER_COLUMN rows per weight
# column (and at least SAMPLED_ROWS_MIN), spread evenly over the calibration inputs and drawn at
# random within each (ROW_SEED): its cost is rows x columns^2, and ResNet-18's first stage has
# 50176 rows for 576 columns. With both rules ResNet-18's quantize (GPTQ, bias correction) takes
# 4.0 s instead of 23 s; validation logit MSE: ResNet-18 0.0102 -> 0.0110, MobileNetV2 0.0418 ->
# 0.0411, within the spread between row samples (MobileNetV2: 0.039-0.047).
SAMPLED_ROWS_PER_COLUMN = 8
SAMPLED_ROWS_MIN = 4096
ROW_SEED = 0


def moment_plan(graph: Graph, ops: Collection[str], samples: int) -> dict[str, int]:
    """The layers whose weights GPTQ rounds when `samples` calibration inputs are collected:
    by weight name, how many input rows (`layer_rows`) to sample from each input. Layers whose
    op is not in `ops`, which `layer_rows` does not cover, or that have fewer than
    MIN_ROWS_PER_COLUMN rows per column on the calibration inputs are left out."""
    plan: dict[str, int] = {}
    for node in graph.nodes:
        shape = _rows_shape(graph, node) if node.op in ops else None
        if shape is None:
            continue
        per_input, columns = shape
        if per_input * samples >= MIN_ROWS_PER_COLUMN * columns:
            wanted = max(SAMPLED_ROWS_PER_COLUMN * columns, SAMPLED_ROWS_MIN)
            plan[node.inputs[1]] = min(per_input, -(-wanted // samples))
    return plan


def _rows_shape(graph: Graph, node: Node) -> tuple[int, int] | None:
    """(rows per input, columns) of `layer_rows`'s result for `node`, from the graph's shapes."""
    x = graph.values[node.inputs[0]]
    w = graph.const_data(node.inputs[1])
    if _layout(node, x.shape, w, x.dtype) is None or w is None:
        return None
    if node.op == "Conv":
        out = graph.values[node.outputs[0]].shape
        return out[0] * out[2] * out[3], int(np.prod(w.shape[1:]))
    return int(np.prod(x.shape[:-1])), x.shape[-1]


def _layout(node: Node, shape: tuple[int, ...], w: np.ndarray | None, dtype: str) -> str | None:
    """How `node`'s weight meets its input: "conv", "dense", or None if not as a row product."""
    if node.op not in ("Conv", "Gemm", "MatMul") or dtype != "float32" or w is None:
        return None
    if node.op == "Conv" and w.ndim == 4 and set(node.ints_attr("dilations")) == {1}:
        return "conv"
    if node.op == "Gemm":
        transposed = node.int_attr("transA") == 0 and node.int_attr("transB") == 1
        return "dense" if transposed and len(shape) == 2 else None
    if node.op == "MatMul" and w.ndim == 2 and node.inputs[0] != node.inputs[1]:
        return "dense"
    return None


def layer_rows(
    graph: Graph, node: Node, x: np.ndarray, keep: int | None = None, rng: np.random.Generator | None = None
) -> np.ndarray | None:
    """The rows that `node`'s constant weight multiplies when it reads `x`, float32
    [groups, rows, n]: a 2-D convolution's patches per group (n = channels per group * kernel
    taps, the weight's flattening order), a dense layer's input rows (groups 1); None for a node
    that the lowering does not quantize this way. With `keep`, at most that many rows, drawn
    without replacement by `rng` (in their order)."""
    w = graph.const_data(node.inputs[1]) if len(node.inputs) > 1 else None
    layout = _layout(node, x.shape, w, x.dtype.name)
    if layout is None or w is None:
        return None
    if layout == "conv":
        strides, pads = node.ints_attr("strides"), node.ints_attr("pads")
        return _patches(x, w.shape[2:], strides, pads, node.int_attr("group"), keep, rng)
    rows = x.reshape(1, -1, x.shape[-1])
    return rows[:, _picks(rows.shape[1], keep, rng)]


def _picks(total: int, keep: int | None, rng: np.random.Generator | None) -> np.ndarray:
    if keep is None or keep >= total:
        return np.arange(total)
    return np.sort((rng or np.random.default_rng(ROW_SEED)).choice(total, keep, replace=False))


def _patches(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...], pads: tuple[int, ...],
             group: int, keep: int | None, rng: np.random.Generator | None) -> np.ndarray:
    """im2col of an NCHW input: [group, rows, C / group * kh * kw], the rows (N * out_h * out_w,
    or `keep` of them) in (image, y, x) order."""
    n, c = x.shape[:2]
    if group == c:
        return _depthwise_patches(x, kernel, strides, pads, keep, rng)
    padded = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3]))) if any(pads) else x
    win = sliding_window_view(padded, kernel, axis=(2, 3))[:, :, :: strides[0], :: strides[1]]
    oh, ow = win.shape[2:4]
    picks = _picks(n * oh * ow, keep, rng)
    image, y, xs = np.unravel_index(picks, (n, oh, ow))
    cols = win[image, :, y, xs].reshape(picks.size, group, c // group, kernel[0] * kernel[1])
    return np.ascontiguousarray(cols.transpose(1, 0, 2, 3)).reshape(group, picks.size, -1)


def _depthwise_patches(
    x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...], pads: tuple[int, ...], keep: int | None,
    rng: np.random.Generator | None,
) -> np.ndarray:
    """`_patches` of a convolution with one channel per group, [C, rows, kh * kw]: each
    channel's padded image flattened, and one gather of every row's taps from it (the
    windows' element-by-element gather took 8x as long on EfficientNet-Lite1's layers)."""
    n, c, h, w = x.shape
    rows_p, cols_p = h + pads[0] + pads[2], w + pads[1] + pads[3]
    grid = np.zeros((c, n, rows_p, cols_p), x.dtype)
    grid[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + w] = x.transpose(1, 0, 2, 3)
    oh, ow = (rows_p - kernel[0]) // strides[0] + 1, (cols_p - kernel[1]) // strides[1] + 1
    picks = _picks(n * oh * ow, keep, rng)
    image, y, xs = np.unravel_index(picks, (n, oh, ow))
    ky, kx = np.unravel_index(np.arange(kernel[0] * kernel[1]), kernel)
    pixel = (image[:, None] * rows_p + y[:, None] * strides[0] + ky) * cols_p + xs[:, None] * strides[1] + kx
    return np.take(grid.reshape(c, -1), pixel, axis=1)


def gptq_levels(w: np.ndarray, moment: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Int8 levels (-127..127) of weights `w` [groups, k, n] at per-row `scales` [groups, k],
    rounded in GPTQ's order (largest diagonal of the inputs' second moment `moment`
    [groups, n, n] first) with each column's error moved onto the later ones.

    A column whose input was always zero on the calibration data gets a unit diagonal: it is
    rounded to nearest and takes no error from the others (it may be nonzero on other data)."""
    groups = w.shape[0]
    h = np.array(moment, np.float64)
    diag = np.einsum("gii->gi", h)
    diag += (diag == 0) + DAMPING * diag.mean(axis=1, keepdims=True)  # a view: updates h
    order = np.argsort(-diag, axis=1, kind="stable")
    g = np.arange(groups)[:, None]
    h = h[g[:, :, None], order[:, :, None], order[:, None, :]]
    w_ordered = np.take_along_axis(np.asarray(w, np.float64), order[:, None, :], axis=2)
    levels = _round_columns(w_ordered, _upper_factor(h), np.asarray(scales, np.float64)[:, :, None])
    out = np.empty_like(levels)
    np.put_along_axis(out, order[:, None, :], levels, axis=2)
    return out.astype(np.int8)


def _upper_factor(h: np.ndarray) -> np.ndarray:
    """Upper triangular V with V V^T = h (a stack of symmetric positive definite matrices): the
    Cholesky factor of h with rows and columns reversed, reversed back."""
    return np.linalg.cholesky(h[:, ::-1, ::-1])[:, ::-1, ::-1]


def _round_columns(w: np.ndarray, v: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """GPTQ's loop: column j is rounded after adding sum_{i<j} d_i V_ij / V_jj, d_i = w_i - q_i
    the errors of the columns before it.

    This is GPTQ's update (the rows of the Cholesky factor U of H^-1, U^T U = H^-1) written with
    V = U^-1, so one Cholesky factorisation of H replaces an inverse and a factorisation. The
    output error's square is |d V|^2 and its j-th component, sum_{i<=j} d_i V_ij, is column j's
    own rounding error times V_jj: each is at most half a level unless the level saturates.

    The columns are kept as rows ([groups, n, k]: column j contiguous) and each step writes into
    buffers it owns, as the loop costs ~8 numpy calls per column (EfficientNet-Lite1: 12k columns,
    1.6x faster than on strided columns). Each element's operations, and their order, are those of
    the plain loop (`tests/compiler/quant/test_rounding.py` keeps it as the reference): the same
    quotient, rint, clip, product and sums, and each block's correction the same matrix product of
    the same contiguous operands."""
    v = v / np.einsum("gjj->gj", v)[:, None, :]
    rows = np.ascontiguousarray(w.transpose(0, 2, 1))  # [groups, n, k]
    target = rows.copy()
    levels = np.empty_like(rows)
    s = np.ascontiguousarray(scales[:, :, 0])  # [groups, k]
    error = np.empty_like(s)
    moved = np.empty((rows.shape[0], BLOCK, rows.shape[2]))
    n = rows.shape[1]
    for start in range(0, n, BLOCK):
        stop = min(start + BLOCK, n)
        for j in range(start, stop):
            q = levels[:, j]
            np.divide(target[:, j], s, out=q)
            np.rint(q, out=q)
            np.maximum(q, -INT8_MAX, out=q)
            np.minimum(q, INT8_MAX, out=q)
            np.multiply(q, s, out=error)
            np.subtract(rows[:, j], error, out=error)
            if j + 1 < stop:
                later = target[:, j + 1 : stop]
                part = moved[:, : stop - j - 1]
                np.multiply(v[:, j, j + 1 : stop, None], error[:, None, :], out=part)
                np.add(later, part, out=later)
        if stop < n:  # [groups, k, block] contiguous, as the plain loop's product reads it
            errors = np.ascontiguousarray((rows[:, start:stop] - levels[:, start:stop] * s[:, None, :])
                                          .transpose(0, 2, 1))
            target[:, stop:] += (errors @ v[:, start:stop, stop:]).transpose(0, 2, 1)
    return np.ascontiguousarray(levels.transpose(0, 2, 1))
