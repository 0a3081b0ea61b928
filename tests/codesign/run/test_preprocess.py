"""codesign.run.preprocess: recipes from presets, TOML files and overrides; images to inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from codesign.run.preprocess import PRESETS, Recipe, image_size, load_image, recipe
from hw.errors import InputError


def test_presets_and_overrides() -> None:
    assert recipe(None) == PRESETS["torchvision"]
    r = recipe("tf-efficientnet-lite", ["resize=274", "channels=bgr"])
    assert r.resize == 274 and r.channels == "BGR" and r.mean == (127.0,) * 3 and r.std == (128.0,) * 3
    assert recipe("torchvision", ["mean=1,2,3"]).mean == (1.0, 2.0, 3.0)


def test_scale_offset_is_mean_std() -> None:
    r = recipe("unit", ["scale=0.5", "offset=-1"])  # x = p / 2 - 1 = (p - 2) / 2
    assert r.mean == (2.0,) * 3 and r.std == (2.0,) * 3


def test_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('preset = "tf-mobilenet"\nresize = 300\nlayout = "NCHW"\nmean = [1, 2, 3]\n')
    r = recipe(str(path))
    assert (r.resize, r.layout, r.mean, r.std) == (300, "NCHW", (1.0, 2.0, 3.0), (127.5,) * 3)


def test_recipe_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--preprocess 'vgg' is neither a preset .* nor a .toml file"):
        recipe("vgg")
    with pytest.raises(InputError, match="--preprocess .*none.toml: no such file"):
        recipe(str(tmp_path / "none.toml"))
    (tmp_path / "bad.toml").write_text("resize = [")
    with pytest.raises(InputError, match="bad.toml: not TOML"):
        recipe(str(tmp_path / "bad.toml"))
    (tmp_path / "p.toml").write_text('preset = "vgg"\n')
    with pytest.raises(InputError, match="p.toml: unknown preset 'vgg'"):
        recipe(str(tmp_path / "p.toml"))
    with pytest.raises(InputError, match="--preprocess-set 'resize' must be KEY=VALUE"):
        recipe(None, ["resize"])
    with pytest.raises(InputError, match="torchvision: unknown preprocessing key 'size'"):
        recipe(None, ["size=3"])
    with pytest.raises(InputError, match="resize must be a whole number of pixels, not 2.5"):
        recipe(None, ["resize=2.5"])
    with pytest.raises(InputError, match="mean must be one number or three, not"):
        recipe(None, ["mean=1,2"])
    with pytest.raises(InputError, match="give mean/std or scale/offset, not both"):
        recipe(None, ["mean=1", "scale=2"])
    with pytest.raises(InputError, match="scale must not be 0"):
        recipe(None, ["scale=0"])
    with pytest.raises(InputError, match="std must not be 0"):
        recipe(None, ["std=0"])
    with pytest.raises(InputError, match="layout must be one of NCHW, NHWC, not 'CHW'"):
        recipe(None, ["layout=CHW"])


def test_image_size_rules() -> None:
    assert image_size(Recipe(), (1, 3, 224, 224)) == (224, 256)
    assert image_size(Recipe(layout="NHWC", resize=240), (1, 224, 224, 3)) == (224, 240)
    with pytest.raises(InputError, match=r"an image folder feeds a 4-d model input, not one of shape "
                                         r"\[1, 64\]"):
        image_size(Recipe(), (1, 64))
    with pytest.raises(InputError, match="the model input is 8x9: only square crops are supported"):
        image_size(Recipe(), (1, 3, 8, 9))
    with pytest.raises(InputError, match="crop 7 does not fit the model input's 8x8"):
        image_size(Recipe(crop=7), (1, 3, 8, 8))


def test_load_image_resizes_crops_normalises_and_orders_channels(tmp_path: Path) -> None:
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[..., 0], pixels[..., 2] = 200, 50  # red 200, blue 50 everywhere
    pixels[:, :4] = 0  # a black left edge: the center crop must not see it
    Image.fromarray(pixels).save(tmp_path / "a.png")
    x = load_image(tmp_path / "a.png", Recipe(resize=8, mean=(100.0, 0.0, 50.0), std=(2.0, 1.0, 1.0)),
                   (1, 3, 8, 8))
    assert x.shape == (1, 3, 8, 8)
    np.testing.assert_allclose(x[0, 0], 50.0)  # (200 - 100) / 2
    np.testing.assert_allclose(x[0, 2], 0.0)
    bgr = load_image(tmp_path / "a.png", Recipe(resize=8, channels="BGR", layout="NHWC"), (1, 8, 8, 3))
    assert bgr.shape == (1, 8, 8, 3)
    np.testing.assert_allclose(bgr[0, ..., 0], 50.0)  # blue first
    np.testing.assert_allclose(bgr[0, ..., 2], 200.0)
