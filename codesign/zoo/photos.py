"""Real photos from installed packages (scikit-image, scikit-learn, matplotlib ship sample
images), with seeded crops and flips as samples: real data for the trained models, offline.

    photo_files(split="all")                       -> the photos found, sorted by name
    photo_crops(count, seed, split="all", size=256) -> [(name, uint8 HxWx3 RGB crop)]
    photo_samples(count, seed, size)               -> float32 [3, size, size] (EfficientNet-Lite's recipe)
    write_photos(folder, count, seed, split)       -> PNG files a user can pass as --calibration-data

The photos are split by photo, not by crop (OBJECTS and OTHERS below say which), so an
evaluation never sees a scene that calibration saw.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from codesign.zoo.errors import ZooError

# (package, folder inside it, file names). OBJECTS: photographs of things an ImageNet classifier
# knows (animals, objects, vehicles, people, buildings); OTHERS: textures, micrographs, astronomy.
# Evaluation uses objects only: on the others the fp32 model's best classes are nearly tied, so
# a top-1 agreement there measures coin tosses, not quantization. Calibration sees half of the
# objects and all the others (a wider range of activations than objects alone).
OBJECTS = (
    ("skimage", "data", ("astronaut.png", "camera.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
                         "motorcycle_right.png", "rocket.jpg")),
    ("sklearn", "datasets/images", ("china.jpg", "flower.jpg")),
    ("matplotlib", "mpl-data/sample_data", ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png")),
)
OTHERS = (
    ("skimage", "data", ("brick.png", "coins.png", "grass.png", "gravel.png", "hubble_deep_field.jpg",
                         "ihc.png",
                         "moon.png", "retina.jpg")),
)
SPLITS = ("all", "calibration", "evaluation")
MIN_FRACTION = 0.6  # a crop's side is 60 to 100% of the photo's shorter side


def photo_files(split: str = "all") -> list[Path]:
    """The sample photos of the installed packages (none is required) in `split`, by name."""
    if split not in SPLITS:
        raise ZooError(f"photo split must be one of {', '.join(SPLITS)}, not {split!r}")
    objects, others = _found(OBJECTS), _found(OTHERS)
    splits = {"all": objects + others, "calibration": objects[0::2] + others, "evaluation": objects[1::2]}
    chosen = splits[split]
    if not chosen:
        raise ZooError("no sample photos found: pip install scikit-image (or scikit-learn, matplotlib)")
    return sorted(chosen, key=lambda p: p.name)


def _found(sources: tuple[tuple[str, str, tuple[str, ...]], ...]) -> list[Path]:
    found = []
    for package, folder, names in sources:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations))) / folder
        found += [root / n for n in names if (root / n).is_file()]
    return sorted(found, key=lambda p: p.name)


def photo_crops(count: int, seed: int, split: str = "all", size: int = 256) -> list[tuple[str, np.ndarray]]:
    """`count` seeded square crops (side MIN_FRACTION..1 of the shorter side, anywhere), half of
    them mirrored, resized to `size`, cycling over the split's photos."""
    from PIL import Image

    files = photo_files(split)
    images = {}
    out = []
    for i in range(count):
        rng = np.random.default_rng((seed, i))
        path = files[i % len(files)]
        if path not in images:
            with Image.open(path) as opened:
                images[path] = opened.convert("RGB")
        im = images[path]
        side = int(min(im.size) * rng.uniform(MIN_FRACTION, 1.0))
        left = int(rng.integers(0, im.size[0] - side + 1))
        top = int(rng.integers(0, im.size[1] - side + 1))
        crop = im.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.BILINEAR)
        pixels = np.asarray(crop, np.uint8)
        flipped = bool(rng.integers(0, 2))
        if flipped:
            pixels = pixels[:, ::-1]
        name = f"{i:04d}_{path.stem}{'_flip' if flipped else ''}"
        out.append((name, np.ascontiguousarray(pixels)))
    return out


def photo_samples(count: int, seed: int, size: int, split: str = "all") -> list[np.ndarray]:
    """Crops preprocessed as EfficientNet-Lite takes them: [3, size, size], (x - 127) / 128."""
    return [((c.astype(np.float32) - 127.0) / 128.0).transpose(2, 0, 1).copy()
            for _, c in photo_crops(count, seed, split, size)]


def write_photos(folder: str | Path, count: int, seed: int, split: str = "all",
                 size: int = 256) -> list[Path]:
    """Write `photo_crops` as PNG files into `folder` (created); their paths."""
    from PIL import Image

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, pixels in photo_crops(count, seed, split, size):
        path = out / f"{name}.png"
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return paths
