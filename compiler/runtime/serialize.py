"""A compiled model in one file (`.cmodel`, an npz archive): the quantized graph (nodes, values,
constants), the accelerator config, and how each step was placed.  Programs are not stored:
compiling them again from the graph is deterministic and takes about a second for ResNet-18."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from compiler.graph.ir import Graph, Node, Value
from compiler.graph.verify import verify
from compiler.runtime.accel import KnobsFor
from compiler.runtime.model import CompiledModel
from compiler.target.accel import AcceleratorTarget
from hw.config import AcceleratorConfig
from hw.errors import WorkbenchError
from hw.npz import read_npz

FORMAT = "codesign-cmodel"
VERSION = 1


class ModelFileError(WorkbenchError):
    """A .cmodel file that cannot be read back."""


def save(model: CompiledModel, path: str | Path, extra: dict[str, Any] | None = None) -> None:
    g = model.graph
    consts = {f"c{i}": v.data for i, v in enumerate(g.values.values()) if v.data is not None}
    names = iter(consts)
    values = [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype,
               "const": next(names) if v.data is not None else None} for v in g.values.values()]
    meta = {
        "format": FORMAT, "version": VERSION, "graph_name": g.name, "config": model.target.cfg.to_dict(),
        "inputs": list(g.inputs), "outputs": list(g.outputs), "values": values,
        "nodes": [{"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs),
                   "attrs": _attrs_json(n.attrs), "name": n.name} for n in g.nodes],
        "placement": [s.where for s in model.steps], "offload_shallow": model.offload_shallow,
        "extra": extra or {},
    }
    with open(path, "wb") as f:
        np.savez(f, meta=np.array(json.dumps(meta)), **consts)  # type: ignore[arg-type]


def load(path: str | Path, knobs_for: KnobsFor | None = None) -> tuple[CompiledModel, dict[str, Any]]:
    """The model (steps compiled again, with `knobs_for`'s schedules where it has one; placement
    checked) and the `extra` saved with it."""
    meta, arrays = _read(path)
    try:
        g = _graph(meta, arrays)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, WorkbenchError):
            raise
        raise ModelFileError(f"{path}: malformed model metadata ({type(exc).__name__}: {exc})") from None
    for key, kind in (("config", dict), ("placement", list), ("extra", dict)):
        if not isinstance(meta.get(key), kind):
            raise ModelFileError(f"{path}: malformed model metadata ({key} is not a {kind.__name__})")
    cfg = AcceleratorConfig.from_dict(meta["config"], where=f"{path}: config")
    model = CompiledModel.compile(g, AcceleratorTarget(cfg), knobs_for=knobs_for,
                                  offload_shallow=bool(meta.get("offload_shallow", False)))
    placed = [s.where for s in model.steps]
    if placed != meta["placement"]:
        saved, now = meta["placement"].count("accel"), placed.count("accel")
        raise ModelFileError(f"{path}: the steps no longer compile to the saved placement (saved "
                             f"{saved} accelerator steps, now {now})")
    return model, meta["extra"]


def _graph(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Graph:
    names = [meta["graph_name"], *meta["inputs"], *meta["outputs"], *(v["name"] for v in meta["values"]),
             *(x for n in meta["nodes"] for x in (n["name"], n["op"], *n["inputs"], *n["outputs"]))]
    for name in names:
        if not isinstance(name, str) or not name.isprintable():  # messages quote names in one line
            raise TypeError(f"name {name!r} is not a printable string")
    g = Graph(meta["graph_name"])
    for v in meta["values"]:
        data = arrays[v["const"]] if v["const"] else None
        g.values[v["name"]] = Value(v["name"], tuple(v["shape"]), v["dtype"], data)
    g.inputs, g.outputs = list(meta["inputs"]), list(meta["outputs"])
    g.nodes = [Node(n["op"], tuple(n["inputs"]), tuple(n["outputs"]), _attrs_back(n["attrs"]), n["name"])
               for n in meta["nodes"]]
    verify(g)
    return g


def _read(path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    arrays = read_npz(path, error=ModelFileError, what="a compiled model file")  # no pickles
    try:
        meta = json.loads(str(arrays.pop("meta")))
    except (KeyError, json.JSONDecodeError):
        raise ModelFileError(f"{path}: not a compiled model file (no metadata)") from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: not a compiled model file (metadata is not an object)")
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ModelFileError(f"{path}: format {meta.get('format')} version {meta.get('version')}, this "
                             f"workbench reads {FORMAT} version {VERSION}")
    return meta, arrays


def _attrs_json(attrs: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def _attrs_back(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
