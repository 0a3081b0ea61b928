"""Graph nodes on the host as native kernels (compiler/ops/cpu, JIT-compiled with LLVM).

`host_kernel(graph, node)` returns a function from the node's input arrays to its outputs, or
None when no native kernel covers the node (the runtime then evaluates it with the graph
interpreter and reports it as `host-numpy`).  Each mapping reads the node's canonical attributes
(compiler/graph/opdefs) and the quantized-graph contract (compiler/quant).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.graph.passes.normalize_gemm import CANONICAL
from compiler.ops.cpu import HOST_OPS, compile_host_op, host_op

Kernel = Callable[[list[np.ndarray]], list[np.ndarray]]

# The level of the host kernels in O2_OPS (below): LLVM's O3 costs them compile time and buys no speed.
LIGHT_OPT_LEVEL = 2
# Kernels that move or map elements one by one (no sums) are compiled at O2: LLVM's O3 unrolls
# their short constant loops into large bodies, 5-10x the compile time (most of a cold compile of
# EfficientNet-Lite1's host kernels are these) for no faster code. No reduction: same results.
ELEMENTWISE_OPS = frozenset({"pack", "unpack", "quantize", "dequantize", "clip", "relu", "cast",
                             "requantize"})


# The int8 convolutions on the host (depthwise ones mostly) compile at O2 too: EfficientNet-Lite1's
# 16 distinct ones took 10-11 s of CPU at O3 and 6-8 s at O2 (loaded machine), and ran in 33-36 ms
# and 34-41 ms (all 47 layers' shapes once). Integer kernels: the same results at any level.
O2_OPS = ELEMENTWISE_OPS | {"qconv2d"}


def opt_level_of(name: str) -> int:
    """The LLVM optimisation level the runtime compiles host operator `name` at."""
    return LIGHT_OPT_LEVEL if name in O2_OPS else 3


def host_spec(graph: Graph, node: Node) -> tuple[str, dict[str, Any], int] | None:
    """The host operator that runs `node`: its registry name, parameters, and how many of the
    node's inputs it takes (in order); None when no native kernel covers the node."""
    make = _MAPPINGS.get(node.op)
    if make is None:
        return None
    spec = make(graph, node)
    if spec is None or spec[0] not in HOST_OPS:
        return None
    try:
        host_op(spec[0], **spec[1])  # parameters the kernel does not take (float64, uint16...):
    except ValueError:  # the interpreter runs the node, reported as host-numpy
        return None
    return spec


def host_kernel(graph: Graph, node: Node) -> Kernel | None:
    spec = host_spec(graph, node)
    if spec is None:
        return None
    name, params, arity = spec
    kernel = compile_host_op(name, opt_level_of(name), **params)
    shapes = [graph.values[o].shape for o in node.outputs]

    def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
        # (a scalar operand is passed as one element: host kernels take rank >= 1)
        result = kernel(*(np.ascontiguousarray(a).reshape(a.shape or (1,)) for a in arrays[:arity]))
        outs = list(result) if isinstance(result, tuple) else [result]
        return [o.reshape(s) for o, s in zip(outs, shapes, strict=True)]

    return run


Spec = tuple[str, dict[str, Any], int] | None


def _shape(graph: Graph, node: Node, i: int = 0) -> tuple[int, ...]:
    return graph.values[node.inputs[i]].shape


def _dtype(graph: Graph, node: Node, i: int = 0) -> str:
    return graph.values[node.inputs[i]].dtype


def _window(node: Node) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]] | None:
    """kernel, stride, pad of a 2-D pool with symmetric padding, floor mode, no dilation."""
    kernel, strides, pads = node.ints_attr("kernel_shape"), node.ints_attr("strides"), node.ints_attr("pads")
    if len(kernel) != 2 or pads[:2] != pads[2:] or node.attrs.get("ceil_mode", 0):
        return None
    if any(d != 1 for d in node.attrs.get("dilations", (1, 1))):  # type: ignore[union-attr]
        return None
    return (kernel[0], kernel[1]), (strides[0], strides[1]), (pads[0], pads[1])


def _max_pool(graph: Graph, node: Node) -> Spec:
    win = _window(node)
    if win is None or len(node.outputs) != 1:
        return None
    kernel, stride, pad = win
    return "max_pool2d", {"shape": _shape(graph, node), "kernel": kernel, "stride": stride, "pad": pad,
                          "dtype": _dtype(graph, node)}, 1


def _global_avg_pool(graph: Graph, node: Node) -> Spec:
    if _dtype(graph, node) != "float32":
        return None
    return "global_avg_pool2d", {"shape": _shape(graph, node)}, 1


def _last_axis(graph: Graph, node: Node, name: str) -> Spec:
    shape = _shape(graph, node)
    if node.int_attr("axis") % len(shape) != len(shape) - 1 or _dtype(graph, node) != "float32":
        return None
    return name, {"shape": shape}, 1


