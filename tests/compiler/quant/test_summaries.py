"""The packed form of a calibration worker's summaries gives back every summary exactly."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from compiler.quant.calibrate import summarize
from compiler.quant.summaries import InputSummary, pack, unpack


def _same(a: InputSummary, b: InputSummary) -> None:
    assert (a.absmax, a.zeros, a.top, a.at_top, a.rows) == (b.absmax, b.zeros, b.top, b.at_top, b.rows)
    if a.counts is None:
        assert b.counts is None
    else:
        assert b.counts is not None and b.counts.dtype == a.counts.dtype
        np.testing.assert_array_equal(a.counts, b.counts)
    for mine, theirs in ((a.maxima, b.maxima), (a.sums, b.sums)):
        assert list(mine) == list(theirs)
        for axis in mine:
            assert theirs[axis].dtype == mine[axis].dtype
            np.testing.assert_array_equal(mine[axis].view(np.int64), theirs[axis].view(np.int64))


def test_packed_summaries_come_back_bit_for_bit_through_a_pickle() -> None:
    rng = np.random.default_rng(4)
    tensors = {
        "conv": rng.standard_normal((1, 6, 5, 5)).astype(np.float32),  # one channel axis
        "tokens": rng.standard_normal((1, 7, 3)).astype(np.float32) * 1e-30,  # two axes, tiny values
        "zeros": np.zeros((1, 4, 2, 2), np.float32),  # no histogram
        "top": np.array([[4.0, -1.5, 0.0]], np.float32),  # a largest |x| that is a power of two
        "flat": rng.standard_normal(9).astype(np.float32),  # no channel axis
    }
    summaries = [(name, summarize(x)) for name, x in tensors.items()]
    back = unpack(pickle.loads(pickle.dumps(pack(summaries))))
    assert [name for name, _ in back] == list(tensors)
    for (_, a), (_, b) in zip(summaries, back, strict=True):
        _same(a, b)
    assert unpack(pack([])) == []


def test_only_one_dimensional_arrays_of_the_summaries_types_are_packed() -> None:
    s = summarize(np.ones((1, 3, 2, 2), np.float32))
    bad = InputSummary(s.absmax, s.zeros, s.top, s.counts, s.at_top, {1: s.maxima[1].astype(np.float32)},
                       s.sums, s.rows)
    with pytest.raises(TypeError, match=r"^summaries pack 1-d float64 arrays only$"):
        pack([("x", bad)])
