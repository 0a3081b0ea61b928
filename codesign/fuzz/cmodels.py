"""Fuzzing compiled model files (`.cmodel`, `codesign run MODEL.cmodel`: compiler.runtime.
serialize.load).

Base: the zoo's MLP compiled for `vta` (nearest rounding).  A case damages the archive (its
arrays and members, as any `.npz`, or the metadata JSON at one place) and loads it as `codesign
run` does: the graph rebuilt and verified, the config validated, the steps compiled again and
their placement compared with the saved one.  An accepted file must give a model whose graph
verifies and whose config has the saved parameters (one the file leaves out takes its
default, as in a config file).
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

import numpy as np

from codesign.fuzz.engine import Kind, run_cli
from codesign.fuzz.mutators import mutate_tree, npz_mutations, read_arrays, write_arrays
from compiler.graph.verify import verify
from compiler.runtime import serialize


@functools.cache
def _mlp() -> bytes:
    from codesign import zoo

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "mlp.onnx"
        model.write_bytes(zoo.build("mlp").SerializeToString())
        result, _ = run_cli(["compile", str(model), "-o", f"{tmp}/mlp.cmodel", "--rounding", "nearest",
                             "--calibration-inputs", "2", "--no-bias-correction"])
        assert result == "accepted", result
        return Path(tmp, "mlp.cmodel").read_bytes()


def mutate_meta(data: bytes, rng: np.random.Generator) -> bytes:
    """The metadata JSON changed at one place (a node, a value's shape, the config, ...)."""
    arrays = read_arrays(data)
    meta = mutate_tree(json.loads(str(arrays["meta"])), rng)
    arrays["meta"] = np.array(json.dumps(meta))
    return write_arrays(arrays)


def check(path: Path) -> str:
    """serialize.load: "accepted" when the model's graph verifies and its config is the saved one."""
    model, _ = serialize.load(path)
    verify(model.graph)
    saved = json.loads(str(read_arrays(path.read_bytes())["meta"]))["config"]
    loaded = model.target.cfg.to_dict()  # a parameter the file leaves out takes its default
    assert {k: loaded[k] for k in saved if k in loaded} == {k: v for k, v in saved.items() if k in loaded}
    return "accepted"


KIND = Kind(name="cmodel", suffix=".cmodel", bases={"mlp": _mlp},
            mutations={**npz_mutations(), "meta": mutate_meta}, check=check)
