"""Writing small ONNX models as converters write them, at a chosen opset, and running them in
onnxruntime, the reference every import test compares with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

from compiler.frontend import import_onnx
from compiler.graph import Graph, run_graph, verify
from compiler.graph.passes import simplify

NEWEST = onnx.defs.onnx_opset_version()
OPSETS = (9, 13, NEWEST)


class Builder:
    """Nodes and initializers of one graph at `opset`, with the opset-dependent forms (attribute
    or input) written the way that opset requires."""

    def __init__(self, opset: int, seed: int = 0) -> None:
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    # -- tensors ----------------------------------------------------------------------------------

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name: str, shape: Sequence[int], scale: float = 0.5) -> str:
        return self.init(name, (self.rng.normal(size=shape) * scale).astype(np.float32))

    def ints(self, values: Sequence[int]) -> str:
        return self.init(self.fresh("ints"), np.array(values, np.int64))

    def floats(self, values: object) -> str:
        return self.init(self.fresh("c"), np.array(values, np.float32))

    def constant(self, name: str, array: np.ndarray) -> str:
        """A Constant node, as PyTorch's legacy exporter writes weights and shapes."""
        self.nodes.append(
            helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array)))
        )
        return name

    # -- nodes ------------------------------------------------------------------------------------

    def op(
        self, op_type: str, inputs: Sequence[str], out: str | None = None, n_out: int = 1, **attrs: object
    ) -> str:
        """Add a node; its first output's name (`out`, or a fresh one)."""
        out = out or self.fresh(op_type.lower())
        outputs = [out] + [f"{out}_extra{i}" for i in range(1, n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=f"{op_type}_{out}", **attrs))
        return out

    def axes_op(
        self, op_type: str, x: str, axes: Sequence[int], since: int, out: str | None = None, **attrs: object
    ) -> str:
        """An op whose `axes` became an input at opset `since` (Squeeze/Unsqueeze 13, Reduce* 13/18)."""
        if self.opset >= since:
            return self.op(op_type, [x, self.ints(axes)], out, **attrs)
        return self.op(op_type, [x], out, axes=list(axes), **attrs)

    def unsqueeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.axes_op("Unsqueeze", x, axes, 13, out)

    def squeeze(self, x: str, axes: Sequence[int], out: str | None = None) -> str:
        return self.axes_op("Squeeze", x, axes, 13, out)

    def reduce_mean(self, x: str, axes: Sequence[int], keepdims: int = 1, out: str | None = None) -> str:
        return self.axes_op("ReduceMean", x, axes, 18, out, keepdims=keepdims)

    def clip(self, x: str, lo: float, hi: float, out: str | None = None) -> str:
        if self.opset < 11:
            return self.op("Clip", [x], out, min=lo, max=hi)
        return self.op("Clip", [x, self.floats(lo), self.floats(hi)], out)

    def slice(
        self,
        x: str,
        starts: Sequence[int],
        ends: Sequence[int],
        axes: Sequence[int],
        steps: Sequence[int] | None = None,
        out: str | None = None,
    ) -> str:
        if self.opset < 10:
            assert steps is None
            return self.op("Slice", [x], out, starts=list(starts), ends=list(ends), axes=list(axes))
        extra = [self.ints(steps)] if steps is not None else []
        return self.op("Slice", [x, self.ints(starts), self.ints(ends), self.ints(axes), *extra], out)

    def pad(
        self, x: str, pads: Sequence[int], value: float = 0.0, mode: str = "constant", out: str | None = None
    ) -> str:
        if self.opset < 11:
            return self.op("Pad", [x], out, pads=list(pads), value=value, mode=mode)
        return self.op("Pad", [x, self.ints(pads), self.floats(value)], out, mode=mode)

    def dropout(self, x: str, out: str | None = None) -> str:
        """Dropout with its mask output, as inference exports keep it."""
        if self.opset < 12:
            return self.op("Dropout", [x], out, n_out=2, ratio=0.25)
        return self.op("Dropout", [x, self.floats(0.25)], out, n_out=2)

    def flatten_by_shape(self, x: str, out: str | None = None) -> str:
        """x.view(x.size(0), -1) as PyTorch exports it: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
        shape = self.op("Shape", [x])
        batch = self.op("Gather", [shape, self.init(self.fresh("zero"), np.array(0, np.int64))], axis=0)
        dims = self.op("Concat", [self.unsqueeze(batch, [0]), self.ints([-1])], axis=0)
        return self.op("Reshape", [x, dims], out)

    # -- the model --------------------------------------------------------------------------------

    def model(
        self,
        inputs: Mapping[str, Sequence[int | str]],
        outputs: Sequence[str],
        types: Mapping[str, int] | None = None,
        ir_version: int = 8,
    ) -> onnx.ModelProto:
        """The model with `inputs` (name -> dims, symbolic dims as strings) and `outputs`, float32
        unless `types` gives an ONNX element type for a name."""
        types = types or {}
        ins = [
            helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), list(s))
            for n, s in inputs.items()
        ]
        outs = [helper.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), None) for n in outputs]
        graph = helper.make_graph(self.nodes, "g", ins, outs, initializer=self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", self.opset)], ir_version=ir_version
        )
        return _declare_output_shapes(model)


def _declare_output_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Output types as exporters write them (the checker wants shapes), where ONNX can infer them."""
    inferred = onnx.shape_inference.infer_shapes(model)
    for out, found in zip(model.graph.output, inferred.graph.output, strict=True):
        if found.type.tensor_type.HasField("shape"):
            out.type.CopyFrom(found.type)
    return model


def has_output_shapes(model: onnx.ModelProto) -> bool:
    return all(o.type.tensor_type.HasField("shape") for o in model.graph.output)


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs, one thread, graph optimizations off (the plain reference).

    Where onnxruntime has no kernel for an op at the model's opset (QuantizeLinear 28 in
    onnxruntime 1.32), onnx's own reference evaluator answers instead.
    """
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except OrtNotImplemented:
        names = [o.name for o in model.graph.output]
        return dict(zip(names, ReferenceEvaluator(model).run(names, dict(feeds)), strict=True))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds)), strict=True))


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input: normal floats, small non-negative integers."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        v = graph.values[name]
        if v.dtype.startswith("float"):
            feeds[name] = rng.normal(size=v.shape).astype(v.dtype)
        else:
            feeds[name] = rng.integers(0, 4, size=v.shape).astype(v.dtype)
    return feeds


def assert_matches_ort(
    model: onnx.ModelProto, graph: Graph, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-5
) -> None:
    """The graph's interpreter outputs equal onnxruntime's on the original model, to `rtol` and
    to `atol` times the output's magnitude."""
    feeds = random_inputs(graph, seed)
    expected = ort_run(model, feeds)
    got = run_graph(graph, feeds)
    for name, ref in expected.items():
        scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
        np.testing.assert_allclose(got[name], ref, rtol=rtol, atol=atol * scale, err_msg=name)
        assert got[name].dtype == ref.dtype, name


def import_and_simplify(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> Graph:
    """Import, verify, simplify with the verifier after every pass."""
    graph = verify(import_onnx(model, input_shapes))
    return simplify(graph, check=True)
