"""ONNX -> graph IR.

`import_onnx` reads a model (path, bytes or ModelProto), checks its opset and operators, binds
symbolic input dimensions, runs ONNX shape inference and converts each node into canonical graph
IR nodes (one form per op whatever the opset wrote). The result is verified; the cleanup passes
(`compiler.graph.passes.simplify`) then fold what converters write around the real work.
Every problem is a one-line ModelImportError naming the file, node, operator and opset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from compiler.errors import GraphError, ModelImportError
from compiler.frontend import convert_nn, convert_tensor, convert_vision  # noqa: F401  (they register converters)
from compiler.frontend.context import ImportContext
from compiler.frontend.onnx_load import Source, default_opset, external_location, load_model
from compiler.frontend.onnx_shapes import (
    MAX_TENSOR_ELEMENTS,
    bind_inputs,
    check_finite,
    check_tensor_size,
    infer_types,
    numpy_dtype,
)
from compiler.frontend.registry import SUPPORTED
from compiler.graph.ir import Graph, const
from compiler.graph.verify import verify


def import_onnx(source: Source, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph IR of an ONNX model, every shape static (symbolic input dimensions taken from
    `input_shapes`, name -> dims). Raises ModelImportError with a one-line message."""
    model, label = load_model(source)
    opset = default_opset(model, label)
    _check_operators(model, opset, label)
    _check_tensor_dims(model, label)
    weights = _read_initializers(model, label)  # before shape inference, which trusts them
    _check_resize_constants(model, weights, label)
    bound = bind_inputs(model, input_shapes, label)
    types = infer_types(model, label)
    graph = Graph(model.graph.name or "main")
    for name, (shape, dtype) in bound.items():
        graph.add_input(name, shape, dtype)
    for name, data in weights.items():
        graph.add_value(const(name, data))
    ctx = ImportContext(graph, opset, types, _used_names(model), label)
    for node in _sorted_nodes(model, set(graph.values), label):
        _convert(ctx, node)
    graph.outputs = [o.name for o in model.graph.output]
    return _finish(graph, label)


def _convert(ctx: ImportContext, node: onnx.NodeProto) -> None:
    """Convert one node. Malformed data inside a well-formed file (a weight of the wrong size,
    an index out of range in a shape computation) surfaces here as numpy's ValueError or
    IndexError; it becomes a ModelImportError naming the node."""
    if not node.output or not node.output[0]:
        raise ModelImportError(
            f"{ctx.label}: node {node_label(node)!r} ({node.op_type}, opset {ctx.opset}) has no output"
        )
    try:
        ctx.begin(node)
        SUPPORTED[node.op_type].convert(ctx)
    except ModelImportError:
        raise
    except (GraphError, ValueError, IndexError) as e:
        ctx.fail(f"cannot convert: {e}")


def node_label(node: onnx.NodeProto) -> str:
    """How messages name a node: its name, else its first output, else its op type."""
    return node.name or (node.output[0] if node.output else node.op_type)


def _check_operators(model: onnx.ModelProto, opset: int, label: str) -> None:
    bad = [n for n in model.graph.node if n.domain not in ("", "ai.onnx") or n.op_type not in SUPPORTED]
    if bad:
        n = bad[0]
        op = f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        others = len(bad) - 1
        more = f"; {others} more unsupported node{'s' * (others > 1)}" if others else ""
        raise ModelImportError(
            f"{label}: unsupported operator {op} (node {node_label(n)!r}, opset {opset}{more})"
        )


def _check_tensor_dims(model: onnx.ModelProto, label: str) -> None:
    """Dims of every initializer and Constant tensor, checked before ONNX shape inference sees
    them: a negative dim aborts its C++ (an assertion, the whole process), a huge one would be
    allocated."""
    tensors = [(f"initializer {t.name!r}", t) for t in model.graph.initializer]
    tensors += [(f"node {node_label(n)!r} ({n.op_type}) attribute {a.name!r}", a.t)
                for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    for what, tensor in tensors:
        negative = [d for d in tensor.dims if d < 0]
        if negative:
            raise ModelImportError(f"{label}: {what} has negative dimension {negative[0]} "
                                   f"(dims {list(tensor.dims)})")
        check_tensor_size(tensor.dims, f"{label}: {what}")


def _read_initializers(model: onnx.ModelProto, label: str) -> dict[str, np.ndarray]:
    """Each initializer's data, name -> array: a supported dtype, readable, defined once, finite."""
    weights: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        numpy_dtype(tensor.data_type, f"{label}: initializer {tensor.name!r}")
        if external_data_helper.uses_external_data(tensor):  # left unloaded: the model came as bytes
            raise ModelImportError(
                f"{label}: initializer {tensor.name!r} stores its data in the external file "
                f"{external_location(tensor)!r}; import the model from its path"
            )
        try:
            data = np.asarray(numpy_helper.to_array(tensor))
        except Exception as e:  # raw data of the wrong size...
            raise ModelImportError(f"{label}: initializer {tensor.name!r} cannot be read ({e})") from None
        if tensor.name in weights:
            raise ModelImportError(f"{label}: initializer {tensor.name!r} is defined twice")
        check_finite(data, f"{label}: initializer {tensor.name!r}")
        weights[tensor.name] = data
    return weights


MAX_RESIZE_SCALE = 1024


def _check_resize_constants(model: onnx.ModelProto, weights: dict[str, np.ndarray], label: str) -> None:
    """Resize scales and sizes given as weights, checked before ONNX shape inference: an infinite,
    huge or negative one makes a negative dimension there, which aborts its C++ downstream."""
    for node in model.graph.node:
        if node.op_type != "Resize":
            continue
        for i, what, lo, hi in ((2, "scales", 0.0, MAX_RESIZE_SCALE), (3, "sizes", 0, MAX_TENSOR_ELEMENTS)):
            data = weights.get(node.input[i]) if i < len(node.input) else None
            if data is not None and data.size and not (np.all(data > lo) and np.all(data <= hi)):
                raise ModelImportError(
                    f"{label}: node {node_label(node)!r} (Resize) {what} {data.tolist()} must each be "
                    f"above {lo} and at most {hi}"
                )


def _used_names(model: onnx.ModelProto) -> set[str]:
    return {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}


def _sorted_nodes(model: onnx.ModelProto, defined: set[str], label: str) -> list[onnx.NodeProto]:
    """The nodes in an order where each input is defined first (ONNX requires it; some tools
    write graphs that break it). Raises on an input nothing defines."""
    pending, ordered, defined = list(model.graph.node), [], set(defined)
    while pending:
        ready = [n for n in pending if all(not i or i in defined for i in n.input)]
        if not ready:
            n = pending[0]
            missing = next(i for i in n.input if i and i not in defined)
            raise ModelImportError(
                f"{label}: node {node_label(n)!r} ({n.op_type}) reads {missing!r}, "
                "which nothing defines (or a cycle)"
            )
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        ordered += ready
        defined.update(o for n in ready for o in n.output if o)
    return ordered


def _finish(graph: Graph, label: str) -> Graph:
    """Drop what nothing reads (dead nodes, unused weights), then verify."""
    for out in graph.outputs:
        if out not in graph.values:
            raise ModelImportError(f"{label}: graph output {out!r} is not produced by any node")
    graph.remove_dead()
    try:
        return verify(graph)
    except GraphError as e:
        raise ModelImportError(f"{label}: the model is inconsistent: {e}") from None
