"""Converters of ONNX's compute ops (convolution, products, pooling, normalisation, activations,
arithmetic, quantization) into canonical graph IR nodes."""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.context import ImportContext
from compiler.frontend.registry import converter
from compiler.graph.ir import Value


def _axis(ctx: ImportContext, a: int, rank: int) -> int:
    """A non-negative axis for rank `rank`, from ONNX's possibly negative one."""
    if not -rank <= a < max(rank, 1):
        ctx.fail(f"axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _window(ctx: ImportContext, x: Value, kernel: tuple[int, ...]) -> dict[str, object]:
    """strides, pads and dilations with defaults filled and auto_pad resolved to explicit pads."""
    rank = len(kernel)
    strides = ctx.ints_attr("strides", (1,) * rank)
    dilations = ctx.ints_attr("dilations", (1,) * rank)
    auto = ctx.str_attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = ctx.ints_attr("pads", (0,) * (2 * rank))
    elif auto == "VALID":
        pads = (0,) * (2 * rank)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = _same_pads(x.shape[2:], kernel, strides, dilations, auto == "SAME_UPPER")
    else:
        ctx.fail(f"auto_pad {auto!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        ctx.fail(f"strides {strides}, dilations {dilations}, pads {pads} do not match kernel {kernel}")
    return {"strides": strides, "pads": pads, "dilations": dilations}


def _same_pads(
    sizes: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    upper: bool,
) -> tuple[int, ...]:
    """Pads giving ceil(size / stride) outputs; the odd one at the end (UPPER) or begin (LOWER)."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        total = max(0, (-(-n // s) - 1) * s + d * (k - 1) + 1 - n)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return tuple(begins + ends)


@converter("Conv", note="any group count (depthwise); auto_pad resolved to explicit pads")
def _conv(ctx: ImportContext) -> None:
    x, w = ctx.value(0), ctx.value(1)
    kernel = w.shape[2:]
    declared = ctx.ints_attr("kernel_shape", kernel)
    if declared != kernel:
        ctx.fail(f"kernel_shape {declared} differs from the weight's {kernel}")
    inputs = [x.name, w.name] + ([b] if (b := ctx.input(2)) else [])
    ctx.emit("Conv", inputs, {**_window(ctx, x, kernel), "group": ctx.int_attr("group", 1)})


@converter("Gemm", note="alpha/beta/transA/transB kept; `normalize_gemm` folds them into the weights")
def _gemm(ctx: ImportContext) -> None:
    inputs = [ctx.value(0).name, ctx.value(1).name] + ([c] if (c := ctx.input(2)) else [])
    attrs = {
        "alpha": ctx.float_attr("alpha", 1.0),
        "beta": ctx.float_attr("beta", 1.0),
        "transA": ctx.int_attr("transA", 0),
        "transB": ctx.int_attr("transB", 0),
    }
    ctx.emit("Gemm", inputs, attrs)


def _pool(ctx: ImportContext, op: str) -> None:
    ctx.unused_extra_outputs()
    x = ctx.value(0)
    kernel = ctx.ints_attr("kernel_shape", ())
    if len(kernel) != x.rank - 2:
        ctx.fail(f"kernel_shape {kernel} does not fit input {x.shape}")
    attrs = {**_window(ctx, x, kernel), "kernel_shape": kernel, "ceil_mode": ctx.int_attr("ceil_mode", 0)}
    if op == "AveragePool":
        attrs["count_include_pad"] = ctx.int_attr("count_include_pad", 0)
    ctx.emit(op, [x.name], attrs)


@converter("MaxPool", note="only the values output (Indices rejected if used)")
def _max_pool(ctx: ImportContext) -> None:
    _pool(ctx, "MaxPool")


@converter("AveragePool", note="count_include_pad, ceil_mode")
def _avg_pool(ctx: ImportContext) -> None:
    _pool(ctx, "AveragePool")


@converter(
    "BatchNormalization",
    note="inference form only; `fold_batchnorm` folds it into Conv/Gemm or rewrites it to Mul + Add",
)
def _batch_norm(ctx: ImportContext) -> None:
    ctx.unused_extra_outputs()
    if ctx.int_attr("training_mode", 0):
        ctx.fail("training_mode=1 is not supported (export the model in inference mode)")
    ctx.emit(
        "BatchNormalization",
        [ctx.value(i).name for i in range(5)],
        {"epsilon": ctx.float_attr("epsilon", 1e-5)},
    )


@converter("LayerNormalization", note="opset 17+; the Mean and InvStdDev outputs, where read, "
           "as ReduceMean, Sub, Mul, Add, Sqrt, Div")
def _layer_norm(ctx: ImportContext) -> None:
    x = ctx.value(0)
    inputs = [x.name, ctx.value(1).name] + ([b] if (b := ctx.input(2)) else [])
    axis, eps = _axis(ctx, ctx.int_attr("axis", -1), x.rank), ctx.float_attr("epsilon", 1e-5)
    ctx.emit("LayerNormalization", inputs, {"axis": axis, "epsilon": eps})
    extra = [o if o in ctx.used else "" for o in list(ctx.node.output[1:3])]
    if any(extra):
        _layer_norm_stats(ctx, x.name, tuple(range(axis, x.rank)), eps, extra)


def _layer_norm_stats(ctx: ImportContext, x: str, axes: tuple[int, ...], eps: float, outs: list[str]) -> None:
    """LayerNormalization's Mean and InvStdDev outputs (`outs`, "" where unread), in float32."""
    dtype = ctx.graph.values[x].dtype
    mean = ctx.emit("ReduceMean", [x], {"axes": axes, "keepdims": 1}, output=outs[0] or ctx.temp("mean"))
    if len(outs) < 2 or not outs[1]:
        return
    d = ctx.emit("Sub", [x, mean], output=ctx.temp("centered"))
    var = ctx.emit("ReduceMean", [ctx.emit("Mul", [d, d], output=ctx.temp("squared"))],
                   {"axes": axes, "keepdims": 1}, output=ctx.temp("var"))
    eps_c = ctx.add_const(ctx.temp("eps"), np.array(eps, dtype))
    var_eps = ctx.emit("Add", [var, eps_c], output=ctx.temp("var_eps"))
    std = ctx.emit("Sqrt", [var_eps], output=ctx.temp("std"))
    ctx.emit("Div", [ctx.add_const(ctx.temp("one"), np.array(1, dtype)), std], output=outs[1])


@converter(
    "Softmax",
    note="before opset 13 (softmax of the flattened trailing axes) rewritten as "
    "Reshape + Softmax + Reshape unless the axis is the last",
)
def _softmax(ctx: ImportContext) -> None:
    x = ctx.value(0)
    axis = _axis(ctx, ctx.int_attr("axis", -1 if ctx.opset >= 13 else 1), x.rank)
    if ctx.opset >= 13 or axis == x.rank - 1:
        ctx.emit("Softmax", [x.name], {"axis": axis})
        return
    flat = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    two_d = ctx.emit("Reshape", [x.name], {"shape": flat}, output=ctx.temp("2d"))
    soft = ctx.emit("Softmax", [two_d], {"axis": 1}, output=ctx.temp("softmax"))
    ctx.emit("Reshape", [soft], {"shape": x.shape})


@converter(
    "Clip",
    note="min/max attributes (opset < 11) or constant inputs become attributes; Clip of Clip/Relu merges",
)
def _clip(ctx: ImportContext) -> None:
    if ctx.opset < 11:
        lo, hi = ctx.float_attr("min", -math.inf), ctx.float_attr("max", math.inf)
    else:
        lo_data, hi_data = ctx.param(1, "min"), ctx.param(2, "max")
        lo = -math.inf if lo_data is None else float(lo_data.reshape(-1)[0])
        hi = math.inf if hi_data is None else float(hi_data.reshape(-1)[0])
    ctx.emit("Clip", [ctx.value(0).name], {"min": lo, "max": hi})


def _simple(op: str, attrs: dict[str, float | str] | None = None, note: str = "") -> None:
    """Register a converter that passes inputs through and copies attributes with defaults
    (float or string attributes)."""

    def convert(ctx: ImportContext) -> None:
        names = [ctx.value(i).name for i in range(len(ctx.node.input))]
        values = {
            k: ctx.str_attr(k, d) if isinstance(d, str) else ctx.float_attr(k, d)
            for k, d in (attrs or {}).items()
        }
        ctx.emit(op, names, values)

    converter(op, note=note)(convert)


_NOTES = {
    "Max": "Max(x, scalar) becomes Clip(min=scalar)",
    "Min": "Min(x, scalar) becomes Clip(max=scalar)",
    "Relu": "Clip(x, 0, inf) becomes Relu",
    "MatMul": "2-D MatMul by a constant (+ bias Add) becomes Gemm",
    "GlobalAveragePool": "ReduceMean over the spatial axes of an image becomes it",
    "Div": "integers truncate toward zero",
}
_PLAIN = "Relu Sigmoid Tanh Exp Erf Sqrt Neg Abs Add Sub Mul Div Pow Sum Max Min MatMul GlobalAveragePool"
for _op in [*_PLAIN.split(), "GlobalMaxPool"]:
    _simple(_op, note=_NOTES.get(_op, ""))
_simple("Identity", note="removed by `remove_identities`")
_simple(
    "HardSwish", note="opset 14+; the x * HardSigmoid(x) and x * Clip(x + 3, 0, 6) / 6 patterns become it"
)
_simple(
    "HardSigmoid", {"alpha": 0.2, "beta": 0.5}, note="Clip(x + 3, 0, 6) / 6 becomes HardSigmoid(1/6, 1/2)"
)
_simple("LeakyRelu", {"alpha": 0.01})
_simple(
    "Gelu", {"approximate": "none"}, note="opset 20+; the Erf pattern (Div, Erf, Add, Mul, Mul) becomes it"
)


@converter("Dropout", note="inference: the data output only (a used mask is rejected)")
def _dropout(ctx: ImportContext) -> None:
    ctx.unused_extra_outputs()
    training = ctx.param(2, "training_mode") if ctx.opset >= 12 else None
    if training is not None and bool(training.reshape(-1)[0]):
        ctx.fail("training_mode=true is not supported (export the model in inference mode)")
    ctx.emit("Dropout", [ctx.value(0).name])


def _zero_point(ctx: ImportContext, scale: Value, dtype: str) -> str:
    """The zero-point input, or a zero constant of `dtype` where the model omits it."""
    name = ctx.input(2)
    if name is not None:
        return name
    return ctx.add_const(ctx.temp("zero_point"), np.zeros(scale.shape, dtype))


def _quant_axis(ctx: ImportContext, x: Value, scale: Value) -> int:
    """The channel axis of a per-axis scale; 0 for a per-tensor (scalar) one, whose axis ONNX
    ignores."""
    if ctx.int_attr("block_size", 0):
        ctx.fail("blocked quantization (block_size) is not supported")
    return _axis(ctx, ctx.int_attr("axis", 1), x.rank) if x.rank and scale.rank else 0


@converter("QuantizeLinear", note="kept as an op; a missing zero point becomes an explicit zero")
def _quantize(ctx: ImportContext) -> None:
    x, scale = ctx.value(0), ctx.value(1)
    out_type = ctx.int_attr("output_dtype", 0)
    dtype = ctx.dtype_of(out_type) if out_type else "uint8"
    zero = _zero_point(ctx, scale, dtype)
    ctx.emit("QuantizeLinear", [x.name, scale.name, zero], {"axis": _quant_axis(ctx, x, scale)})


@converter("DequantizeLinear", note="kept as an op; a missing zero point becomes an explicit zero")
def _dequantize(ctx: ImportContext) -> None:
    x, scale = ctx.value(0), ctx.value(1)
    zero = _zero_point(ctx, scale, x.dtype)
    ctx.emit("DequantizeLinear", [x.name, scale.name, zero], {"axis": _quant_axis(ctx, x, scale)})
