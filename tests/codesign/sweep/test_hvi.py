import numpy as np
import pytest

from codesign.sweep.hvi import improvements
from codesign.sweep.pareto import hypervolume, non_dominated


def brute_force(front, candidates, reference):
    base = hypervolume(front, reference) if len(front) else 0.0
    return np.array([hypervolume(np.vstack([front, c[None]]), reference) - base for c in candidates])


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_improvements_equal_the_hypervolume_each_candidate_adds(m, seed):
    rng = np.random.default_rng(seed)
    front = rng.random((int(rng.integers(0, 15)), m))
    front = front[non_dominated(front)] if len(front) else front.reshape(0, m)
    candidates = rng.random((40, m)) * 1.2 - 0.1  # some beyond the reference, some below the front
    reference = np.ones(m)
    assert np.allclose(improvements(front, candidates, reference), brute_force(front, candidates, reference),
                       atol=1e-12)


def test_a_dominated_or_outside_candidate_adds_nothing_and_a_lone_one_its_box():
    front = np.array([[0.2, 0.5, 0.5], [0.5, 0.2, 0.5]])
    candidates = np.array([[0.3, 0.6, 0.6], [0.1, 0.1, 1.5], [0.5, 0.5, 0.1]])
    gains = improvements(front, candidates, np.ones(3))
    assert gains[0] == 0.0 and gains[1] == 0.0
    # its orthant [0.5,1]x[0.5,1]x[0.1,1]: the front's first point covers all of it from z = 0.5 up
    assert gains[2] == pytest.approx(0.5 * 0.5 * 0.4)
    assert improvements(np.zeros((0, 2)), np.array([[0.25, 0.5]]), np.ones(2))[0] == pytest.approx(0.375)


def test_more_than_three_objectives_are_refused():
    with pytest.raises(ValueError, match="improvements are exact for at most 3 objectives, not 4"):
        improvements(np.zeros((1, 4)), np.zeros((1, 4)), np.ones(4))
