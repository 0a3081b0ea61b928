"""A QConv's or QGemm's accumulator summed per output channel, from its input alone: bias
correction needs only these sums (each channel's mean), not the accumulator.

A convolution is linear in its input: summed over the output positions, channel k's
accumulator is sum over (c, ky, kx) of w[k, c, ky, kx] * T[c, ky, kx], where T[c, ky, kx] is the
sum of the padded input values that tap (ky, kx) reads over all output positions: the input
rows that kernel row ky reads (ky - top, ky - top + stride, ... inside the input) times the
columns that kernel column kx reads, plus `pad_value` at every other output position. T is
separable: each row's sums over each kernel column's columns, then each channel's sums of
those over each kernel row's rows. A dense layer's channel sums are likewise the weights
times the input's column sums. On EfficientNet-Lite1's 63 convolutions and 48 calibration
inputs the sums take about 0.35 s where the accumulators took 5 (single process).

Exactness: every step is exact integer arithmetic (int64; int32, float32 or float64 only where
each partial sum is an integer inside the type's exact range, as each function says), so the
sums are the integer sums of the accumulator's values, bit for bit, where those values are not
wrapped to int32, i.e. where every accumulator sum of int8 products fits int32
(`qops._within_int32`'s condition); elsewhere, and for other operand types, `channel_sums`
says None and the caller computes the accumulator. Every partial
sum stays below 2**63: at most 2**22 positions (bias correction's limit for exact means) times
2**17 products of at most 2**14.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from compiler.graph.ir import AttrValue, attr_int, attr_ints

# Bias correction's means come from exact integer sums up to this many values per channel.
MAX_COUNT = 1 << 22


def channel_sums(op: str, x: np.ndarray, w: np.ndarray, attrs: Mapping[str, AttrValue],
                 inputs: int = 1) -> np.ndarray | None:
    """The int64 sums per output channel (inputs, K) of a QConv's (N, K, H', W') or a QGemm's
    (M, K) int32 accumulator for each of the `inputs` equal parts of `x` along its first axis
    (a layer's input on each calibration input, stacked) and weights `w`, computed without
    the accumulator; None where those sums could differ from the wrapped accumulator's (not
    int8 x int8, a sum that may leave int32) or count more than MAX_COUNT values per channel."""
    if x.dtype != np.int8 or w.dtype != np.int8 or inputs < 1 or x.ndim < 1 or x.shape[0] % inputs:
        return None
    n = x.shape[0] // inputs
    if op == "QGemm":
        if x.ndim != 2 or n > MAX_COUNT or not _fits_int32(x.shape[1]):
            return None
        totals = x.reshape(inputs, n, x.shape[1]).sum(axis=1, dtype=np.int64)  # (inputs, K_in)
        return _exact_matmul(w[None], totals.T[None])[0].T
    if op != "QConv" or x.ndim != 4 or not _fits_int32(w.shape[1] * w.shape[2] * w.shape[3]):
        return None
    geo = _Geometry.of(x.shape, w.shape[2:], attr_ints(attrs, "strides"), attr_ints(attrs, "pads"))
    if n * geo.positions > MAX_COUNT:
        return None
    fill = attr_int(attrs, "pad_value")
    group = attr_int(attrs, "group")
    k, per_group = w.shape[0], w.shape[1] * w.shape[2] * w.shape[3]
    if k == group == x.shape[1]:  # depthwise: one filter per channel
        return _depthwise_sums(x.reshape(inputs, n, *x.shape[1:]), w, geo, fill)
    taps = tap_sums(x, geo, fill).reshape(inputs, n, group, per_group).sum(axis=1)
    sums = _exact_matmul(w.reshape(group, k // group, per_group), taps.transpose(1, 2, 0))
    return sums.reshape(k, inputs).T  # type: ignore[no-any-return]  # (group, K / group, inputs)


def _depthwise_sums(x: np.ndarray, w: np.ndarray, geo: _Geometry, fill: int) -> np.ndarray:
    """`channel_sums` of a depthwise convolution, `x` (inputs, N, C, H, W): each channel's input
    values times how much of its filter reads them, V[c, i, j] = sum over (ky, kx) of
    w[c, ky, kx] where tap (ky, kx) of some output reads input (i, j), summed (int32 where 2**7
    times the largest sum of |V| over a channel's values, the batch's, fits int32, else int64),
    plus the padding's part: `fill` times each tap's weight times the outputs that read padding
    through it."""
    rows, cols = _reads(geo, 0).astype(np.int64), _reads(geo, 1).astype(np.int64)
    filters = w[:, 0].astype(np.int64)  # (C, kh, kw)
    v = np.matmul(np.matmul(rows, filters), cols.T)  # (C, H, W)
    inputs, n, c = x.shape[:3]
    kind = np.int32 if (n << 7) * int(np.abs(v).reshape(c, -1).sum(axis=1).max()) < 1 << 31 else np.int64
    images = x.reshape(inputs, n, c, -1)
    sums = np.einsum("encp,cp->ec", images, v.reshape(c, -1).astype(kind)).astype(np.int64)
    outside = geo.positions - rows.sum(axis=0)[:, None] * cols.sum(axis=0)[None, :]  # (kh, kw)
    sums += n * fill * np.einsum("cij,ij->c", filters, outside)
    return sums  # type: ignore[no-any-return]


def _exact_matmul(w: np.ndarray, t: np.ndarray) -> np.ndarray:
    """int8 `w` (G, K, T) times int64 `t` (G, T, inputs), exactly, as int64: a float64 matmul,
    whose every partial sum is an integer of at most 2**53 in size (T < 2**17 products, each at
    most 2**7 times |t| <= 2**7 * MAX_COUNT = 2**29)."""
    return np.matmul(w.astype(np.float64), t.astype(np.float64)).astype(np.int64)


def _fits_int32(terms: int) -> bool:
    """Whether every sum of `terms` int8 x int8 products (each at most 2**14 in size) fits int32."""
    return terms << 14 < 1 << 31


class _Geometry:
    """A 2-D convolution's shape: input (H, W), kernel, strides, pads (top, left, bottom,
    right) and output (H', W')."""

    def __init__(self, size: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
                 pads: tuple[int, int, int, int]) -> None:
        self.size, self.kernel, self.strides, self.pads = size, kernel, strides, pads
        self.out = tuple((size[i] + pads[i] + pads[i + 2] - kernel[i]) // strides[i] + 1 for i in range(2))

    @classmethod
    def of(cls, shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
           pads: Sequence[int]) -> _Geometry:
        return cls((shape[2], shape[3]), (kernel[0], kernel[1]), (strides[0], strides[1]),
                   (pads[0], pads[1], pads[2], pads[3]))

    @property
    def positions(self) -> int:
        return self.out[0] * self.out[1]

    def reads(self, axis: int, tap: int) -> tuple[int, int, int]:
        """Along `axis` (0 rows, 1 columns), what kernel offset `tap` reads of the input over
        the outputs: its stride phase, and the first and end index in that phase (end <= first:
        nothing, every output reads padding)."""
        size, stride, pad, out = self.size[axis], self.strides[axis], self.pads[axis], self.out[axis]
        first = max(0, -(-(pad - tap) // stride))  # the first output reading inside the input
        end = min(out, (size - 1 + pad - tap) // stride + 1) if size - 1 + pad - tap >= 0 else 0
        start = tap + first * stride - pad
        if end <= first:
            return 0, 0, 0
        return start % stride, start // stride, start // stride + end - first


def tap_sums(x: np.ndarray, geo: _Geometry, fill: int) -> np.ndarray:
    """T (N, C, kh, kw) int64: for each image of `x`, input channel and kernel tap, the sum
    over every output position of the padded input value the tap reads (padding reads `fill`).

    Separably: each row's sums over the columns that each kernel column reads (float64
    (N * C * H, kw)), then, per channel, those rows' sums that each kernel row reads: a matrix
    product with the 0/1 matrix of rows read (H, kh). Every value is an integer far below
    2**53, exact in float64."""
    n, c, h, w = x.shape
    if geo.kernel == geo.strides == (1, 1) and not any(geo.pads):  # pointwise: every value once
        per = x.reshape(n * c, h * w).sum(axis=1, dtype=np.int32 if h * w <= 1 << 24 else np.int64)
        return per.astype(np.int64).reshape(n, c, 1, 1)
    (kh, kw), rows = geo.kernel, _reads(geo, 0)
    cols = _column_sums(x.reshape(n * c * h, w), geo)
    t = np.tensordot(cols.reshape(n * c, h, kw), rows, axes=([1], [0]))  # (N * C, kw, kh)
    out = t.transpose(0, 2, 1).astype(np.int64).reshape(n, c, kh, kw)
    inside = rows.sum(axis=0)[:, None] * _reads(geo, 1).sum(axis=0)[None, :]
    out += (fill * (geo.positions - inside)).astype(np.int64)
    return out


def _reads(geo: _Geometry, axis: int) -> np.ndarray:
    """The 0/1 matrix (size, kernel) along `axis` (0 rows, 1 columns): entry (i, t) is 1 where
    some output reads input index i at kernel offset t (at most one output does)."""
    size, k = geo.size[axis], geo.kernel[axis]
    out = np.zeros((size, k), np.float64)
    for t in range(k):
        phase, first, end = geo.reads(axis, t)
        start = first * geo.strides[axis] + phase
        out[start : start + (end - first) * geo.strides[axis] : geo.strides[axis], t] = 1
    return out


# Rows at least this long are summed by numpy's reductions (fast on long contiguous rows),
# shorter ones by a matrix product with the 0/1 columns-read matrix.
LONG_ROW = 32


def _column_sums(x: np.ndarray, geo: _Geometry) -> np.ndarray:
    """Each row of `x` (rows, W) summed over the columns that each kernel column reads:
    (rows, kw) float64. Long rows with stride 1: the row's sum less its columns outside the
    read span (the padded edges); else a float32 matrix product (exact: at most 2**17 values
    of int8 per sum, below 2**24), float64 for longer rows."""
    kw, (stride, w) = geo.kernel[1], (geo.strides[1], x.shape[1])
    if w < LONG_ROW or stride > 1:
        exact = np.float32 if w < 1 << 17 else np.float64
        return (x.astype(exact) @ _reads(geo, 1).astype(exact)).astype(np.float64)  # type: ignore[no-any-return]
    full = x.sum(axis=1, dtype=np.int32 if w <= 1 << 24 else np.int64)
    out = np.empty((x.shape[0], kw), np.float64)
    for kx in range(kw):
        _, c0, c1 = geo.reads(1, kx)
        if c1 <= c0:
            out[:, kx] = 0
            continue
        kept = full.copy()
        for j in (*range(c0), *range(c1, w)):  # a few edge columns
            kept -= x[:, j]
        out[:, kx] = kept
    return out
