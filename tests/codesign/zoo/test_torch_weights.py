"""codesign.zoo.torch_weights: PyTorch state dicts read without torch, and nothing else run."""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from codesign.zoo.errors import ZooError
from codesign.zoo.torch_weights import load_state_dict


class _Global:
    """Pickles as a reference to module.name (what torch.save writes for its functions)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


class _Call:
    def __init__(self, fn: _Global, args: tuple) -> None:  # type: ignore[type-arg]
        self.fn, self.args = fn, args


class _Storage:
    def __init__(self, key: str, dtype: str, size: int) -> None:
        self.key, self.dtype, self.size = key, dtype, size


def _raw_pickle(obj: object) -> bytes:
    """A protocol-2 pickle in which each _Global is written as GLOBAL 'module\\nname\\n'."""
    out = io.BytesIO()
    out.write(b"\x80\x02")
    _write(out, obj)
    out.write(b".")
    return out.getvalue()


def _write(out: io.BytesIO, obj: object) -> None:
    if isinstance(obj, _Global):
        out.write(b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n")
    elif isinstance(obj, _Call):
        _write(out, obj.fn)
        _write(out, obj.args)
        out.write(b"R")
    elif isinstance(obj, _Storage):
        _write(out, ("storage", _Global("torch", obj.dtype), obj.key, "cpu", obj.size))
        out.write(b"Q")  # BINPERSID
    elif isinstance(obj, tuple):
        out.write(b"(")
        for item in obj:
            _write(out, item)
        out.write(b"t")
    elif isinstance(obj, collections.OrderedDict):
        _write(out, _Call(_Global("collections", "OrderedDict"), ()))
        for k, v in obj.items():
            _write(out, k)
            _write(out, v)
            out.write(b"s")  # SETITEM
    else:
        out.write(pickle.dumps(obj, protocol=2)[2:-1])


def _tensor(key: str, dtype: str, size: int, shape: tuple[int, ...], stride: tuple[int, ...],
            offset: int = 0) -> _Call:
    return _Call(_Global("torch._utils", "_rebuild_tensor_v2"),
                 (_Storage(key, dtype, size), offset, shape, stride, False, collections.OrderedDict()))


def _state() -> tuple[collections.OrderedDict, dict[str, np.ndarray]]:  # type: ignore[type-arg]
    w = np.arange(6, dtype=np.float32)
    n = np.array([7], np.int64)
    sd = collections.OrderedDict([("conv.weight", _tensor("0", "FloatStorage", 6, (3, 2), (2, 1))),
                                  ("conv.weight_t", _tensor("0", "FloatStorage", 6, (2, 3), (1, 2))),
                                  ("tail", _tensor("0", "FloatStorage", 6, (2,), (1,), offset=4)),
                                  ("bn.num_batches_tracked", _tensor("1", "LongStorage", 1, (), ()))])
    return sd, {"0": w, "1": n}


def test_legacy_format(tmp_path: Path) -> None:
    sd, storages = _state()
    header = (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True})
    stream = b"".join(pickle.dumps(x, protocol=2) for x in header)
    stream += _raw_pickle(sd) + pickle.dumps(list(storages), protocol=2)
    for key in storages:
        stream += struct.pack("<q", storages[key].size) + storages[key].tobytes()
    (tmp_path / "w.pth").write_bytes(stream)
    got = load_state_dict(tmp_path / "w.pth")
    assert list(got) == ["conv.weight", "conv.weight_t", "tail"]  # scalars dropped
    np.testing.assert_array_equal(got["conv.weight"], np.arange(6).reshape(3, 2))
    np.testing.assert_array_equal(got["conv.weight_t"], np.arange(6).reshape(3, 2).T)
    np.testing.assert_array_equal(got["tail"], [4, 5])


def test_zip_format(tmp_path: Path) -> None:
    sd, storages = _state()
    with zipfile.ZipFile(tmp_path / "w.pt", "w") as z:
        z.writestr("archive/data.pkl", _raw_pickle(sd))
        for key, array in storages.items():
            z.writestr(f"archive/data/{key}", array.tobytes())
    got = load_state_dict(tmp_path / "w.pt")
    np.testing.assert_array_equal(got["conv.weight"], np.arange(6).reshape(3, 2))


def test_code_in_the_file_is_refused(tmp_path: Path) -> None:
    evil = _raw_pickle(_Call(_Global("os", "system"), ("echo hacked",)))
    with zipfile.ZipFile(tmp_path / "evil.pt", "w") as z:
        z.writestr("archive/data.pkl", evil)
    with pytest.raises(ZooError, match="evil.pt: refuses to load os.system"):
        load_state_dict(tmp_path / "evil.pt")
    (tmp_path / "junk.pth").write_bytes(b"junk")
    with pytest.raises(ZooError, match="junk.pth: not a PyTorch weight file"):
        load_state_dict(tmp_path / "junk.pth")