def _softmax(graph: Graph, node: Node) -> Spec:
    return _last_axis(graph, node, "softmax")


def _gelu(graph: Graph, node: Node) -> Spec:
    if node.attrs.get("approximate", "none") != "none" or _dtype(graph, node) != "float32":
        return None
    return "gelu", {"shape": _shape(graph, node)}, 1


def _layer_norm(graph: Graph, node: Node) -> Spec:
    spec = _last_axis(graph, node, "layer_norm")
    if spec is None:
        return None
    spec[1].update(eps=node.float_attr("epsilon"), bias=len(node.inputs) > 2)
    return spec[0], spec[1], len(node.inputs)


def _quantize(graph: Graph, node: Node) -> Spec:
    return "quantize", {"shape": _shape(graph, node), "scale": node.float_attr("scale"),
                        "zero_point": node.int_attr("zero_point")}, 1


def _dequantize(graph: Graph, node: Node) -> Spec:
    return "dequantize", {"shape": _shape(graph, node), "scale": node.float_attr("scale"),
                          "dtype": _dtype(graph, node)}, 1


def _binary(name: str) -> Callable[[Graph, Node], Spec]:
    def make(graph: Graph, node: Node) -> Spec:
        a, b = _shape(graph, node, 0) or (1,), _shape(graph, node, 1) or (1,)
        if _dtype(graph, node, 0) != _dtype(graph, node, 1):
            return None
        return name, {"a_shape": a, "b_shape": b, "dtype": _dtype(graph, node)}, 2

    return make


def _epilogue(node: Node) -> dict[str, Any]:
    return {"shift": node.int_attr("shift"), "clip_lo": node.int_attr("clip_lo"),
            "clip_hi": node.int_attr("clip_hi")}


def _vectors(node: Node) -> tuple[int, bool] | None:
    """A QConv/QGemm's kernel arity and precise flag: 4 inputs (x, w, bias, mult) plain, 6 (then
    clamp_lo, clamp_hi) with `split` > 0 (precise); None for another form (a fused residual)."""
    precise = node.int_attr("split") > 0
    arity = 6 if precise else 4
    return (arity, precise) if len(node.inputs) == arity else None


def _qconv(graph: Graph, node: Node) -> Spec:
    form = _vectors(node)
    residual = form is None and len(node.inputs) == 5 and not node.int_attr("split")
    if residual:  # a fused residual add (compiler.quant.fuse_residual)
        form = (5, False)
    if form is None:
        return None
    arity, precise = form
    extra = {"residual": True, "mult_r": node.int_attr("mult_r")} if residual else {}
    return "qconv2d", {**extra, "shape": _shape(graph, node), "weight_shape": _shape(graph, node, 1),
                       "strides": node.ints_attr("strides"), "pads": node.ints_attr("pads"),
                       "group": node.int_attr("group"), "precise": precise,
                       "pad_value": node.int_attr("pad_value"), **_epilogue(node)}, arity


def _qgemm(graph: Graph, node: Node) -> Spec:
    form = _vectors(node)
    if form is None:
        return None
    arity, precise = form
    return "qgemm", {"shape": _shape(graph, node), "weight_shape": _shape(graph, node, 1),
                     "precise": precise, **_epilogue(node)}, arity


def _qadd(graph: Graph, node: Node) -> Spec:
    return "qadd", {"shape": _shape(graph, node), "mult_a": node.int_attr("mult_a"),
                    "mult_b": node.int_attr("mult_b"), **_epilogue(node)}, 2


def _qglobal_avg_pool(graph: Graph, node: Node) -> Spec:
    return "qglobal_avg_pool", {"shape": _shape(graph, node), "mult": node.int_attr("mult"),
                                **_epilogue(node)}, 1


def _transpose(graph: Graph, node: Node) -> Spec:
    return ("transpose", {"shape": _shape(graph, node), "perm": node.ints_attr("perm"),
                          "dtype": _dtype(graph, node)}, 1)


def _gather(graph: Graph, node: Node) -> Spec:
    shape = _shape(graph, node)
    if not shape:
        return None
    return ("gather", {"shape": shape, "indices_shape": _shape(graph, node, 1) or (1,),
                       "axis": node.int_attr("axis") % len(shape), "dtype": _dtype(graph, node),
                       "index_dtype": _dtype(graph, node, 1)}, 2)


def _cast(graph: Graph, node: Node) -> Spec:
    return ("cast", {"shape": _shape(graph, node) or (1,), "dtype": _dtype(graph, node),
                     "to": str(node.attrs["to"])}, 1)


def _matmul(graph: Graph, node: Node) -> Spec:
    if _dtype(graph, node, 0) != _dtype(graph, node, 1):
        return None
    return ("matmul", {"a_shape": _shape(graph, node, 0), "b_shape": _shape(graph, node, 1),
                       "dtype": _dtype(graph, node)}, 2)


