"""What an ONNX op converter sees: the node being converted, its attributes and inputs, the graph
being built, and `emit` to add canonical nodes.

Parameters that ONNX passes as tensors (Reshape's shape, Slice bounds, Clip bounds, axes, pads)
must be known at import time: `param` takes them from constants or evaluates the nodes that
compute them (Shape -> Gather -> Concat chains fold because every shape is static here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.errors import GraphError, ModelImportError
from compiler.frontend.onnx_shapes import TypeInfo, check_tensor_size, numpy_dtype
from compiler.graph.interp import evaluate_node
from compiler.graph.ir import Graph, Node, Value, const
from compiler.graph.opdefs import OPS, make_node


class ParameterNotConstant(ModelImportError):
    """A parameter input (a shape, axes, pads, bounds) that neither constants nor static shapes
    determine; `name` is the value it reads. A caller holding that value's data (the ONNX
    backend, at run time) can bind it as a constant and import again."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


class ImportContext:
    """State of one import: the graph under construction and the ONNX node being converted."""

    def __init__(
        self, graph: Graph, opset: int, types: Mapping[str, TypeInfo], used: set[str], label: str
    ) -> None:
        self.graph = graph
        self.label = label  # the model's name in messages (its path)
        self.opset = opset
        self.types = types
        self.used = used  # names some node or graph output reads
        self.producers: dict[str, Node] = {}
        self.known: dict[str, np.ndarray] = {}
        self.node_names: set[str] = set()
        self.node = onnx.NodeProto()
        self.attrs: dict[str, object] = {}

    # -- the current node ---------------------------------------------------------------------

    def begin(self, node: onnx.NodeProto) -> None:
        self.node = node
        self.attrs = {a.name: _attr_value(a) for a in node.attribute}

    def where(self) -> str:
        name = self.node.name or (self.node.output[0] if self.node.output else "")
        return f"{self.label}: node {name!r} ({self.node.op_type}, opset {self.opset})"

    def fail(self, problem: str) -> NoReturn:
        raise ModelImportError(f"{self.where()}: {problem}")

    def attr(self, name: str, default: object = None) -> object:
        return self.attrs.get(name, default)

    def int_attr(self, name: str, default: int) -> int:
        value = self.attrs.get(name, default)
        if not isinstance(value, int):
            self.fail(f"attribute {name}={value!r} is not an integer")
        return value

    def float_attr(self, name: str, default: float) -> float:
        value = self.attrs.get(name, default)
        if not isinstance(value, float | int):
            self.fail(f"attribute {name}={value!r} is not a number")
        return float(value)

    def ints_attr(self, name: str, default: tuple[int, ...]) -> tuple[int, ...]:
        value = self.attrs.get(name, default)
        if not isinstance(value, tuple | list) or not all(isinstance(v, int) for v in value):
            self.fail(f"attribute {name}={value!r} is not a list of integers")
        return tuple(value)

    def str_attr(self, name: str, default: str) -> str:
        value = self.attrs.get(name, default)
        if not isinstance(value, str):
            self.fail(f"attribute {name}={value!r} is not a string")
        return value

    def input(self, i: int) -> str | None:
        """Name of input `i`, None when absent (past the end or the empty name)."""
        return self.node.input[i] if i < len(self.node.input) and self.node.input[i] else None

    def value(self, i: int) -> Value:
        name = self.input(i)
        if name is None:
            self.fail(f"input {i} is missing")
        if name not in self.graph.values:  # a later output of a node whose first only converts
            self.fail(f"input {i} ({name!r}) is an output this importer does not produce "
                      "(only the first output of its node is converted)")
        return self.graph.values[name]

    def param(self, i: int, what: str) -> np.ndarray | None:
        """The data of input `i`, which must be computable now; None when the input is absent."""
        name = self.input(i)
        if name is None:
            return None
        data = self.evaluate(name)
        if data is None:
            raise ParameterNotConstant(
                f"{self.where()}: {what} (input {name!r}) is not a constant and cannot be computed "
                "from static shapes",
                name,
            )
        return data

    def evaluate(self, name: str) -> np.ndarray | None:
        """Value `name`'s data if constants and static shapes determine it, else None."""
        value = self.graph.values[name]
        if value.data is not None:
            return value.data
        if name not in self.known:
            node = self.producers.get(name)
            if node is None or not OPS[node.op].foldable:
                return None
            if OPS[node.op].shape_only:
                v = self.graph.values[node.inputs[0]]
                arrays = [np.broadcast_to(np.zeros((), v.dtype), v.shape)]
            else:
                arrays = []
                for i in node.inputs:
                    data = self.evaluate(i)
                    if data is None:
                        return None
                    arrays.append(data)
            try:
                results = evaluate_node(self.graph, node, arrays)
            except (ValueError, IndexError) as e:  # e.g. a Gather index out of range
                self.fail(f"cannot compute {name!r}: {e}")
            self.known.update(zip(node.outputs, results, strict=True))
        return self.known[name]

    def unused_extra_outputs(self) -> None:
        """Only the first output is converted; a model that reads another one is rejected."""
        for name in self.node.output[1:]:
            if name and name in self.used:
                self.fail(
                    f"output {name!r} is used; only the first output of {self.node.op_type} is supported"
                )

    # -- building -----------------------------------------------------------------------------

    def emit(
        self, op: str, inputs: list[str], attrs: Mapping[str, object] | None = None, output: str | None = None
    ) -> str:
        """Add a canonical node writing `output` (default: the ONNX node's first output).

        Types come from ONNX shape inference where it found them, else from the op's rule; the
        verifier later checks that both agree.
        """
        output = output or self.node.output[0]
        try:
            node = make_node(op, inputs, [output], attrs, self._node_name(output))
            ((shape, dtype),) = OPS[op].infer([self.graph.values[i] for i in inputs], node.attrs)
        except GraphError as e:
            self.fail(str(e))
        known_shape, known_dtype = self.types.get(output, (None, None))
        check_tensor_size(shape, f"{self.where()}: output {output!r}")
        if known_shape is not None:
            check_tensor_size(known_shape, f"{self.where()}: output {output!r}")
        self.graph.add_value(
            Value(output, known_shape if known_shape is not None else shape, known_dtype or dtype)
        )
        self.graph.nodes.append(node)
        self.producers[output] = node
        return output

    def temp(self, suffix: str) -> str:
        """A fresh value name for an intermediate this converter introduces."""
        return self.graph.fresh_name(f"{self.node.output[0]}/{suffix}")

    def add_const(self, name: str, data: np.ndarray) -> str:
        self.graph.add_value(const(name, data))
        return name

    def dtype_of(self, elem_type: int) -> str:
        return numpy_dtype(elem_type, f"{self.where()}: element type")

    def _node_name(self, output: str) -> str:
        """The ONNX node's name for the node writing its first output, else the output's name;
        made unique, since the verifier requires it."""
        name = self.node.name if self.node.name and output == self.node.output[0] else output
        base, i = name, 0
        while name in self.node_names:
            i += 1
            name = f"{base}.{i}"
        self.node_names.add(name)
        return name


def _attr_value(attr: onnx.AttributeProto) -> object:
    """An ONNX attribute as Python data: str for strings, tuple for lists, arrays for tensors."""
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value)
    return value
