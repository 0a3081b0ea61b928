"""The user's data: calibration and evaluation samples, and their labels, checked against the
model before anything is compiled.

    load_data(path, graph, recipe=None, labels=None, option="--eval-data") -> Dataset

`path` is an `.npz` (one array per model input, or one array for a single-input model, with
either a sample axis in front of the model's input shape, [N, 1, 3, 224, 224], or the model's
own batch axis holding the samples, [N, 3, 224, 224]; an optional `labels` array) or a folder
of image files preprocessed by a `Recipe` (codesign.run.preprocess), taken in sorted name order.
Labels (`--labels FILE`) are one integer class per line in sample order, or `NAME LABEL` lines
naming the folder's image files; a `.npy` holds them as an integer array.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesign.run.preprocess import Recipe, load_image
from compiler.graph.ir import Graph
from hw.errors import InputError, WorkbenchWarning
from hw.npz import read_npz

Inputs = dict[str, np.ndarray]
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm")
LABELS_KEY = "labels"


class DataWarning(WorkbenchWarning):
    """Data that works but may mislead: calibration on synthetic inputs."""


@dataclass(frozen=True)
class Dataset:
    """Samples (one input dict each, batch as the model takes it), their names, and their labels
    (None without); `source` is the path they came from."""

    samples: list[Inputs]
    names: tuple[str, ...]
    labels: np.ndarray | None
    source: str


def load_data(path: str, graph: Graph, recipe: Recipe | None = None, labels: str | None = None,
              option: str = "--eval-data") -> Dataset:
    """The samples at `path` for `graph`'s inputs, with `labels` (a file) if given."""
    p = Path(path)
    if p.is_dir():
        samples, names = _read_folder(p, graph, recipe or Recipe(), option)
        own = None
    elif p.is_file():
        samples, names, own = _read_npz(p, graph, option)
    elif p.exists():
        raise InputError(f"{option} {path}: neither a regular file nor a folder")
    else:
        raise InputError(f"{option} {path}: no such file or folder")
    found = own if labels is None else read_labels(labels, names)
    if found is not None and len(found) != len(samples):
        raise InputError(f"{labels or path}: {len(found)} labels for {len(samples)} samples")
    return Dataset(samples, names, found, path)


def _read_folder(folder: Path, graph: Graph, recipe: Recipe,
                 option: str) -> tuple[list[Inputs], tuple[str, ...]]:
    if len(graph.inputs) != 1:
        raise InputError(f"{option} {folder}: a folder of images feeds a model with one input, "
                         f"not {len(graph.inputs)} ({', '.join(graph.inputs)})")
    files = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise InputError(f"{option} {folder}: no image files ({', '.join(IMAGE_SUFFIXES)})")
    name = graph.inputs[0]
    value = graph.values[name]
    if value.dtype != "float32":
        raise InputError(f"{option} {folder}: images feed a float32 input; {name} is {value.dtype}")
    shape = tuple(value.shape)
    if shape[0] != 1:
        raise InputError(f"{option} {folder}: images feed a batch-1 input; {name} is {list(shape)}")
    return [{name: load_image(f, recipe, shape)} for f in files], tuple(f.name for f in files)


def _read_npz(path: Path, graph: Graph,
              option: str) -> tuple[list[Inputs], tuple[str, ...], np.ndarray | None]:
    try:  # no pickles, regular files only, sizes bounded before reading (hw/npz.py)
        arrays = read_npz(path, error=InputError, what="an npz file of samples")
    except InputError as exc:
        raise InputError(f"{option} {exc}") from None
    own = arrays.pop(LABELS_KEY, None)
    if own is not None and (own.dtype.kind not in "iu" or own.ndim != 1):
        raise InputError(f"{option} {path}: array 'labels' must be a 1-d integer array, not "
                         f"{own.dtype.name}{list(own.shape)}")
    if len(graph.inputs) == 1 and len(arrays) == 1 and graph.inputs[0] not in arrays:
        arrays = {graph.inputs[0]: next(iter(arrays.values()))}
    missing = [n for n in graph.inputs if n not in arrays]
    if missing:
        raise InputError(f"{option} {path}: no array for model input {missing[0]!r} "
                         f"(arrays: {', '.join(sorted(arrays)) or 'none'})")
    split = {n: _split(arrays[n], graph, n, f"{option} {path}") for n in graph.inputs}
    counts = sorted({len(v) for v in split.values()})
    if len(counts) != 1:
        raise InputError(f"{option} {path}: the inputs have different sample counts {counts}")
    samples = [{n: split[n][i] for n in graph.inputs} for i in range(counts[0])]
    return samples, tuple(f"{path.name}[{i}]" for i in range(counts[0])), own