def _floats(graph: Graph, node: Node) -> bool:
    return all(_dtype(graph, node, i) == "float32" for i in range(len(node.inputs)))


def _gemm(graph: Graph, node: Node) -> Spec:
    """The canonical float Gemm (normalize_gemm): A[M, K], W[N, K], b[N] or no bias."""
    if dict(node.attrs) != CANONICAL or not _floats(graph, node):
        return None
    weight = _shape(graph, node, 1)
    if len(node.inputs) == 3 and (len(weight) != 2 or _shape(graph, node, 2) != weight[:1]):
        return None
    return ("gemm", {"shape": _shape(graph, node), "weight_shape": weight,
                     "bias": len(node.inputs) == 3}, len(node.inputs))


def _float_unary(name: str, *attrs: str) -> Callable[[Graph, Node], Spec]:
    """The float32 element-wise host op `name`, with the node's float attributes `attrs`."""

    def make(graph: Graph, node: Node) -> Spec:
        if _dtype(graph, node) != "float32":  # integer Relu: the interpreter
            return None
        return name, {"shape": _shape(graph, node) or (1,), **{a: node.float_attr(a) for a in attrs}}, 1

    return make


def _conv(graph: Graph, node: Node) -> Spec:
    """A float 2-D convolution without dilation: data, weight and an optional bias (K,)."""
    data, weight = _shape(graph, node), _shape(graph, node, 1)
    if not _floats(graph, node) or len(data) != 4 or len(weight) != 4:
        return None
    if any(d != 1 for d in node.ints_attr("dilations")):
        return None
    bias = len(node.inputs) == 3
    if bias and _shape(graph, node, 2) != weight[:1]:
        return None
    return ("conv2d", {"shape": data, "weight_shape": weight, "strides": node.ints_attr("strides"),
                       "pads": node.ints_attr("pads"), "group": node.int_attr("group"), "bias": bias},
            len(node.inputs))


_MAPPINGS: dict[str, Callable[[Graph, Node], Spec]] = {
    "QConv": _qconv,
    "QGemm": _qgemm,
    "QAdd": _qadd,
    "QGlobalAvgPool": _qglobal_avg_pool,
    "MaxPool": _max_pool,
    "GlobalAveragePool": _global_avg_pool,
    "Softmax": _softmax,
    "Gelu": _gelu,
    "LayerNormalization": _layer_norm,
    "Quantize": _quantize,
    "Dequantize": _dequantize,
    "Add": _binary("add"),
    "Mul": _binary("mul"),
    "Sub": _binary("sub"),
    "Div": _binary("div"),
    "Transpose": _transpose,
    "Gather": _gather,
    "Cast": _cast,
    "MatMul": _matmul,
}

# The float classifier after the last Dequantize and bert's pooler: float32 kernels that agree
# with numpy to ~1e-7 relative, not bit for bit (another summation order; tanh within 1 ulp).
# `codesign run` checks the integer part exactly and float outputs within a tolerance.
_MAPPINGS.update({"Gemm": _gemm, "Tanh": _float_unary("tanh"),
                  "HardSigmoid": _float_unary("hard_sigmoid", "alpha", "beta"),
                  "HardSwish": _float_unary("hard_swish")})

# A first convolution the quantizer keeps in float, and its activation: Conv within float32
# rounding of numpy's (another summation order, compiler.ops.cpu.convf), Clip and Relu bit for bit.
_MAPPINGS.update({"Conv": _conv, "Clip": _float_unary("clip", "min", "max"), "Relu": _float_unary("relu")})


def _resize(graph: Graph, node: Node) -> Spec:
    """Nearest Resize by integer factors whose interpreter index table is i // factor."""
    from compiler.graph.opdefs.vision import nearest_index

    shape, out = _shape(graph, node), graph.values[node.outputs[0]].shape
    if node.attrs["mode"] != "nearest" or _dtype(graph, node) != "float32" or len(shape) > 5:
        return None
    if any(o % n for n, o in zip(shape, out, strict=True)):
        return None
    factors = tuple(o // n for n, o in zip(shape, out, strict=True))
    for axis, f in enumerate(factors):
        if not np.array_equal(nearest_index(node.attrs, axis, shape[axis]), np.arange(out[axis]) // f):
            return None
    return "resize_nearest", {"shape": shape, "factors": factors}, 1


def _prelu(graph: Graph, node: Node) -> Spec:
    if _dtype(graph, node) != "float32" or _dtype(graph, node, 1) != "float32":
        return None
    return "prelu", {"shape": _shape(graph, node), "slope_shape": _shape(graph, node, 1) or (1,)}, 2


# Vision ops on large activations (compiler.ops.cpu.resample), bit for bit as the interpreter.
_MAPPINGS.update({"Resize": _resize, "PRelu": _prelu})
