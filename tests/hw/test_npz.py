"""hw/npz.py: the npz files a user hands over are read without pickles and within limits."""

from __future__ import annotations

import numpy as np
import pytest

from hw import npz
from hw.errors import InputError


def test_reads_every_array(tmp_path):
    path = tmp_path / "a.npz"
    np.savez(path, x=np.arange(3), y=np.ones((2, 2), np.int8))
    arrays = npz.read_npz(path, error=InputError, what="inputs")
    assert sorted(arrays) == ["x", "y"] and arrays["y"].dtype == np.int8


def test_missing_device_and_foreign_files(tmp_path):
    with pytest.raises(InputError, match=r"nope.npz: no such file$"):
        npz.read_npz(tmp_path / "nope.npz", error=InputError, what="inputs")
    with pytest.raises(InputError, match=r"^/dev/zero: not inputs \(not a regular file\)$"):
        npz.read_npz("/dev/zero", error=InputError, what="inputs")
    single = tmp_path / "one.npy"
    np.save(single, np.arange(3))
    with pytest.raises(InputError, match=r"one.npy: not inputs \(an array, not an npz archive\)$"):
        npz.read_npz(single, error=InputError, what="inputs")
    truncated = tmp_path / "t.npz"
    np.savez(truncated, x=np.arange(1000))
    truncated.write_bytes(truncated.read_bytes()[:100])
    with pytest.raises(InputError, match=r"t.npz: not inputs \("):
        npz.read_npz(truncated, error=InputError, what="inputs")


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "p.npz"
    np.savez(path, x=np.array([{"code": "print('pwned')"}], dtype=object))
    with pytest.raises(InputError, match=r"p.npz: not inputs \(Object arrays cannot be loaded when "
                                         r"allow_pickle=False\)"):
        npz.read_npz(path, error=InputError, what="inputs")


def test_limits_are_checked_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "big.npz"
    np.savez(path, x=np.zeros(1000, np.int8))
    monkeypatch.setattr(npz, "MAX_ARRAY_BYTES", 500)
    with pytest.raises(InputError, match=r"big.npz: array 'x' holds 1128 bytes, more than the limit "
                                         r"of 500 \(hw.npz.MAX_ARRAY_BYTES\)$"):
        npz.read_npz(path, error=InputError, what="inputs")
    monkeypatch.setattr(npz, "MAX_FILE_BYTES", 100)
    size = path.stat().st_size
    with pytest.raises(InputError, match=rf"big.npz: {size} bytes, more than the limit of 100 bytes for "
                                         r"inputs \(hw.npz.MAX_FILE_BYTES\)$"):
        npz.read_npz(path, error=InputError, what="inputs")
