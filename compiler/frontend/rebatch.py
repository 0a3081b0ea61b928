"""Importing an ONNX model at another batch: `import_at_batch(source, batch)`.

A model exported at batch 1 fixes axis 0 of its inputs to 1, and a converter often writes the
batch into its Reshape targets too (`[1, seq, heads, head_dim]`).  To run it at batch B (a
batch-1 model on a core whose GEMM batch is 2 runs at batch 2), each input's axis 0 becomes B,
and each Reshape whose data and constant target both start with the model's own batch has that
axis of its target set to B.  Everything else follows from ONNX shape inference at import.

The result is checked: every output must keep its shape but for axis 0, which goes from the
model's batch to B.  A model that cannot be re-batched so (inputs of rank 0 or of different
batches, a batch folded into another axis, a shape computed from the batch some other way) is
refused with a one-line ModelImportError naming the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.errors import ModelImportError
from compiler.frontend.onnx_import import import_onnx
from compiler.frontend.onnx_load import Source, load_model
from compiler.frontend.onnx_shapes import bind_inputs, infer_types
from compiler.graph.ir import Graph


def import_at_batch(source: Source, batch: int,
                    input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph IR of the model `source` (its inputs bound by `input_shapes` as `import_onnx`
    binds them) with every input's axis 0 set to `batch` (see the module doc)."""
    if batch < 1:
        raise ModelImportError(f"cannot re-batch to batch {batch}: the batch must be at least 1")
    original = import_onnx(source, input_shapes)
    own = own_batch(original)
    if own == batch:
        return original
    model, label = load_model(source)
    model = _rebatched(model, own, batch, input_shapes, label)
    try:
        graph = import_onnx(model)
    except ModelImportError as exc:
        raise ModelImportError(f"{label}: cannot re-batch from {own} to {batch}: {exc}") from None
    for name in original.outputs:
        want = (batch, *original.values[name].shape[1:])
        got = graph.values[name].shape
        if got != want:
            raise ModelImportError(f"{label}: cannot re-batch from {own} to {batch}: output {name!r} "
                                   f"is {list(got)}, not {list(want)} (the batch is not its axis 0 alone)")
    return graph


def own_batch(graph: Graph) -> int:
    """The batch of a graph: axis 0 of its inputs, which must agree."""
    shapes = {name: graph.values[name].shape for name in graph.inputs}
    for name, shape in shapes.items():
        if not shape:
            raise ModelImportError(f"cannot re-batch: input {name!r} has rank 0 (no batch axis)")
    batches = sorted({shape[0] for shape in shapes.values()})
    if len(batches) != 1:
        raise ModelImportError(f"cannot re-batch: the inputs' axis 0 differ ({batches}), "
                               "so no one axis is the batch")
    return batches[0]


def _rebatched(model: onnx.ModelProto, own: int, batch: int,
               input_shapes: Mapping[str, Sequence[int]] | None, label: str) -> onnx.ModelProto:
    """`model` (a copy) with its inputs and batch-led Reshape targets at `batch`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    bound = bind_inputs(model, input_shapes, label)
    types = infer_types(onnx.ModelProto.FromString(model.SerializeToString()), label)
    shapes = {name: shape for name, (shape, _) in bound.items()}
    shapes.update({name: t[0] for name, t in types.items() if t[0] is not None})
    constants = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = node.attribute[0].t
    for i, node in enumerate(model.graph.node):
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in constants:
            target = numpy_helper.to_array(constants[node.input[1]])
            data = shapes.get(node.input[0])
            if target.ndim == 1 and target.size and target[0] == own and data and data[0] == own:
                name = f"{node.input[1]}.batch{batch}.{i}"
                model.graph.initializer.append(
                    numpy_helper.from_array(np.concatenate([[batch], target[1:]]).astype(target.dtype), name))
                node.input[1] = name
    for vi in model.graph.input:
        if vi.name in bound:
            dims = vi.type.tensor_type.shape.dim
            dims[0].Clear()
            dims[0].dim_value = batch
    return model


__all__ = ["import_at_batch", "own_batch"]
