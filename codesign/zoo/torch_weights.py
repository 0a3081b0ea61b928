"""Trained weights from a PyTorch `.pth` file without PyTorch: a restricted unpickler.

A `.pth` written by `torch.save` is either the legacy stream (pickled magic number, protocol
version and system info, then the pickled object whose tensors name their storages by key,
then the list of storage keys, then each storage as an int64 element count and raw
little-endian data) or a zip archive (`archive/data.pkl` plus one `archive/data/KEY` entry per
storage). Both are read here. The unpickler resolves only an OrderedDict, the tensor rebuild
functions and the storage types; any other global (code a malicious file could run) is
refused with `ZooError`, so loading a file never executes anything but building numpy arrays.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from codesign.zoo.errors import ZooError

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


@dataclass
class _Storage:
    dtype: type
    key: str
    data: np.ndarray | None = None


@dataclass(frozen=True)
class _TensorRef:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    def array(self) -> np.ndarray:
        data = self.storage.data
        if data is None:
            raise ZooError(f"storage {self.storage.key} has no data")
        item = data.itemsize
        strides = [s * item for s in self.stride]
        view = np.lib.stride_tricks.as_strided(data[self.offset:], self.shape, strides)
        return np.array(view)  # a copy: the arrays own their memory


def _rebuild(storage: _Storage, offset: int, shape: tuple[int, ...], stride: tuple[int, ...],
             *_: Any) -> _TensorRef:
    return _TensorRef(storage, int(offset), tuple(shape), tuple(stride))


class _Unpickler(pickle.Unpickler):
    """Resolves tensors and state dicts only; storages are collected by key."""

    def __init__(self, f: IO[bytes], where: str) -> None:
        super().__init__(f)
        self.where = where
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        allowed: dict[tuple[str, str], Callable[..., Any]] = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2"): _rebuild,
            ("torch._utils", "_rebuild_tensor"): _rebuild,
        }
        if (module, name) in allowed:
            return allowed[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return name
        raise ZooError(f"{self.where}: refuses to load {module}.{name} (only tensors and state dicts)")

    def persistent_load(self, pid: Any) -> _Storage:
        kind, dtype, key = pid[0], pid[1], str(pid[2])
        if kind != "storage" or dtype not in _STORAGE_DTYPES:
            raise ZooError(f"{self.where}: unknown persistent object {kind} {dtype}")
        return self.storages.setdefault(key, _Storage(_STORAGE_DTYPES[dtype], key))


def load_state_dict(path: str | Path) -> dict[str, np.ndarray]:
    """The tensors of a PyTorch state dict file, by name, as numpy arrays (scalars dropped)."""
    where = str(path)
    raw = Path(path).read_bytes()
    if zipfile.is_zipfile(io.BytesIO(raw)):
        refs, storages = _load_zip(raw, where)
    else:
        refs, storages = _load_legacy(raw, where)
    if not isinstance(refs, dict):
        raise ZooError(f"{where}: holds a {type(refs).__name__}, not a state dict")
    del storages
    return {k: v.array() for k, v in refs.items() if isinstance(v, _TensorRef) and v.shape != ()}


def _load_legacy(raw: bytes, where: str) -> tuple[Any, dict[str, _Storage]]:
    f = io.BytesIO(raw)
    try:
        for _ in range(3):  # magic number, protocol version, system info: plain data
            _Unpickler(f, where).load()
        unpickler = _Unpickler(f, where)
        obj = unpickler.load()
        keys = _Unpickler(f, where).load()
        for key in keys:
            storage = unpickler.storages[str(key)]
            (count,) = struct.unpack("<q", f.read(8))
            size = count * np.dtype(storage.dtype).itemsize
            storage.data = np.frombuffer(f.read(size), storage.dtype)
    except (pickle.UnpicklingError, EOFError, KeyError, struct.error) as exc:
        raise ZooError(f"{where}: not a PyTorch weight file ({exc})") from None
    return obj, unpickler.storages


def _load_zip(raw: bytes, where: str) -> tuple[Any, dict[str, _Storage]]:
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        names = z.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl")), None)
        if pkl is None:
            raise ZooError(f"{where}: a zip without data.pkl is not a PyTorch weight file")
        root = pkl[: -len("data.pkl")]
        unpickler = _Unpickler(io.BytesIO(z.read(pkl)), where)
        obj = unpickler.load()
        for key, storage in unpickler.storages.items():
            storage.data = np.frombuffer(z.read(f"{root}data/{key}"), storage.dtype)
    return obj, unpickler.storages
