"""Seeded, structure-aware mutations of ONNX models: the bases (small zoo models and graphs
written here) and one mutation per case, chosen by the case's seed.

Each mutation damages one thing a hostile or careless file could: a dimension, a dtype, an
attribute, an initializer's data, an edge, a name, an operator, the opset, an external-data
reference, or the serialized bytes themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Mutation = Callable[[onnx.ModelProto, np.random.Generator], bytes | None]

HUGE = 1 << 40
DIMS = (-1, -7, 0, 1, 3, HUGE, (1 << 62))
DTYPES = (TensorProto.UNDEFINED, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT8,
          TensorProto.STRING, TensorProto.BOOL, TensorProto.BFLOAT16, TensorProto.COMPLEX64,
          TensorProto.INT64, 999)
# weights.bin exists beside the fuzzed model (4 KiB) and one directory up (the bait for "..")
EXTERNAL_PATHS = ("/etc/passwd", "../../../etc/passwd", "../weights.bin", "missing.bin", "",
                  "/dev/zero", "sub/../../x.bin", "weights.bin", "weights.bin")


def tiny_conv(rng: np.random.Generator) -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm, 1x3x8x8 in."""
    w = numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(8,)).astype(np.float32), "b")
    fw = numpy_helper.from_array(rng.normal(size=(4, 8 * 4 * 4)).astype(np.float32), "fw")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "tiny_conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w, b, fw])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tiny_matmul(rng: np.random.Generator) -> onnx.ModelProto:
    """MatMul -> Add -> Reshape -> Transpose -> Softmax, a transformer's shape games in small."""
    w = numpy_helper.from_array(rng.normal(size=(16, 16)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.normal(size=(16,)).astype(np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, 4, 2, 8], np.int64), "shape")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["t"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "tiny_matmul",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def tiny_ops(rng: np.random.Generator) -> onnx.ModelProto:
    """The shape computations and layers exporters write around convolutions: BatchNorm, a
    grouped Conv, Pad, AveragePool, ConvTranspose, Resize, Shape -> Gather -> Concat -> Reshape,
    Slice, ReduceMean, Concat, Split (opset 13)."""
    def init(name: str, a: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(a, name)

    f32 = np.float32
    inits = [init("scale", np.ones(4, f32)), init("bias", np.zeros(4, f32)),
             init("mean", rng.normal(size=4).astype(f32)), init("var", np.ones(4, f32)),
             init("w", rng.normal(size=(8, 2, 3, 3)).astype(f32)),
             init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
             init("wt", rng.normal(size=(8, 4, 2, 2)).astype(f32)),
             init("scales", np.array([1, 1, 0.5, 0.5], f32)), init("zero", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64)), init("starts", np.array([0], np.int64)),
             init("ends", np.array([2], np.int64)), init("axes", np.array([1], np.int64)),
             init("split", np.array([1, 1], np.int64))]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Conv", ["bn", "w"], ["c"], name="conv", group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Pad", ["c", "pads"], ["p"], name="pad", mode="constant"),
        helper.make_node("AveragePool", ["p"], ["ap"], name="avg", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ConvTranspose", ["ap", "wt"], ["ct"], name="deconv", strides=[2, 2]),
        helper.make_node("Resize", ["ct", "", "scales"], ["rs"], name="resize", mode="nearest"),
        helper.make_node("Shape", ["rs"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Concat", ["n", "minus1"], ["newshape"], name="concat_shape", axis=0),
        helper.make_node("Reshape", ["rs", "newshape"], ["flat"], name="reshape"),
        helper.make_node("Slice", ["rs", "starts", "ends", "axes"], ["sl"], name="slice"),
        helper.make_node("ReduceMean", ["sl"], ["rm"], name="reduce", axes=[2, 3], keepdims=0),
        helper.make_node("Split", ["rm", "split"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Concat", ["s1", "s0"], ["y"], name="concat", axis=1),
    ]
    graph = helper.make_graph(nodes, "tiny_ops",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("flat", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _pick(rng: np.random.Generator, items):  # type: ignore[no-untyped-def]
    return items[int(rng.integers(len(items)))]


def _node(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.NodeProto:
    return _pick(rng, model.graph.node)


def mutate_dim(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    vi = _pick(rng, list(model.graph.input) + list(model.graph.output))
    dims = vi.type.tensor_type.shape.dim
    choice = int(rng.integers(4))
    if choice == 0 or not dims:
        vi.type.tensor_type.ClearField("shape")
    elif choice == 1:
        dims[int(rng.integers(len(dims)))].dim_param = _pick(rng, ("N", "", "batch size"))
    elif choice == 2:
        dims.add().dim_value = int(_pick(rng, DIMS))
    else:
        dims[int(rng.integers(len(dims)))].dim_value = int(_pick(rng, DIMS))


def mutate_dtype(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    if rng.integers(2) and model.graph.initializer:
        _pick(rng, model.graph.initializer).data_type = int(_pick(rng, DTYPES))
    else:
        _pick(rng, model.graph.input).type.tensor_type.elem_type = int(_pick(rng, DTYPES))


def mutate_attribute(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    node = _node(model, rng)
    choice = int(rng.integers(5))
    if node.attribute and choice == 0:
        del node.attribute[int(rng.integers(len(node.attribute)))]
        return
    if node.attribute and choice in (1, 2):
        attr = _pick(rng, node.attribute)
        name = attr.name
        node.attribute.remove(attr)
        value = _pick(rng, ("same", 1.5, [1.0, 2.0], -1, HUGE, [0, 0], [-3, 9, HUGE], [], 0)) if choice == 1 \
            else _pick(rng, (-1, 0, HUGE, -HUGE, [-1] * 4, [0] * 4, [HUGE] * 2, [7], [1] * 9))
        node.attribute.append(_attribute(name, value))
        return
    name = _pick(rng, ("axis", "perm", "pads", "kernel_shape", "strides", "group", "transA",
                       "dilations", "auto_pad", "bogus", "epsilon", "ceil_mode"))
    value = _pick(rng, (-1, 0, 5, HUGE, [-1, 0], [1, 1, 1, 1], [3, 2, 1, 0], "SAME_UPPER", "VALID",
                        "nonsense", 0.0, float("nan")))
    for attr in list(node.attribute):
        if attr.name == name:
            node.attribute.remove(attr)
    node.attribute.append(_attribute(name, value))


def _attribute(name: str, value: object) -> onnx.AttributeProto:
    """An attribute, an empty list written as an empty list of ints."""
    if value == []:
        return helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS)
    return helper.make_attribute(name, value)


def mutate_initializer(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    if not model.graph.initializer:
        return
    t = _pick(rng, model.graph.initializer)
    choice = int(rng.integers(7))
    if t.data_type == TensorProto.INT64 and rng.integers(2):
        choice = 2
    if choice == 0:  # truncated raw data
        t.raw_data = t.raw_data[: int(rng.integers(len(t.raw_data) + 1))]
    elif choice == 1:  # data of the wrong size
        t.raw_data = t.raw_data + bytes(int(rng.integers(1, 9)))
    elif choice == 2 and t.data_type == TensorProto.FLOAT:  # non-finite weights
        a = numpy_helper.to_array(t).copy()
        a.reshape(-1)[int(rng.integers(max(a.size, 1)))] = _pick(rng, (np.nan, np.inf, -np.inf, 3e38))
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    elif choice == 2 and t.data_type == TensorProto.INT64:  # a shape, axes or pads out of range
        a = numpy_helper.to_array(t).copy()
        a.reshape(-1)[int(rng.integers(max(a.size, 1)))] = _pick(rng, (-1, -2, 0, 5, -(1 << 62), 1 << 62))
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    elif choice == 3:  # empty
        t.ClearField("raw_data")
        del t.float_data[:]
        del t.int64_data[:]
    elif choice == 4:  # dims that promise more (or less) than the data holds
        if t.dims:
            t.dims[int(rng.integers(len(t.dims)))] = int(_pick(rng, DIMS))
        else:
            t.dims.append(int(_pick(rng, DIMS)))
    elif choice == 5:  # typed and raw data both, or data in the wrong field
        t.float_data.extend([1.0, 2.0])
    else:  # a shape with many dims of size 1, or a rank-0 weight
        del t.dims[:]


def mutate_edge(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    nodes = model.graph.node
    node = _node(model, rng)
    choice = int(rng.integers(6))
    if choice == 0 and node.input:  # dangling
        node.input[int(rng.integers(len(node.input)))] = "nowhere"
    elif choice == 1 and node.input:  # a cycle: reads its own output, or a later node's
        later = nodes[int(rng.integers(len(nodes)))]
        node.input[0] = later.output[0] if later.output else node.output[0]
    elif choice == 2:  # two writers of one value
        other = _node(model, rng)
        if other.output and node.output:
            other.output[0] = node.output[0]
    elif choice == 3:  # duplicate names
        name = _pick(rng, [n.name for n in nodes] + [t.name for t in model.graph.initializer])
        node.name = name
        if model.graph.initializer and rng.integers(2):
            model.graph.initializer[0].name = _pick(rng, [i.name for i in model.graph.input] + ["y", "w"])
    elif choice == 4:  # output produced by nothing, or no outputs at all
        if rng.integers(2):
            model.graph.output[0].name = "ghost"
        else:
            del model.graph.output[:]
    else:  # node without outputs or with empty-named inputs
        if rng.integers(2):
            del node.output[:]
        else:
            node.input.insert(0, "")


def mutate_operator(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    node = _node(model, rng)
    choice = int(rng.integers(3))
    if choice == 0:
        node.op_type = _pick(rng, ("Frobnicate", "", "conv", "Loop", "If", "Scan", "NonZero", "TopK"))
    elif choice == 1:
        node.domain = _pick(rng, ("com.microsoft", "ai.onnx.ml", "x" * 300, "ai.onnx"))
    else:
        node.op_type = _pick(rng, ("Conv", "Gemm", "MatMul", "Relu", "Reshape", "Add", "Concat",
                                   "Transpose", "Slice", "Gather", "Softmax", "MaxPool", "Pad", "Resize"))


def mutate_opset(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    choice = int(rng.integers(3))
    if choice == 0:
        model.opset_import[0].version = int(_pick(rng, (0, 1, 8, 9, 11, 99, -5, HUGE)))
    elif choice == 1:
        model.opset_import.append(helper.make_opsetid(_pick(rng, ("", "ai.onnx", "com.microsoft")), 12))
    else:
        del model.opset_import[:]
        model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))


def mutate_external(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    if not model.graph.initializer:
        return
    t = _pick(rng, model.graph.initializer)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    entries = {"location": _pick(rng, EXTERNAL_PATHS)}
    if rng.integers(2):
        entries["offset"] = str(_pick(rng, (0, -1, 4090, HUGE, "x")))
    if rng.integers(2):
        entries["length"] = str(_pick(rng, (0, 4, 4096, HUGE, "-3")))
    for key, value in entries.items():
        entry = t.external_data.add()
        entry.key, entry.value = key, value


def mutate_bytes(model: onnx.ModelProto, rng: np.random.Generator) -> bytes:
    data = bytearray(model.SerializeToString())
    choice = int(rng.integers(4))
    if choice == 0:
        return bytes(data[: int(rng.integers(len(data)))])
    if choice == 1:
        for _ in range(int(rng.integers(1, 9))):
            data[int(rng.integers(len(data)))] = int(rng.integers(256))
        return bytes(data)
    if choice == 2:
        return rng.bytes(int(rng.integers(1, 4096)))
    return rng.bytes(int(rng.integers(1, 16))) + bytes(data)


MUTATIONS: dict[str, Callable[[onnx.ModelProto, np.random.Generator], object]] = {
    "dim": mutate_dim, "dtype": mutate_dtype, "attribute": mutate_attribute,
    "initializer": mutate_initializer, "edge": mutate_edge, "operator": mutate_operator,
    "opset": mutate_opset, "external": mutate_external, "bytes": mutate_bytes,
}


def mutate(model: onnx.ModelProto, kind: str, rng: np.random.Generator) -> bytes:
    """The serialized model after mutation `kind` (a private copy; `model` is unchanged);
    one mutation in two is followed by a second of a random kind."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kinds = [kind] + ([_pick(rng, [k for k in MUTATIONS if k != "bytes"])] if rng.integers(2) else [])
    for k in reversed(kinds):  # the named kind last, so "bytes" damages the final file
        try:
            out = MUTATIONS[k](copy, rng)
        except Exception:  # a mutation that cannot apply to what the first left
            continue
        if isinstance(out, bytes):
            return out
    return copy.SerializeToString()
