"""codesign.zoo.photos: real photos of installed packages, split by photo, seeded crops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from codesign.zoo.errors import ZooError
from codesign.zoo.photos import photo_crops, photo_files, photo_samples, write_photos


def test_splits_share_no_photo_and_evaluation_has_objects_only() -> None:
    calibration, evaluation = set(photo_files("calibration")), set(photo_files("evaluation"))
    assert evaluation and calibration and not calibration & evaluation
    assert calibration | evaluation == set(photo_files("all"))
    with pytest.raises(ZooError, match="photo split must be one of all, calibration, evaluation, not 'x'"):
        photo_files("x")


def test_crops_are_seeded_square_and_sometimes_mirrored(tmp_path: Path) -> None:
    a, b = photo_crops(6, seed=3, size=32), photo_crops(6, seed=3, size=32)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b, strict=True))
    assert all(c.shape == (32, 32, 3) and c.dtype == np.uint8 for _, c in a)
    x = photo_samples(2, seed=3, size=32)[0]
    np.testing.assert_allclose(x, (a[0][1].astype(np.float32).transpose(2, 0, 1) - 127) / 128)
    paths = write_photos(tmp_path / "p", 3, seed=0, split="evaluation", size=16)
    assert [p.suffix for p in paths] == [".png"] * 3 and all(p.is_file() for p in paths)
