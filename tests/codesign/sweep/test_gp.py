import numpy as np
import pytest
from scipy.optimize import approx_fprime

from codesign.sweep.gp import GaussianProcess


def smooth(x):
    return np.sin(3 * x[:, 0]) + x[:, 1] ** 2 - 0.5 * x[:, 2]


def test_the_likelihood_gradient_is_exact():
    rng = np.random.default_rng(0)
    x = rng.random((12, 3))
    y = smooth(x)
    gp = GaussianProcess()
    diff2 = (x[:, None, :] - x[None, :, :]) ** 2
    theta = np.array([0.3, -0.5, 0.2, 1.0, -4.0])
    _, grad = gp._nll(theta, diff2, (y - y.mean()) / y.std())
    numeric = approx_fprime(theta, lambda t: gp._nll(t, diff2, (y - y.mean()) / y.std())[0], 1e-6)
    assert np.allclose(grad, numeric, rtol=1e-4, atol=1e-5)


def test_it_learns_a_smooth_function_and_knows_where_it_is_unsure():
    rng = np.random.default_rng(1)
    x, x_test = rng.random((40, 3)), rng.random((200, 3))
    gp = GaussianProcess().fit(x, smooth(x))
    mean, std = gp.predict(x_test, chunk=64)
    assert np.sqrt(np.mean((mean - smooth(x_test)) ** 2)) < 0.05 * np.std(smooth(x_test))
    at_data, _ = gp.predict(x)
    assert np.allclose(at_data, smooth(x), atol=0.02)
    far = gp.predict(np.full((1, 3), 4.0))[1][0]
    assert far > 10 * std.mean()


def test_predicting_before_fitting_is_a_bug():
    with pytest.raises(AssertionError, match="fit first"):
        GaussianProcess().predict(np.zeros((1, 2)))
