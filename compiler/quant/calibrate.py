"""Calibration: run the float graph on sample inputs and summarise every float tensor.

`collect` records, for each float32 activation (graph inputs and node outputs), a histogram of
|x|, the largest |x|, and the largest |x| of each channel (axis 1), which bounds the
accumulators of convolutions and dense layers. Calibrators turn a tensor's summary into the
threshold `amax` that int8 represents (scale = amax / 127, symmetric):

- `minmax`: the largest |x| seen; nothing saturates on the calibration data;
- `percentile`: the PERCENTILE-th percentile of |x|; a few outliers saturate, the rest gets
  finer steps;
- `entropy`: TensorRT's rule: the threshold whose 128-level quantized histogram is closest (KL
  divergence) to the clipped histogram;
- `mse`: the threshold with the least expected squared error (rounding plus saturation) on the
  histogram.

With `moments_for` ({weight name: rows per input}, compiler.quant.rounding.moment_plan),
`collect` also records the second moment E[x x^T] of the rows that each such weight multiplies
(compiler.quant.rounding.layer_rows, that many drawn from each input, of the first
`moment_inputs` inputs only), for rounding the weights to the smallest output error (GPTQ).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from compiler.graph.interp import evaluate_node, last_uses
from compiler.graph.ir import Graph, Node
from compiler.quant.errors import QuantizationError
from compiler.quant.forked import Ends, Forked, can_fork
from compiler.quant.rounding import ROW_SEED, layer_rows
from compiler.quant.summaries import InputSummary, Packed, pack, unpack

BINS = 2048
LEVELS = 128  # int8 magnitudes 0..127
PERCENTILE = 99.99
# Candidate thresholds are every STEP-th bin edge (the search is then a few hundred numpy ops).
STEP = 8


@dataclass
class TensorStats:
    """Counts of nonzero |x| in BINS bins over [0, top), top a power of two that doubles
    (merging bin pairs, exactly) when a larger value arrives; the count of exact zeros, which
    every scale represents exactly (left out of the histogram so that a ReLU's spike at 0 does
    not steer the entropy search); the largest |x|; the largest |x| and the sum of x along
    axis 1 and along the last axis (channels of NCHW and of dense outputs; not W of a 4-d
    tensor), for accumulator bounds and bias correction; and along those axes the second
    largest of the inputs' own largest |x| (`axis_runner_up`: how far one input stands out,
    compiler.quant.static.settled_channels)."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(BINS, np.int64))
    zeros: int = 0
    top: float = 0.0
    absmax: float = 0.0
    axis_absmax: dict[int, np.ndarray] = field(default_factory=dict)
    axis_sum: dict[int, np.ndarray] = field(default_factory=dict)
    axis_count: dict[int, int] = field(default_factory=dict)
    axis_runner_up: dict[int, np.ndarray] = field(default_factory=dict)

    def add(self, x: np.ndarray) -> None:
        self.fold(summarize(x))

    def fold(self, s: InputSummary) -> None:
        """Add one input's summary, as `add` of that input does: the running top doubles (bin
        pairs merging) until it covers the input, whose own histogram is brought to it."""
        self.absmax = max(self.absmax, s.absmax)
        for axis, per in s.maxima.items():
            self._add_axis(axis, per, s.sums[axis], s.rows[axis])
        self.zeros += s.zeros
        if s.absmax > 0 and self.top == 0.0:
            self.top = s.top
        while s.absmax > self.top:
            self.counts = _merged_pairs(self.counts)
            self.top *= 2.0
        if s.counts is not None and s.top == self.top and not s.at_top:
            self.counts += s.counts  # already binned over [0, top): no int64 copy
        elif s.counts is not None:
            self.counts += _rebinned(s, self.top)

    def _add_axis(self, axis: int, per: np.ndarray, total: np.ndarray, rows: int) -> None:
        """Fold one input's maxima of |x| along `axis` (`per`) and its sums into the statistics."""
        seen = self.axis_absmax.get(axis)
        runner_up = self.axis_runner_up.get(axis, np.zeros_like(per))
        if seen is not None:  # the smaller of this input's max and the max so far may be it
            runner_up = np.maximum(runner_up, np.minimum(seen, per))
        self.axis_runner_up[axis] = runner_up
        self.axis_absmax[axis] = per if seen is None else np.maximum(seen, per)
        self.axis_sum[axis] = self.axis_sum.get(axis, 0.0) + total
        self.axis_count[axis] = self.axis_count.get(axis, 0) + rows

    @property
    def width(self) -> float:
        return self.top / BINS

    def axis_mean(self, axis: int) -> np.ndarray:
        """The mean of x per index of `axis` (1 or the last) over everything seen."""
        return self.axis_sum[axis] / self.axis_count[axis]


