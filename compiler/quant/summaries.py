"""One input's statistics of one tensor (`InputSummary`, made by compiler.quant.calibrate.summarize
and folded into its TensorStats), and the compact form in which a forked calibration worker
sends an input's summaries back.

    pack(summaries) -> Packed      [(name, InputSummary), ...] as two arrays and a list of tuples
    unpack(packed)  -> the same [(name, InputSummary), ...], every array equal to the original

An input of EfficientNet-Lite1 has ~125 summaries of four small arrays each: pickled one by one,
a worker's 28 inputs took ~0.2 s to pickle and as long to unpickle, while the other core waited;
packed, each input is two arrays (the histograms, the channel maxima and sums) and a list of
tuples of numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InputSummary:
    """What one input's tensor adds to its TensorStats (`summarize`), for `TensorStats.fold`:
    its largest |x|, zeros, the power of two `top` at or above that (0 for an all-zero tensor),
    the nonzero |x| below `top` in BINS bins over [0, top) (None: all zero) and how many equal
    `top` (`at_top`: a largest |x| that is a power of two, binned where the running top puts
    it), and per channel axis its maxima of |x|, its sums and the rows summed."""

    absmax: float
    zeros: int
    top: float
    counts: np.ndarray | None
    at_top: int
    maxima: dict[int, np.ndarray]
    sums: dict[int, np.ndarray]
    rows: dict[int, int]


# name, absmax, zeros, top, at_top, histogram length (0: none), (axis, rows, channels) per axis
Head = tuple[str, float, int, float, int, int, tuple[tuple[int, int, int], ...]]


@dataclass(frozen=True)
class Packed:
    """Summaries as `pack` makes them: their scalars (`heads`), their histograms end to end
    (`counts`, int32) and their per-axis maxima and sums end to end (`floats`, float64: each
    axis's maxima, then its sums)."""

    heads: list[Head]
    counts: np.ndarray
    floats: np.ndarray


def pack(summaries: list[tuple[str, InputSummary]]) -> Packed:
    heads: list[Head] = []
    counts: list[np.ndarray] = []
    floats: list[np.ndarray] = []
    for name, s in summaries:
        axes = tuple((axis, s.rows[axis], s.maxima[axis].size) for axis in s.maxima)
        size = 0 if s.counts is None else s.counts.size
        heads.append((name, s.absmax, s.zeros, s.top, s.at_top, size, axes))
        if s.counts is not None:
            counts.append(s.counts)
        for axis in s.maxima:
            floats += (s.maxima[axis], s.sums[axis])
    return Packed(heads, _joined(counts, np.int32), _joined(floats, np.float64))


def unpack(packed: Packed) -> list[tuple[str, InputSummary]]:
    out = []
    at_count = at_float = 0
    for name, absmax, zeros, top, at_top, size, axes in packed.heads:
        counts = None
        if size:
            counts = packed.counts[at_count : at_count + size]
            at_count += size
        maxima, sums, rows = {}, {}, {}
        for axis, count, channels in axes:
            maxima[axis] = packed.floats[at_float : at_float + channels]
            sums[axis] = packed.floats[at_float + channels : at_float + 2 * channels]
            rows[axis] = count
            at_float += 2 * channels
        out.append((name, InputSummary(absmax, zeros, top, counts, at_top, maxima, sums, rows)))
    return out


def _joined(arrays: list[np.ndarray], dtype: type) -> np.ndarray:
    """The 1-d arrays end to end, as `dtype` (which each of them has)."""
    if not arrays:
        return np.zeros(0, dtype)
    if any(a.dtype != dtype or a.ndim != 1 for a in arrays):
        raise TypeError(f"summaries pack 1-d {np.dtype(dtype).name} arrays only")
    return np.concatenate(arrays)
