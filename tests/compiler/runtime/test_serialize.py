"""compiler/runtime/serialize.py: a damaged or hostile .cmodel is one ModelFileError, never a
traceback, a pickle, or an allocation past hw.npz's limits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.runtime.serialize import FORMAT, VERSION, ModelFileError, load

EMPTY = {"format": FORMAT, "version": VERSION, "graph_name": "g", "values": [], "inputs": [],
         "outputs": [], "nodes": []}


def _write(path, meta, **arrays):
    with open(path, "wb") as fh:  # (np.savez would append .npz to a name)
        np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)
    return path


@pytest.mark.parametrize("meta, message", [
    ([1, 2], r"not a compiled model file \(metadata is not an object\)$"),
    ({**EMPTY, "values": 5}, r"malformed model metadata \(TypeError: 'int' object is not iterable\)$"),
    ({**EMPTY, "values": [{"name": "v"}]}, r"malformed model metadata \(KeyError: 'const'\)$"),
    ({k: v for k, v in EMPTY.items() if k != "graph_name"},
     r"malformed model metadata \(KeyError: 'graph_name'\)$"),
    (EMPTY, r"malformed model metadata \(config is not a dict\)$"),
    ({**EMPTY, "config": {}, "placement": "accel"}, r"malformed model metadata \(placement is not a list\)$"),
])
def test_malformed_metadata_is_one_error(tmp_path, meta, message):
    path = _write(tmp_path / "m.cmodel", meta)
    with pytest.raises(ModelFileError, match=message):
        load(path)


def test_pickles_and_non_files_are_refused(tmp_path):
    path = tmp_path / "p.cmodel"
    with open(path, "wb") as fh:
        np.savez(fh, meta=np.array([json.dumps(EMPTY)], dtype=object))
    with pytest.raises(ModelFileError, match=r"p.cmodel: not a compiled model file \(Object arrays "
                                             r"cannot be loaded when allow_pickle=False\)$"):
        load(path)
    with pytest.raises(ModelFileError, match=r"not a compiled model file \(not a regular file\)$"):
        load(tmp_path)