def summarize(x: np.ndarray) -> InputSummary:
    """One input's statistics of tensor `x`, in few passes (calibration makes them for every
    activation of every input): the largest |x| is the largest channel maximum, zeros are
    counted on |x|'s bits, the bin indices are computed in |x|'s own buffer, and the values at
    `top` are counted in one bin past the histogram (no clipping pass, no comparison pass)."""
    a = np.asarray(np.abs(x.astype(np.float32, copy=False)))  # new, dense in x's memory order
    maxima = {axis: a.max(axis=_others(a.ndim, axis), initial=0.0).astype(np.float64)
              for axis in _channel_axes(a.ndim)}
    m = float(maxima[1].max(initial=0.0)) if maxima else float(a.max(initial=0.0))
    if not math.isfinite(m):  # NaN wins a max, so one NaN or infinity anywhere shows here
        raise QuantizationError(f"holds {'NaN' if math.isnan(m) else 'infinite'} values")
    sums = {axis: x.sum(axis=_others(x.ndim, axis), dtype=np.float64) for axis in maxima}
    rows = {axis: x.size // x.shape[axis] for axis in maxima}
    zeros = a.size - int(np.count_nonzero(a.view(np.int32)))  # |x| == 0 where its bits are
    top = 2.0 ** math.ceil(math.log2(m)) if m > 0 else 0.0
    if zeros == a.size:
        return InputSummary(m, zeros, top, None, 0, maxima, sums, rows)
    counts, at_top = _bin_counts(a, m, top)
    counts[0] -= zeros  # the zeros fell in the first bin: only nonzero |x| are counted
    return InputSummary(m, zeros, top, counts.astype(np.int32), at_top, maxima, sums, rows)


def _bin_counts(a: np.ndarray, m: float, top: float) -> tuple[np.ndarray, int]:
    """The counts of |x| `a` (largest `m`) in BINS bins over [0, `top`), those equal to top left
    out, and how many equal top (`at_top`), computed in a's own buffer. |x| * (BINS / top), a
    power of two, is exact near BINS: below BINS for |x| < top, BINS for |x| == top, so those
    land in one bin past the histogram, without a clipping pass or a comparison pass; only a
    top so small that BINS / top overflows float32 takes both."""
    scale = np.float32(BINS / top)
    if math.isfinite(scale):
        scaled = np.multiply(a, scale, out=a).ravel(order="K")  # counts need no order
        counts = np.bincount(scaled.astype(np.intp), minlength=BINS + 1)
        return counts[:BINS], int(counts[BINS])
    at_top = int(np.count_nonzero(a == np.float32(m))) if m == top else 0
    scaled = np.multiply(a, scale, out=a).ravel(order="K")
    np.minimum(scaled, np.float32(BINS - 1), out=scaled)
    counts = np.bincount(scaled.astype(np.intp), minlength=BINS)
    counts[BINS - 1] -= at_top  # |x| == top is placed by TensorStats.fold
    return counts, at_top


def _merged_pairs(counts: np.ndarray) -> np.ndarray:
    """Counts over twice the range: bin pairs merged (exactly), the upper half empty."""
    return np.concatenate([counts.reshape(-1, 2).sum(axis=1), np.zeros(BINS // 2, counts.dtype)])


def _rebinned(s: InputSummary, top: float) -> np.ndarray:
    """`s.counts` over [0, `top`) (top >= s.top, both powers of two): a value's bin
    floor(v * BINS / top) is its bin at s.top halved that many times (an exact floor), and the
    values equal to s.top go where floor(min(s.top * BINS / top, BINS - 1)) puts them."""
    assert s.counts is not None
    counts, at = s.counts.astype(np.int64), s.top
    while at < top:
        counts = _merged_pairs(counts)
        at *= 2.0
    if s.at_top:
        counts[min(int(s.top * BINS / top), BINS - 1)] += s.at_top
    return counts


def channel_axis(ndim: int) -> int:
    """The channel axis of an activation as the quantizer reads it: 1 of NCHW, else the last
    (dense outputs, token rows)."""
    return 1 if ndim == 4 else ndim - 1


def _others(ndim: int, axis: int) -> tuple[int, ...]:
    return tuple(i for i in range(ndim) if i != axis)


def _channel_axes(ndim: int) -> tuple[int, ...]:
    """The axes TensorStats summarises: 1 and the channel axis (a 4-d tensor's W is neither)."""
    return tuple(sorted({1, channel_axis(ndim)})) if ndim >= 2 else ()


Calibrator = Callable[[TensorStats], float]


def minmax(stats: TensorStats) -> float:
    return stats.absmax


def percentile(stats: TensorStats, pct: float = PERCENTILE) -> float:
    """The upper edge of the bin where the cumulative count reaches `pct` percent."""
    total = stats.counts.sum() + stats.zeros
    if stats.top == 0.0:
        return stats.absmax
    index = int(np.searchsorted(stats.zeros + np.cumsum(stats.counts), pct / 100.0 * total))
    return min(stats.absmax, (index + 1) * stats.width)


def _used_bins(stats: TensorStats) -> int:
    nonzero = np.nonzero(stats.counts)[0]
    return int(nonzero[-1]) + 1 if nonzero.size else 0


def entropy(stats: TensorStats) -> float:
    """TensorRT's KL-divergence threshold over the |x| histogram (128 levels)."""
    used = _used_bins(stats)
    if used <= LEVELS or stats.top == 0.0:
        return stats.absmax
    counts = stats.counts[:used].astype(np.float64)
    best, best_kl = used, math.inf
    for i in range(LEVELS, used + 1, STEP):
        kl = _kl_at(counts, i)
        if kl < best_kl:
            best, best_kl = i, kl
    return min(stats.absmax, best * stats.width)


def _kl_at(counts: np.ndarray, i: int) -> float:
    """KL(P || Q): P = the first i bins with the outliers added to the last; Q = P's bins merged
    into LEVELS groups and spread back evenly over each group's non-empty bins."""
    p = counts[:i].copy()
    p[-1] += counts[i:].sum()
    groups = np.minimum(np.arange(i) * LEVELS // i, LEVELS - 1)
    sums = np.bincount(groups, weights=counts[:i], minlength=LEVELS)
    nonzero = np.bincount(groups, weights=(p > 0).astype(np.float64), minlength=LEVELS)
    q = np.where(p > 0, sums[groups] / np.maximum(nonzero[groups], 1.0), 0.0)
    p, q = p / p.sum(), q / max(q.sum(), 1e-300)
    mask = p > 0
    q = np.where(mask & (q == 0), 1e-10, q)
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def mse(stats: TensorStats) -> float:
    """The threshold with the least expected squared int8 error over the histogram's bin centres."""
    used = _used_bins(stats)
    if used == 0 or stats.top == 0.0:
        return stats.absmax
    centres = (np.arange(used) + 0.5) * stats.width
    counts = stats.counts[:used].astype(np.float64)
    candidates = np.append(np.arange(1, used + 1, STEP) * stats.width, stats.absmax)
    scales = candidates[:, None] / (LEVELS - 1)
    err = centres[None, :] - np.minimum(np.rint(centres[None, :] / scales), LEVELS - 1) * scales
    cost = (err**2 * counts[None, :]).sum(axis=1)
    return float(min(stats.absmax, candidates[int(np.argmin(cost))]))


CALIBRATORS: dict[str, Calibrator] = {
    "minmax": minmax,
    "percentile": percentile,
    "entropy": entropy,
    "mse": mse,
}


@dataclass
class Calibration:
    """Statistics of every float32 activation of a graph, by value name, and the second moments
    [groups, n, n] of the dense layers' input rows, by weight name (empty unless collected)."""

    stats: dict[str, TensorStats]
    samples: int
    moments: dict[str, np.ndarray] = field(default_factory=dict)

    def amax(self, name: str, method: str) -> float:
        if method not in CALIBRATORS:
            raise QuantizationError(f"unknown calibration method {method!r}; known: {', '.join(CALIBRATORS)}")
        return CALIBRATORS[method](self.stats[name])


def collect(
    graph: Graph,
    inputs: Iterable[Mapping[str, np.ndarray]],
    moments_for: Mapping[str, int] | None = None,
    moment_inputs: int | None = None,
    workers: int | None = None,
) -> Calibration:
    """Run `graph` (float) on each input dict and gather every float32 activation's statistics,
    and the second moments of the input rows of the weights named in `moments_for`, from at
    most the given number of rows of each of the first `moment_inputs` inputs (None: all).

    With `workers` 2 (None: 2 where `parallel_worth` says so and compiler.quant.forked.can_fork),
    a forked process summarises inputs meanwhile, taking them from the last down while this one
    takes them from the first up (compiler.quant.forked.Ends: the inputs whose moments are
    wanted cost more and are this process's alone), until they meet; the worker's summaries are
    folded in input order after this process's, so the statistics are those of one process,
    bit for bit."""
    feeds = list(inputs)
    if not feeds:
        raise QuantizationError("calibration needs at least one input")
    stats: dict[str, TensorStats] = {}
    sums = _MomentSums(dict(moments_for or {}))
    moment_count = len(feeds) if moment_inputs is None else moment_inputs
    split = split_point(graph, len(feeds), moment_count if moments_for else 0, workers)

    def fold(name: str, summary: InputSummary) -> None:
        stats.setdefault(name, TensorStats()).fold(summary)

    ends = _shared(len(feeds), moment_count if moments_for else 0) if split < len(feeds) else None
    if ends is None:
        _summarize_inputs(graph, feeds, fold, sums, moment_count)
        return Calibration(stats, len(feeds), sums.means())
    with Forked(lambda: _summaries(graph, feeds, ends.back())) as child:
        _summarize_inputs(graph, feeds, fold, sums, moment_count, ends.front())
        later = child.join()
    for _, packed in sorted(later, key=lambda item: item[0]):  # taken from the last down
        for name, summary in unpack(packed):
            fold(name, summary)
    return Calibration(stats, len(feeds), sums.means())


def _shared(count: int, reserved: int) -> Ends | None:
    """The inputs shared out between this process and a worker, or None where no lock can be
    shared across a fork here (no POSIX semaphores, e.g. without /dev/shm): one process then."""
    try:
        return Ends(count, reserved)
    except OSError:
        return None


# Forking pays from this many activation elements over all the inputs (EfficientNet-Lite1 on 48
# inputs: about 1e9); small graphs stay in one process.
PARALLEL_ELEMENTS = 1 << 26


def parallel_worth(graph: Graph, count: int) -> bool:
    """Whether running `graph` on `count` inputs (to calibrate it, or to correct its biases) is
    long enough to split over two processes."""
    elements = sum(math.prod(v.shape) for v in graph.values.values() if v.data is None)
    return count >= 4 and elements * count >= PARALLEL_ELEMENTS


def split_point(graph: Graph, count: int, moment_count: int, workers: int | None) -> int:
    """How many inputs (the first) this process takes: all, or half where a forked worker takes
    the rest (never inputs whose moments are wanted: their row samples are drawn in order).
    Bias correction splits there; calibration forks where this is below `count` and then shares
    the inputs out as each process gets to them (`collect`)."""
    if workers is None:
        workers = 2 if parallel_worth(graph, count) and can_fork() else 1
    if workers < 2 or count < 2:
        return count
    split = max((count + 1) // 2, moment_count)
    return min(split, count)


Sink = Callable[[str, InputSummary], None]


def _summarize_inputs(graph: Graph, feeds: list[Mapping[str, np.ndarray]], sink: Sink,
                      sums: _MomentSums | None = None, moment_count: int = 0,
                      order: Iterable[int] | None = None) -> None:
    """Run `graph` on each of `feeds` (those of `order`, indices in the order given), passing
    every float32 activation's summary to `sink` in order; the moment sums of the first
    `moment_count` inputs go to `sums`."""
    last = last_uses(graph)
    for index in range(len(feeds)) if order is None else order:
        env = _feeds(graph, feeds[index])
        moments = sums is not None and index < moment_count
        for name in graph.inputs:
            _observe(sink, name, env[name])
        for i, node in enumerate(graph.nodes):
            if moments and sums is not None and len(node.inputs) > 1 and node.inputs[1] in sums.plan:
                sums.add(graph, node, env[node.inputs[0]])
            outs = evaluate_node(graph, node, [env[x] for x in node.inputs])
            for name, array in zip(node.outputs, outs, strict=True):
                env[name] = array
                _observe(sink, name, array)
            for name in last.get(i, ()):
                env.pop(name, None)


def _summaries(graph: Graph, feeds: list[Mapping[str, np.ndarray]],
               order: Iterable[int]) -> list[tuple[int, Packed]]:
    """The activation summaries of the inputs of `order`, each input's packed for the pipe
    (compiler.quant.summaries) with its index: what a forked worker sends back."""
    out: list[tuple[int, Packed]] = []
    for index in order:
        summaries: list[tuple[str, InputSummary]] = []
        _summarize_inputs(graph, feeds, _appender(summaries), order=(index,))
        out.append((index, pack(summaries)))
    return out


def _appender(to: list[tuple[str, InputSummary]]) -> Sink:
    return lambda name, summary: to.append((name, summary))


@dataclass
class _MomentSums:
    """Running sums of X^T X and row counts of the input rows X of the weights in `plan`, by
    weight name, X at most plan[name] rows of each input (float32 like the activations: a sum
    over a few calibration inputs loses nothing GPTQ sees)."""

    plan: dict[str, int]
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(ROW_SEED))

    def add(self, graph: Graph, node: Node, x: np.ndarray) -> None:
        rows = layer_rows(graph, node, x, self.plan[node.inputs[1]], self.rng)
        if rows is None:
            return
        name = node.inputs[1]
        # X^T X of a single group as a 2-D product, which BLAS computes as a symmetric update
        product = (rows[0].T @ rows[0])[None] if rows.shape[0] == 1 else np.swapaxes(rows, 1, 2) @ rows
        if name in self.sums:
            self.sums[name] += product
        else:
            self.sums[name] = product
        self.rows[name] = self.rows.get(name, 0) + rows.shape[1]

    def means(self) -> dict[str, np.ndarray]:
        for name, total in self.sums.items():
            total /= np.float32(self.rows[name])  # in place: ResNet-18's moments take 370 MB
        return self.sums


def _feeds(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    env = {k: v.data for k, v in graph.values.items() if v.data is not None}
    for name in graph.inputs:
        if name not in feeds:
            raise QuantizationError(f"calibration input lacks graph input {name}")
        array, value = np.asarray(feeds[name]), graph.values[name]
        if array.shape != value.shape or array.dtype.name != value.dtype:
            raise QuantizationError(
                f"calibration input {name} is {array.dtype.name}{list(array.shape)}, "
                f"the graph expects {value.type_str()}"
            )
        env[name] = array
    return env


def _observe(sink: Sink, name: str, array: np.ndarray) -> None:
    if array.dtype == np.float32:
        try:
            summary = summarize(array)
        except QuantizationError as exc:
            raise QuantizationError(f"calibration: {name!r} {exc} on a calibration input: the float model "
                                    "overflows float32 there (weights or inputs out of range), so it has "
                                    "no int8 scale") from None
        sink(name, summary)
