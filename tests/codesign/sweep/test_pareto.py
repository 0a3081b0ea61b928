import itertools

import numpy as np
import pytest

from codesign.sweep.pareto import Box, hypervolume, non_dominated


def brute_front(values):
    n = len(values)
    return np.array([not any(np.all(values[j] <= values[i]) and np.any(values[j] < values[i])
                             for j in range(n)) for i in range(n)])


def brute_hypervolume(values, ref):
    """Integer points: count the unit cells some point dominates."""
    total = 0
    for cell in itertools.product(*(range(int(r)) for r in ref)):
        total += bool(np.any(np.all(values <= np.array(cell), axis=1)))
    return float(total)


@pytest.mark.parametrize("m", [2, 3])
@pytest.mark.parametrize("seed", range(5))
def test_non_dominated_matches_brute_force_on_random_sets(m, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, size=(40, m)).astype(float)  # many ties and duplicates
    assert np.array_equal(non_dominated(values), brute_front(values))


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_hypervolume_matches_brute_force_on_random_integer_sets(m, seed):
    rng = np.random.default_rng(100 + seed)
    ref = np.full(m, 9.0)
    values = rng.integers(0, 11, size=(rng.integers(1, 25), m)).astype(float)  # some beyond ref
    assert hypervolume(values, ref) == brute_hypervolume(values, ref)


def test_hypervolume_boundaries():
    assert hypervolume(np.zeros((0, 2)), [1, 1]) == 0.0
    assert hypervolume(np.array([[1.0, 1.0]]), [1, 1]) == 0.0  # on the reference: adds nothing
    assert hypervolume(np.array([[0.5, 0.5, 0.5]]), [1, 1, 1]) == 0.125
    assert hypervolume(np.array([[0.0, 0.5], [0.5, 0.0], [0.5, 0.5]]), [1, 1]) == 0.75
    with pytest.raises(ValueError, match="exact for at most 3 objectives, not 4"):
        hypervolume(np.zeros((1, 4)), np.ones(4))
    with pytest.raises(ValueError, match=r"values of shape \(1, 2\) do not match a reference of 3"):
        hypervolume(np.zeros((1, 2)), np.ones(3))
    with pytest.raises(ValueError, match="values must be an n x m array"):
        non_dominated(np.zeros(3))


def test_a_box_normalises_on_a_log_scale():
    box = Box((1.0, 10.0), (100.0, 1000.0))
    assert np.allclose(box.normalise(np.array([[1.0, 10.0], [10.0, 100.0], [100.0, 1000.0]])),
                       [[0, 0], [0.5, 0.5], [1, 1]])
    assert box.hypervolume(np.array([[10.0, 100.0]])) == pytest.approx(0.25)
    assert box.hypervolume(np.array([[1000.0, 1.0]])) == 0.0  # outside the box in one objective
    assert box.hypervolume(np.zeros((0, 2))) == 0.0
    around = Box.around(np.array([[2.0, 30.0], [8.0, 3.0]]))
    assert around.lower == (1.0, 1.5) and around.upper == (16.0, 60.0)
    with pytest.raises(ValueError, match="0 < lower < upper, not 5.0 and 5.0"):
        Box((5.0,), (5.0,))
    with pytest.raises(ValueError, match="lower has 1 objectives, upper 2"):
        Box((1.0,), (2.0, 3.0))
