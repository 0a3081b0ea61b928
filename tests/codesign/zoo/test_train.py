import numpy as np
import pytest

from codesign import zoo
from codesign.zoo import digits, train


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(1)
    weights = {k: v.astype(np.float64) + 0.01 * rng.standard_normal(v.shape)
               for k, v in train.init_weights(rng, 8).items()}
    split = zoo.digits_split()
    images, labels = split.train_images[:5].astype(np.float64), split.train_labels[:5]
    _, grads = train.gradients(weights, images, labels)
    step = 1e-6
    for name, w in weights.items():
        for _ in range(3):
            index = tuple(int(rng.integers(0, d)) for d in w.shape)
            w[index] += step
            up, _ = train.gradients(weights, images, labels)
            w[index] -= 2 * step
            down, _ = train.gradients(weights, images, labels)
            w[index] += step
            assert (up - down) / (2 * step) == pytest.approx(grads[name][index], rel=1e-4, abs=1e-9), name


def test_training_is_deterministic_for_a_seed_and_changes_with_it():
    one_epoch = train.TrainConfig(epochs=1)
    a, b = digits.trained_weights(3, one_epoch), digits.trained_weights(3, one_epoch)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = digits.trained_weights(4, one_epoch)
    assert not np.array_equal(a["fc.weight"], c["fc.weight"])


def test_forward_flattens_like_onnx_nchw():
    rng = np.random.default_rng(0)
    weights = train.init_weights(rng, 8)
    images = rng.random((2, 1, 8, 8)).astype(np.float32)
    _, cache = train.forward(weights, images)
    pooled_nchw = cache["pooled"].transpose(0, 3, 1, 2)
    assert np.array_equal(cache["flat"][1], pooled_nchw[1].reshape(-1))
