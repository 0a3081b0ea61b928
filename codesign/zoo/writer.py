"""Write an ONNX graph node by node while evaluating every value on a calibration batch.

Why eager: the batch-norm statistics and classifier biases of a trained network follow from the
data that flows through it. Holding each value's numpy data next to its name lets a model builder
set those from the actual activations in one pass, with no onnxruntime session per layer.

The graph has batch 1; the numpy data carries the calibration batch on axis 0 instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

PRODUCER = "codesign.zoo"


@dataclass(frozen=True)
class Value:
    """A named value of the graph and its data on the calibration batch (axis 0 is the batch)."""

    name: str
    data: np.ndarray


class GraphWriter:
    """Collects inputs, initializers and nodes; `to_model` turns them into a checked-shape model."""

    def __init__(self, graph_name: str, opset: int) -> None:
        self.graph_name = graph_name
        self.opset = opset
        self._inputs: list[onnx.ValueInfoProto] = []
        self._outputs: list[onnx.ValueInfoProto] = []
        self._initializers: list[onnx.TensorProto] = []
        self._nodes: list[onnx.NodeProto] = []
        self._names: set[str] = set()
        self._constants: dict[tuple[str, tuple[int, ...], bytes], Value] = {}

    def _claim(self, name: str) -> str:
        if name in self._names:
            raise ValueError(f"graph {self.graph_name}: value name {name!r} is used twice")
        self._names.add(name)
        return name

    def input(self, name: str, data: np.ndarray) -> Value:
        """A graph input of shape (1, *data.shape[1:]); `data` is its calibration batch."""
        self._inputs.append(_value_info(self._claim(name), data))
        return Value(name, data)

    def param(self, name: str, array: np.ndarray) -> Value:
        """An initializer under a fixed name (weights and batch-norm buffers, torch-style names)."""
        self._initializers.append(numpy_helper.from_array(array, self._claim(name)))
        return Value(name, array)

    def constant(self, array: np.ndarray | np.generic | float, hint: str = "const") -> Value:
        """A shared initializer for a small constant (shapes, axes, scalars); equal arrays share one."""
        arr = np.asarray(array)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._constants:
            name = f"{hint}.{len(self._constants)}"
            self._constants[key] = self.param(name, arr)
        return self._constants[key]

    def node(self, op_type: str, inputs: Sequence[Value | None], data: np.ndarray, *, name: str,
             **attrs: Any) -> Value:
        """One node with one output named `name`; `data` is that output on the calibration batch.

        A None input is written as the empty name ONNX uses for an omitted optional input.
        """
        names = ["" if v is None else v.name for v in inputs]
        self._nodes.append(helper.make_node(op_type, names, [self._claim(name)], name=name, **attrs))
        return Value(name, np.asarray(data, np.float32) if data.dtype == np.float64 else data)

    def output(self, value: Value, name: str) -> Value:
        """Make `value` a graph output called `name`, renaming the output of the node that makes it.

        Builders name nodes after their layer (fc); the graph output gets the name users see (logits).
        """
        users = [n.name for n in self._nodes if value.name in n.input]
        if users:
            raise ValueError(f"graph {self.graph_name}: output {value.name!r} also feeds {users[0]!r}")
        producer = next(n for n in self._nodes if value.name in n.output)
        self._names.discard(value.name)
        producer.output[list(producer.output).index(value.name)] = self._claim(name)
        self._outputs.append(_value_info(name, value.data))
        return Value(name, value.data)

    def to_model(self, *, doc: str, metadata: Mapping[str, str]) -> onnx.ModelProto:
        """The model, stamped with the lowest IR version that carries this opset (as exporters do)."""
        graph = helper.make_graph(self._nodes, self.graph_name, self._inputs, self._outputs,
                                  self._initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER,
                                  ir_version=helper.find_min_ir_version_for(opsets))
        model.doc_string = doc
        helper.set_model_props(model, dict(metadata))
        return model


def _value_info(name: str, data: np.ndarray) -> onnx.ValueInfoProto:
    elem_type = helper.np_dtype_to_tensor_dtype(data.dtype)
    return helper.make_tensor_value_info(name, elem_type, (1, *data.shape[1:]))
