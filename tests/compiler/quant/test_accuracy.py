"""Agreement figures: rms error, top-1 and its Wilson interval, checked against their definitions."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.quant.accuracy import agreement, wilson_interval

Z95 = 1.959964


def _interval_by_search(hits: int, count: int) -> tuple[float, float]:
    """The proportions p with |hits / count - p| <= z sqrt(p (1 - p) / count), on a fine grid."""
    p = np.linspace(0.0, 1.0, 2_000_001)
    inside = np.abs(hits / count - p) <= Z95 * np.sqrt(p * (1 - p) / count)
    return float(p[inside].min()), float(p[inside].max())


@pytest.mark.parametrize("hits,count", [(89, 100), (90, 100), (0, 10), (10, 10), (3, 4), (1, 1), (412, 500)])
def test_wilson_interval_is_the_set_its_inequality_defines(hits: int, count: int) -> None:
    lo, hi = wilson_interval(hits, count)
    want_lo, want_hi = _interval_by_search(hits, count)
    assert lo == pytest.approx(want_lo, abs=2e-6) and hi == pytest.approx(want_hi, abs=2e-6)
    assert 0.0 <= lo <= hits / count <= hi <= 1.0


def test_wilson_interval_narrows_with_more_inputs() -> None:
    widths = [np.subtract(*wilson_interval(9 * n // 10, n)[::-1]) for n in (100, 400, 1600)]
    assert widths[0] > widths[1] > widths[2] and widths[0] / widths[2] == pytest.approx(4, rel=0.05)


@pytest.mark.parametrize("hits,count", [(1, 0), (5, 4), (-1, 4)])
def test_wilson_interval_refuses_impossible_counts(hits: int, count: int) -> None:
    with pytest.raises(ValueError, match=rf"need 0 <= hits <= count and count >= 1, not {hits} of {count}"):
        wilson_interval(hits, count)


def test_agreement_counts_top1_and_averages_squared_errors() -> None:
    rng = np.random.default_rng(3)
    reference = [rng.standard_normal((1, 50)).astype(np.float32) for _ in range(20)]
    noise = [rng.standard_normal((1, 50)) * 0.3 for _ in range(20)]
    candidate = [(r + e).astype(np.float32) for r, e in zip(reference, noise, strict=True)]
    result = agreement(reference, candidate)
    hits = sum(int(r.argmax() == c.argmax()) for r, c in zip(reference, candidate, strict=True))
    diffs = np.stack([c.astype(np.float64) - r for r, c in zip(reference, candidate, strict=True)])
    assert result.count == 20 and result.top1 == hits / 20
    assert result.top1_ci95 == wilson_interval(hits, 20)
    assert result.rms_err == pytest.approx(np.sqrt(np.mean(diffs**2)), rel=1e-12)
    assert result.max_abs_err == pytest.approx(np.abs(diffs).max(), rel=1e-12)
    assert 0.0 < result.rms_err < result.max_abs_err


def test_agreement_refuses_unequal_or_empty_lists() -> None:
    with pytest.raises(ValueError, match="need equally many outputs, at least one: 0 and 0"):
        agreement([], [])
    with pytest.raises(ValueError, match="need equally many outputs, at least one: 1 and 2"):
        agreement([np.zeros(3)], [np.zeros(3), np.zeros(3)])


def test_label_accuracy_top1_top5_with_wilson_intervals() -> None:
    from compiler.quant.accuracy import label_accuracy, wilson_interval

    outputs = [np.arange(10.0)[None] for _ in range(4)]  # best class 9, then 8, 7, 6, 5
    acc = label_accuracy(outputs, [9, 5, 4, 12])  # a hit, a top-5 hit, a miss, a label out of range
    assert (acc.count, acc.top1, acc.top5) == (4, 0.25, 0.5)
    assert acc.top1_ci95 == wilson_interval(1, 4) and acc.top5_ci95 == wilson_interval(2, 4)
    few = label_accuracy([np.array([[0.0, 1.0, 0.5]])], [1])
    assert few.top1 == 1.0 and few.top5 is None and few.top5_ci95 is None
    with pytest.raises(ValueError, match="need one label per output, at least one: 1 outputs, 2 labels"):
        label_accuracy(outputs[:1], [1, 2])
