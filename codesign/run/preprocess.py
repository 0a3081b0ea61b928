"""How an image file becomes a model input: a `Recipe` (resize, center crop, normalisation,
layout, channel order), from a preset, a small TOML file and KEY=VALUE overrides.

    x = (pixel - mean) / std        pixel in 0..255, per channel in the recipe's channel order

A recipe given as scale/offset (x = pixel * scale + offset) is the same thing with
mean = -offset / scale and std = 1 / scale. The crop defaults to the model input's spatial size
and the resize (of the shorter side, bilinear) to crop / 0.875, the convention of both
torchvision's and TensorFlow's evaluation scripts.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hw.errors import InputError

CROP_FRACTION = 0.875
LAYOUTS = ("NCHW", "NHWC")
CHANNEL_ORDERS = ("RGB", "BGR")


@dataclass(frozen=True)
class Recipe:
    """Preprocessing of an image: resize (shorter side; 0: crop / CROP_FRACTION), center crop
    (0: the model's input size), mean and std per channel in pixel units (0..255)."""

    resize: int = 0
    crop: int = 0
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    layout: str = "NCHW"
    channels: str = "RGB"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, Recipe] = {
    # torchvision's ImageNet models: ToTensor() then Normalize(mean, std)
    "torchvision": Recipe(mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375)),
    # TensorFlow's EfficientNet-Lite (and the lukemelas-style PyTorch ports of its weights)
    "tf-efficientnet-lite": Recipe(mean=(127.0,) * 3, std=(128.0,) * 3),
    # Keras MobileNet v1/v2 (tf.keras.applications.mobilenet_v2.preprocess_input: x / 127.5 - 1)
    "tf-mobilenet": Recipe(mean=(127.5,) * 3, std=(127.5,) * 3, layout="NHWC"),
    # pixels as they are, 0..1
    "unit": Recipe(std=(255.0,) * 3),
}


def recipe(spec: str | None, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """The recipe of a preset name or a TOML file (`spec`; None: torchvision), then KEY=VALUE
    `overrides` (the keys of `Recipe`, or scale/offset)."""
    if spec is None or spec in PRESETS:
        base, fields = PRESETS[spec or "torchvision"], dict[str, Any]()
    elif spec.endswith(".toml"):
        base, fields = _from_toml(spec)
    else:
        raise InputError(f"--preprocess {spec!r} is neither a preset ({', '.join(PRESETS)}) nor a .toml file")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--preprocess-set {item!r} must be KEY=VALUE")
        fields[key.strip()] = _parse_value(value.strip())
    return _apply(base, fields, spec or "torchvision")


def _from_toml(path: str) -> tuple[Recipe, dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            fields = tomllib.load(f)
    except FileNotFoundError:
        raise InputError(f"--preprocess {path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"--preprocess {path}: not TOML ({exc})") from None
    preset = fields.pop("preset", "torchvision")
    if preset not in PRESETS:
        raise InputError(f"{path}: unknown preset {preset!r} (presets: {', '.join(PRESETS)})")
    return PRESETS[preset], fields


def _parse_value(text: str) -> Any:
    parts = [p for p in text.replace("[", "").replace("]", "").split(",") if p.strip()]
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        return text
    return numbers if len(numbers) > 1 else numbers[0] if numbers else text


def _triple(value: Any, key: str, where: str) -> tuple[float, ...]:
    values = value if isinstance(value, list) else [value]
    if len(values) not in (1, 3) or not all(isinstance(v, int | float) for v in values):
        raise InputError(f"{where}: {key} must be one number or three, not {value!r}")
    return tuple(float(v) for v in values) * (3 if len(values) == 1 else 1)


def _apply(base: Recipe, fields: dict[str, Any], where: str) -> Recipe:
    known = {f.name for f in dataclasses.fields(Recipe)} | {"scale", "offset"}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InputError(f"{where}: unknown preprocessing key {unknown[0]!r} "
                         f"(keys: {', '.join(sorted(known))})")
    out: dict[str, Any] = {}
    for key in ("resize", "crop"):
        if key in fields:
            if not isinstance(fields[key], int | float) or fields[key] < 0 or fields[key] != int(fields[key]):
                raise InputError(f"{where}: {key} must be a whole number of pixels, not {fields[key]!r}")
            out[key] = int(fields[key])
    for key in ("mean", "std"):
        if key in fields:
            out[key] = _triple(fields[key], key, where)
    if "scale" in fields or "offset" in fields:
        if "mean" in fields or "std" in fields:
            raise InputError(f"{where}: give mean/std or scale/offset, not both")
        scale = np.array(_triple(fields.get("scale", 1.0), "scale", where))
        offset = np.array(_triple(fields.get("offset", 0.0), "offset", where))
        if (scale == 0).any():
            raise InputError(f"{where}: scale must not be 0")
        out["mean"], out["std"] = tuple(-offset / scale), tuple(1.0 / scale)
    if any(s == 0 for s in out.get("std", base.std)):
        raise InputError(f"{where}: std must not be 0")
    for key, allowed in (("layout", LAYOUTS), ("channels", CHANNEL_ORDERS)):
        if key in fields:
            if str(fields[key]).upper() not in allowed:
                raise InputError(f"{where}: {key} must be one of {', '.join(allowed)}, not {fields[key]!r}")
            out[key] = str(fields[key]).upper()
    return dataclasses.replace(base, **out)


def image_size(recipe: Recipe, shape: tuple[int, ...]) -> tuple[int, int]:
    """(crop, resize) for a model input of `shape` ([1, C, H, W] or [1, H, W, C] by layout)."""
    if len(shape) != 4:
        raise InputError(f"an image folder feeds a 4-d model input, not one of shape {list(shape)}")
    h, w = (shape[2], shape[3]) if recipe.layout == "NCHW" else (shape[1], shape[2])
    if h != w:
        raise InputError(f"the model input is {h}x{w}: only square crops are supported")
    crop = recipe.crop or h
    if crop != h:
        raise InputError(f"crop {crop} does not fit the model input's {h}x{w}")
    return crop, recipe.resize or round(crop / CROP_FRACTION)


def load_image(path: Path, recipe: Recipe, shape: tuple[int, ...]) -> np.ndarray:
    """One image file as a float32 model input of `shape`, or an InputError naming the file."""
    from PIL import Image, UnidentifiedImageError

    crop, resize = image_size(recipe, shape)
    try:
        with Image.open(path) as im:
            rgb = im.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise InputError(f"{path}: not a readable image ({type(exc).__name__})") from None
    w, h = rgb.size
    factor = resize / min(w, h)
    size = (max(crop, round(w * factor)), max(crop, round(h * factor)))
    rgb = rgb.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - crop) // 2, (size[1] - crop) // 2
    pixels = np.asarray(rgb.crop((left, top, left + crop, top + crop)), np.float32)
    if recipe.channels == "BGR":
        pixels = pixels[..., ::-1]
    x = (pixels - np.array(recipe.mean, np.float32)) / np.array(recipe.std, np.float32)
    if recipe.layout == "NCHW":
        x = x.transpose(2, 0, 1)
    return np.ascontiguousarray(x[None], np.float32)
