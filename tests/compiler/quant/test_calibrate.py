"""Calibration statistics and the calibrators, on distributions whose answers are known."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.graph import Graph, const
from compiler.graph.builder import append
from compiler.quant import QuantizationError, collect
from compiler.quant.calibrate import (
    BINS,
    PARALLEL_ELEMENTS,
    TensorStats,
    entropy,
    minmax,
    mse,
    parallel_worth,
    percentile,
    summarize,
)
from tests.compiler.quant.graphs import inputs, small_cnn


def test_histogram_grows_by_merging_bins_exactly() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.normal(0, s, 5000).astype(np.float32) for s in (0.1, 1.0, 7.0)]
    stats = TensorStats()
    for p in parts:
        stats.add(p)
    values = np.abs(np.concatenate(parts))
    top = 2.0 ** np.ceil(np.log2(values.max()))
    assert stats.top == top and stats.absmax == values.max()
    expected, _ = np.histogram(values, BINS, (0.0, top))
    np.testing.assert_array_equal(stats.counts, expected)


def test_exact_zeros_are_counted_apart() -> None:
    stats = TensorStats()
    stats.add(np.array([0.0, 0.0, 0.0, 1.5, -3.0], np.float32))
    assert stats.zeros == 3 and stats.counts.sum() == 2 and stats.absmax == 3.0
    stats.add(np.zeros(4, np.float32))
    assert stats.zeros == 7


def test_negative_zeros_and_a_value_at_the_top_edge_bin_like_histogram() -> None:
    x = np.array([[[[-0.0, 0.0], [4.0, -1.0]], [[0.5, -4.0], [-0.0, 3.999]]]], np.float32)
    kept = x.copy()
    stats = TensorStats()
    stats.add(x[:, :, :, ::-1])  # a strided view too
    np.testing.assert_array_equal(x, kept)  # the input is read, never written
    assert stats.zeros == 3 and stats.top == 4.0 and stats.absmax == 4.0
    nonzero = np.abs(x[x != 0])
    expected, _ = np.histogram(nonzero, BINS, (0.0, 4.0))  # its last bin is closed: 4.0 lands in it
    np.testing.assert_array_equal(stats.counts, expected)
    np.testing.assert_array_equal(stats.axis_absmax[1], [4.0, 4.0])
    small = TensorStats()
    small.add(np.array([[-3, 0, 127]], np.int8))
    assert small.zeros == 1 and small.absmax == 127.0 and small.top == 128.0


@pytest.mark.parametrize("top", [2.0**-20, 1.0, 8.0, 2.0**40])
def test_one_inputs_bins_and_the_values_at_top_against_floor_in_float64(top: float) -> None:
    """Channels-last memory, values exactly at top, at bin edges and just below top: each bin is
    floor(|x| * BINS / top) (exact in float64), the values equal to top are counted apart."""
    rng = np.random.default_rng(5)
    x = (rng.uniform(-top, top, (2, 5, 6, 3)).astype(np.float32)).transpose(0, 3, 1, 2)
    x[0, 0, 0, :3] = [top, -top, np.nextafter(np.float32(top), np.float32(0))]
    x[1, 2, 4, :3] = [top / 2, -top * 3 / BINS, 0.0]
    s = summarize(x)
    a = np.abs(x.astype(np.float64))
    below = a[(a < top) & (a > 0)]
    expected = np.bincount(np.floor(below * BINS / top).astype(np.int64), minlength=BINS)
    assert s.top == top and s.absmax == top and s.at_top == 2 and s.zeros == 1
    assert s.counts is not None
    np.testing.assert_array_equal(s.counts, expected)


def test_channel_maxima_along_axis_1_and_the_last_axis() -> None:
    stats = TensorStats()
    x = np.zeros((2, 3, 4), np.float32)
    x[1, 2, 0] = -5.0
    x[0, 0, 3] = 2.0
    stats.add(x)
    np.testing.assert_array_equal(stats.axis_absmax[1], [2.0, 0.0, 5.0])
    np.testing.assert_array_equal(stats.axis_absmax[2], [5.0, 0.0, 0.0, 2.0])
    nchw = TensorStats()
    nchw.add(x[:, :, None, :])  # 4-d: channels on axis 1 only (the last axis is W)
    assert sorted(nchw.axis_absmax) == [1] and sorted(nchw.axis_sum) == [1]
    np.testing.assert_array_equal(nchw.axis_absmax[1], [2.0, 0.0, 5.0])


def test_runner_up_is_the_second_largest_input_maximum_per_channel() -> None:
    stats = TensorStats()
    # channel maxima of three inputs: [1, 4, 0], [3, 2, 0], [2, 8, 5]
    for maxima in ([1.0, 4.0, 0.0], [3.0, -2.0, 0.0], [-2.0, 8.0, 5.0]):
        x = np.zeros((1, 3, 2, 2), np.float32)
        x[0, :, 1, 0] = maxima
        stats.add(x)
    np.testing.assert_array_equal(stats.axis_absmax[1], [3.0, 8.0, 5.0])
    np.testing.assert_array_equal(stats.axis_runner_up[1], [2.0, 4.0, 0.0])
    one = _stats(np.ones((1, 2, 1, 1)))
    np.testing.assert_array_equal(one.axis_runner_up[1], [0.0, 0.0])  # one input: no runner-up


def _stats(values: np.ndarray) -> TensorStats:
    stats = TensorStats()
    stats.add(values.astype(np.float32))
    return stats


def test_minmax_and_percentile_on_a_uniform_ramp() -> None:
    ramp = np.arange(1, 100_001, dtype=np.float64) / 1000.0  # 0.001 .. 100
    stats = _stats(ramp)
    assert minmax(stats) == pytest.approx(100.0)
    assert percentile(stats, 99.0) == pytest.approx(99.0, abs=128 / BINS)  # one bin of [0, 128)
    assert percentile(stats, 50.0) == pytest.approx(50.0, abs=128 / BINS)
    # zeros count toward the percentile: with as many zeros as values, the 99th is the 98th of the rest
    with_zeros = _stats(np.concatenate([ramp, np.zeros_like(ramp)]))
    assert percentile(with_zeros, 99.0) == pytest.approx(98.0, abs=128 / BINS)


def _int8_error(values: np.ndarray, amax: float) -> float:
    """Mean squared error of symmetric int8 quantization at threshold amax, on the samples."""
    s = amax / 127
    return float(np.mean((values - np.clip(np.rint(values / s), -127, 127) * s) ** 2))


def test_mse_finds_the_threshold_a_brute_force_search_finds() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(0.0, 1.0, 200_000), rng.normal(0.0, 8.0, 40)])
    grid = np.linspace(1.0, np.abs(values).max(), 400)
    best = min(_int8_error(values, t) for t in grid)
    amax = mse(_stats(values))
    assert amax < np.abs(values).max()
    assert _int8_error(values, amax) <= 1.05 * best


def test_entropy_cuts_rare_outliers_of_a_gaussian() -> None:
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(0.0, 1.0, 200_000), [60.0, -55.0]])
    assert 2.5 < entropy(_stats(values)) < 8.0


def test_mse_keeps_the_range_of_a_uniform_distribution() -> None:
    values = np.random.default_rng(2).uniform(-1.0, 1.0, 100_000)
    assert mse(_stats(values)) == pytest.approx(1.0, abs=0.02)


def test_relu_spike_at_zero_does_not_drag_entropy_down() -> None:
    rng = np.random.default_rng(3)
    relu = np.maximum(rng.normal(0.0, 1.0, 100_000), 0.0)
    assert 2.0 < entropy(_stats(relu)) <= relu.max()


def _tiny() -> Graph:
    g = Graph()
    g.add_input("x", (1, 2, 3), "float32")
    g.add_value(const("w", np.array([[1.0, -1.0, 2.0], [0.5, 0.0, 0.0], [0.0, 0.0, -3.0]], np.float32)))
    append(g, "MatMul", ["x", "w"], ["y"])
    append(g, "Relu", ["y"], ["z"])
    g.outputs = ["z"]
    return g


def test_collect_summarises_inputs_and_every_float_output() -> None:
    xs = [{"x": np.array([[[1.0, 2.0, 0.0], [0.0, -1.0, 1.0]]], np.float32)}]
    cal = collect(_tiny(), xs)
    assert cal.samples == 1 and sorted(cal.stats) == ["x", "y", "z"]
    y = xs[0]["x"] @ np.asarray(_tiny().const_data("w"))  # [[2, 1, 2], [-0.5, 1, -3]]
    assert cal.stats["y"].absmax == 3.0 == np.abs(y).max()
    np.testing.assert_array_equal(cal.stats["y"].axis_absmax[2], np.abs(y).max(axis=(0, 1)))
    assert cal.amax("z", "minmax") == 2.0


def test_collect_averages_the_second_moment_of_the_chosen_layers_inputs() -> None:
    rng = np.random.default_rng(5)
    xs = [{"x": rng.standard_normal((1, 2, 3)).astype(np.float32)} for _ in range(3)]
    assert collect(_tiny(), xs).moments == {}
    cal = collect(_tiny(), xs, moments_for={"w": 2})
    rows = np.concatenate([x["x"].reshape(2, 3) for x in xs]).astype(np.float64)
    assert sorted(cal.moments) == ["w"] and cal.moments["w"].shape == (1, 3, 3)
    np.testing.assert_allclose(cal.moments["w"][0], rows.T @ rows / 6, rtol=1e-6)
    # one of each input's two rows: the moment is that of one of the 8 choices
    sampled = collect(_tiny(), xs, moments_for={"w": 1}).moments["w"][0]
    choices = [rows[[0 + a, 2 + b, 4 + c]] for a, b, c in itertools.product((0, 1), repeat=3)]
    assert any(np.allclose(sampled, r.T @ r / 3, rtol=1e-5, atol=1e-6) for r in choices)
    # the first input's moment only; the statistics still see all three
    first = collect(_tiny(), xs, moments_for={"w": 2}, moment_inputs=1)
    np.testing.assert_allclose(first.moments["w"][0], rows[:2].T @ rows[:2] / 2, rtol=1e-6)
    assert first.samples == 3 and first.stats["x"].absmax == cal.stats["x"].absmax


@pytest.mark.parametrize(
    "feeds,match",
    [
        ([], r"^calibration needs at least one input$"),
        ([{}], r"^calibration input lacks graph input x$"),
        (
            [{"x": np.zeros((1, 3, 2), np.float32)}],
            r"^calibration input x is float32\[1, 3, 2\], the graph expects float32\[1,2,3\]$",
        ),
    ],
    ids=["none", "missing", "shape"],
)
def test_collect_rejects_bad_calibration_data(feeds: list, match: str) -> None:
    with pytest.raises(QuantizationError, match=match):
        collect(_tiny(), feeds)


def test_unknown_method() -> None:
    cal = collect(_tiny(), [{"x": np.ones((1, 2, 3), np.float32)}])
    with pytest.raises(
        QuantizationError, match=r"^unknown calibration method 'kl'; known: minmax, percentile, entropy, mse$"
    ):
        cal.amax("x", "kl")


def _same_stats(a: TensorStats, b: TensorStats) -> None:
    assert (a.zeros, a.top, a.absmax, a.axis_count) == (b.zeros, b.top, b.absmax, b.axis_count)
    np.testing.assert_array_equal(a.counts, b.counts)
    for field in ("axis_absmax", "axis_sum", "axis_runner_up"):
        x, y = getattr(a, field), getattr(b, field)
        assert sorted(x) == sorted(y)
        for axis in x:
            np.testing.assert_array_equal(x[axis].view(np.int64), y[axis].view(np.int64))


def test_a_forked_worker_gives_one_processs_statistics_bit_for_bit() -> None:
    g = small_cnn()
    feeds = inputs(g, 7, seed=2)
    feeds[4]["x"] = feeds[4]["x"].copy()
    feeds[4]["x"].flat[0] = 64.0  # a largest |x| that is a power of two (the last bin of top 64)
    feeds[5]["x"] = feeds[5]["x"] * 9
    feeds[5]["x"].flat[1] = -200.0  # the top doubles twice: that bin's pairs merge in order
    one = collect(g, feeds, moments_for={"w1": 8}, moment_inputs=3, workers=1)
    two = collect(g, feeds, moments_for={"w1": 8}, moment_inputs=3, workers=2)
    assert list(one.stats) == list(two.stats) and one.samples == two.samples == 7
    for name in one.stats:
        _same_stats(one.stats[name], two.stats[name])
    assert sorted(one.moments) == sorted(two.moments) == ["w1"]
    np.testing.assert_array_equal(one.moments["w1"], two.moments["w1"])


def test_a_bad_input_in_the_workers_half_is_reported_as_in_one_process() -> None:
    g = small_cnn()
    feeds = inputs(g, 6, seed=2)
    feeds[4]["x"] = feeds[4]["x"].copy()
    feeds[4]["x"].flat[3] = np.nan
    for workers in (1, 2):
        with pytest.raises(QuantizationError, match=r"^calibration: 'x' holds NaN values on a calibration"):
            collect(g, feeds, workers=workers)
    feeds[4] = {}
    with pytest.raises(QuantizationError, match=r"^calibration input lacks graph input x$"):
        collect(g, feeds, workers=2)


def test_only_long_calibrations_are_split() -> None:
    g = small_cnn()
    assert not parallel_worth(g, 48)  # a small graph: one process
    elements = sum(int(np.prod(v.shape)) for v in g.values.values() if v.data is None)
    many = -(-PARALLEL_ELEMENTS // elements)
    assert parallel_worth(g, many) and not parallel_worth(g, many - 1)


def test_without_a_shared_lock_calibration_stays_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing
    import sys

    g = small_cnn()
    feeds = inputs(g, 5, seed=3)
    one = collect(g, feeds, moments_for={"w1": 8}, moment_inputs=2, workers=1)

    def no_semaphores() -> None:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(multiprocessing, "Lock", no_semaphores)
    monkeypatch.setattr(sys.modules["compiler.quant.calibrate"], "Forked", None)  # a fork would fail here
    two = collect(g, feeds, moments_for={"w1": 8}, moment_inputs=2, workers=2)
    for name in one.stats:
        _same_stats(one.stats[name], two.stats[name])
    np.testing.assert_array_equal(one.moments["w1"], two.moments["w1"])
