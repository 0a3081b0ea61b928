import numpy as np

from codesign.zoo import images


def test_images_are_normalised_pixels_seeded_and_independent_of_the_count():
    batch = images.imagenet_like(3, seed=5)
    assert batch.shape == (3, 3, 224, 224) and batch.dtype == np.float32
    pixels = batch * images.IMAGENET_STD[:, None, None] + images.IMAGENET_MEAN[:, None, None]
    assert pixels.min() >= -1e-5 and pixels.max() <= 1 + 1e-5
    assert np.array_equal(images.imagenet_like(2, seed=5), batch[:2])
    assert not np.array_equal(images.imagenet_like(1, seed=5, stream=1)[0], batch[0])


def test_images_are_smooth_and_differ_from_each_other():
    """Neighbouring pixels correlate as in photographs; images differ in their overall statistics."""
    batch = images.imagenet_like(8, seed=1)
    neighbours = np.corrcoef(batch[:, :, :, :-1].ravel(), batch[:, :, :, 1:].ravel())[0, 1]
    assert neighbours > 0.8
    assert batch.mean(axis=(1, 2, 3)).std() > 0.1 and batch.std(axis=(1, 2, 3)).std() > 0.05