def _split(array: np.ndarray, graph: Graph, name: str, where: str) -> list[np.ndarray]:
    """Samples of one model input from `array`: [N, *shape] or [N * batch, *shape[1:]]."""
    value = graph.values[name]
    shape = tuple(value.shape)
    want = np.dtype(value.dtype)
    if array.dtype.kind != want.kind and not (array.dtype.kind in "iu" and want.kind in "iu"):
        raise InputError(f"{where}: array {name!r} is {array.dtype.name}, the model input takes {want.name}")
    array = array.astype(want, copy=False)
    if array.ndim == len(shape) + 1 and array.shape[1:] == shape and len(array):
        return list(array)
    batch = shape[0] if shape else 1
    if shape and array.ndim == len(shape) and array.shape[1:] == shape[1:] and array.shape[0] % batch == 0 \
            and len(array):
        return [array[i:i + batch] for i in range(0, len(array), batch)]
    dims = ",".join(map(str, shape))
    raise InputError(f"{where}: array {name!r} is {list(array.shape)}, the model input takes [{dims}]: "
                     f"give [N,{dims}] or [N*{batch},{','.join(map(str, shape[1:]))}]")


def read_labels(path: str, names: tuple[str, ...]) -> np.ndarray:
    """Integer labels from a `.npy` or a text file (see the module doc), in sample order."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--labels {path}: no such file")
    if p.suffix == ".npy":
        try:
            labels = np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"--labels {path}: not a .npy array ({exc})") from None
        if labels.dtype.kind not in "iu" or labels.ndim != 1:
            raise InputError(f"--labels {path}: a 1-d integer array, not "
                             f"{labels.dtype.name}{list(labels.shape)}")
        return labels.astype(np.int64)
    lines = [(i + 1, line.split()) for i, line in enumerate(p.read_text().splitlines()) if line.strip()]
    named = {}
    for number, words in lines:
        if len(words) not in (1, 2) or not _is_int(words[-1]):
            raise InputError(f"--labels {path}: line {number} is not 'LABEL' or 'NAME LABEL'")
        if len(words) == 2:
            named[words[0]] = int(words[1])
    if not named:
        return np.array([int(words[0]) for _, words in lines], np.int64)
    for name in names:
        if name not in named and Path(name).stem not in named:
            raise InputError(f"--labels {path}: no label for {name}")
    return np.array([named.get(n, named.get(Path(n).stem, -1)) for n in names], np.int64)


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def warn_synthetic(model: str) -> None:
    """The warning that a model is calibrated on synthetic inputs."""
    warnings.warn(DataWarning(f"{model} is calibrated on synthetic inputs, which are not representative "
                              "of real data: give --calibration-data (an .npz or a folder of images)"),
                  stacklevel=2)


@dataclass(frozen=True)
class DataSource:
    """Where a command's samples come from: `path` with its preprocessing `recipe` and `labels`,
    the first `limit` samples only (None: all); `option` names the flag in errors."""

    path: str
    recipe: Recipe | None = None
    labels: str | None = None
    limit: int | None = None
    option: str = "--eval-data"

    def load(self, graph: Graph) -> Dataset:
        data = load_data(self.path, graph, self.recipe, self.labels, self.option)
        if self.limit is None or self.limit >= len(data.samples):
            return data
        labels = None if data.labels is None else data.labels[: self.limit]
        return Dataset(data.samples[: self.limit], data.names[: self.limit], labels, data.source)


@dataclass(frozen=True)
class UserData:
    """A command's data flags: --calibration-data and --eval-data (with --labels)."""

    calibration: DataSource | None = None
    evaluation: DataSource | None = None

    def calibration_source(self) -> DataSource | None:
        return self.calibration

    def load_evaluation(self, graph: Graph) -> Dataset | None:
        return None if self.evaluation is None else self.evaluation.load(graph)
