"""The workbench as an `onnx.backend.base.Backend`: what ONNX's own conformance suite
(`onnx.backend.test.BackendTest`) and any other backend-API caller runs.

The float path: `import_onnx`, the `simplify` graph passes, then each node as the host's native
kernel where one covers it (`CpuModel`, with `native=True`) or through the graph interpreter (the
default: the conformance suite's thousands of tiny models would spend their time compiling
kernels; the interpreter is the reference every native kernel is tested against).

The workbench compiles for static shapes and constant parameters. Where a model leaves them to
run time, `prepare` defers the import to `run`, which binds them from the data it is given:
- symbolic input dimensions (`dim_param`, empty, -1) take the shapes of the input arrays (or
  `input_shapes=` given to `prepare`);
- a parameter input (Reshape's shape, Slice's bounds, axes, pads, Clip's bounds...) that is a
  graph input, or is computed from graph inputs, is frozen to the value given, as a constant.
Each distinct binding is imported once and cached.

    rep = WorkbenchBackend.prepare(model)          # or prepare(model, native=True)
    (y,) = rep.run([x])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper, version_converter
from onnx.backend.base import Backend, BackendRep

from compiler.errors import ModelImportError
from compiler.frontend import import_onnx
from compiler.frontend.context import ParameterNotConstant
from compiler.frontend.onnx_load import MIN_OPSET
from compiler.frontend.onnx_shapes import graph_inputs
from compiler.graph.interp import run_graph
from compiler.graph.ir import Graph
from compiler.graph.passes import simplify
from compiler.runtime.cpu_model import CpuModel

Shapes = Mapping[str, Sequence[int]]


class Prepared:
    """One import of the model: the simplified graph (and its native kernels) plus the inputs
    frozen into it as constants."""

    def __init__(self, graph: Graph, frozen: frozenset[str], native: bool) -> None:
        self.graph, self.frozen = graph, frozen
        self.cpu = CpuModel.compile(graph, fuse=True) if native else None

    def run(self, feeds: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
        live = {k: v for k, v in feeds.items() if k not in self.frozen}
        outputs = self.cpu.run(live).outputs if self.cpu is not None else run_graph(self.graph, live)
        return tuple(_output(self.graph, name, outputs) for name in self.graph.outputs)


class WorkbenchRep(BackendRep):
    """A prepared model; imported at `prepare` when its shapes and parameters are static, else at
    the first `run` of each distinct binding."""

    def __init__(self, model: onnx.ModelProto, shapes: Shapes | None, native: bool) -> None:
        self.model, self.shapes, self.native = _upgraded(model), dict(shapes or {}), native
        self.inputs = [vi.name for vi in graph_inputs(self.model)]
        self.cache: dict[tuple[object, ...], Prepared] = {}
        self.symbolic = _symbolic(self.model, self.shapes)
        self.static = None if self.symbolic else _try_import(self.model, self.shapes, native)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The outputs, in the model's order, for `inputs`: a list in graph-input order, one
        array, or a dict by name."""
        feeds = _feeds(self.inputs, inputs)
        if self.static is not None:
            return self.static.run(feeds)
        return self._bound(feeds).run(feeds)

    def _bound(self, feeds: Mapping[str, np.ndarray]) -> Prepared:
        shapes = {**{k: feeds[k].shape for k in self.symbolic if k in feeds}, **self.shapes}
        frozen: set[str] = set()
        for _ in range(len(self.inputs) + 1):
            key = (tuple(sorted(shapes.items())),
                   tuple((n, feeds[n].dtype.str, feeds[n].tobytes()) for n in sorted(frozen)))
            if key in self.cache:
                return self.cache[key]
            try:
                model = _freeze(self.model, {n: feeds[n] for n in frozen})
                graph = simplify(import_onnx(model, {k: v for k, v in shapes.items() if k not in frozen}))
            except ParameterNotConstant as e:
                more = _input_ancestors(self.model, e.name) - frozen
                if not more or not more <= set(feeds):
                    raise
                frozen |= more
                continue
            self.cache[key] = Prepared(graph, frozenset(frozen), self.native)
            return self.cache[key]
        raise AssertionError("unreachable: each round freezes at least one more input")


class WorkbenchBackend(Backend):
    """`prepare(model, device="CPU", native=False, input_shapes=None)`: see the module doc."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> WorkbenchRep:
        if not cls.supports_device(device):
            raise ModelImportError(f"device {device!r} is not supported (the workbench runs on the CPU)")
        return WorkbenchRep(model, kwargs.get("input_shapes"), bool(kwargs.get("native", False)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


def _upgraded(model: onnx.ModelProto) -> onnx.ModelProto:
    """A model older than the frontend's first opset, converted to it by ONNX's version
    converter (the model itself where the converter cannot: import then names the opset)."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions or versions[0] >= MIN_OPSET:
        return model
    try:
        return version_converter.convert_version(model, MIN_OPSET)
    except Exception:  # the converter raises several C++ types; import's message names the opset
        return model


def _try_import(model: onnx.ModelProto, shapes: Shapes, native: bool) -> Prepared | None:
    """The model imported now, or None when a parameter is left to run time."""
    try:
        return Prepared(simplify(import_onnx(model, shapes or None)), frozenset(), native)
    except ParameterNotConstant:
        return None


def _symbolic(model: onnx.ModelProto, shapes: Shapes) -> set[str]:
    """The inputs not bound by `shapes` with a dimension only the data can tell."""
    found = set()
    for vi in graph_inputs(model):
        tensor = vi.type.tensor_type
        if vi.name in shapes or not vi.type.HasField("tensor_type"):
            continue
        if not tensor.HasField("shape") or any(
            not d.HasField("dim_value") or d.dim_value < 0 for d in tensor.shape.dim
        ):
            found.add(vi.name)
    return found


def _freeze(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """`model` with the inputs `values` names turned into initializers holding those values."""
    if not values:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = [vi for vi in out.graph.input if vi.name not in values]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    for name, array in values.items():
        out.graph.initializer.append(numpy_helper.from_array(np.asarray(array), name))
    return out


def _input_ancestors(model: onnx.ModelProto, name: str) -> set[str]:
    """The graph inputs that value `name` is computed from (itself, if it is one)."""
    inputs = {vi.name for vi in graph_inputs(model)}
    producer = {o: n for n in model.graph.node for o in n.output}
    seen, todo, found = set(), [name], set()
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in inputs:
            found.add(v)
        elif v in producer:
            todo.extend(i for i in producer[v].input if i)
    return found


def _feeds(names: Sequence[str], inputs: Any) -> dict[str, np.ndarray]:
    if isinstance(inputs, Mapping):
        return {k: np.asarray(v) for k, v in inputs.items()}
    arrays = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
    return {n: np.asarray(a) for n, a in zip(names, arrays, strict=False)}


def _output(graph: Graph, name: str, outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    if name in outputs:
        return outputs[name]
    data = graph.values[name].data
    if data is None:
        raise ModelImportError(f"graph output {name!r} was not computed")
    return data


class NativeBackend(WorkbenchBackend):
    """`WorkbenchBackend` with `native=True` by default: every node a native host kernel where
    one covers it (what the conformance suite's slow run checks)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> WorkbenchRep:
        return super().prepare(model, device, **{"native": True, **kwargs})
