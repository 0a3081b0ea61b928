"""Neural-network ops: convolution, dense products, pooling, normalisation, softmax.

Spatial ops work on NC + any number of spatial dimensions. `pads` is ONNX's order: all begins,
then all ends. Auto-padding and implied kernel shapes are resolved by the frontend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.graph.ir import Value, attr_float, attr_int, attr_ints
from compiler.graph.opdefs.base import (
    FLOATS,
    Attrs,
    AttrSpec,
    OpDef,
    TensorType,
    axis_in,
    broadcast,
    check,
    register,
    same_dtype,
)
from compiler.graph.opdefs.depthwise import depthwise_conv2d

_ints = attr_ints


def window_out(
    size: int, pad_total: int, kernel: int, stride: int, dilation: int, ceil_mode: bool = False
) -> int:
    """Output length of a sliding window (ONNX's rule; with `ceil_mode` the last window must
    start inside the input or its begin padding, not in the end padding)."""
    span = dilation * (kernel - 1) + 1
    room = size + pad_total - span
    check(room >= 0, f"window {span} is larger than the padded input {size + pad_total}")
    out = (-(-room // stride) if ceil_mode else room // stride) + 1
    return out


def _spatial(x: Value, attrs: Attrs, kernel: Sequence[int], ceil_mode: bool = False) -> tuple[int, ...]:
    rank = x.rank - 2
    strides, pads, dil = _ints(attrs, "strides"), _ints(attrs, "pads"), _ints(attrs, "dilations")
    check(len(kernel) == rank, f"kernel {tuple(kernel)} for {rank} spatial dimensions")
    check(
        len(strides) == rank and len(dil) == rank and len(pads) == 2 * rank,
        f"strides {strides}, dilations {dil}, pads {pads} for {rank} spatial dimensions",
    )
    check(
        min(strides + dil, default=1) >= 1 and min(pads, default=0) >= 0,
        f"strides {strides}, dilations {dil}, pads {pads} must be positive",
    )
    out = []
    for i in range(rank):
        n = window_out(x.shape[2 + i], pads[i] + pads[i + rank], kernel[i], strides[i], dil[i], ceil_mode)
        if ceil_mode and (n - 1) * strides[i] >= x.shape[2 + i] + pads[i]:
            n -= 1
        out.append(n)
    return tuple(out)


def _windows(
    x: np.ndarray, attrs: Attrs, kernel: Sequence[int], out: Sequence[int], fill: float
) -> np.ndarray:
    """All windows of `x` padded with `fill`: shape (N, C, *out, *kernel)."""
    rank = x.ndim - 2
    strides, pads, dil = _ints(attrs, "strides"), _ints(attrs, "pads"), _ints(attrs, "dilations")
    span = [d * (k - 1) + 1 for d, k in zip(dil, kernel, strict=True)]
    # extra end padding so ceil-mode windows exist; those cells never count (fill or mask)
    extra = [
        max(0, (o - 1) * s + sp - (n + pads[i] + pads[i + rank]))
        for i, (o, s, sp, n) in enumerate(zip(out, strides, span, x.shape[2:], strict=True))
    ]
    widths = [(0, 0), (0, 0)] + [(pads[i], pads[i + rank] + extra[i]) for i in range(rank)]
    xp = np.pad(x, widths, constant_values=fill) if any(map(any, widths)) else x  # no copy unpadded
    win = sliding_window_view(xp, span, axis=tuple(range(2, 2 + rank)))
    index = (
        (slice(None),) * 2
        + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides, strict=True))
        + tuple(slice(None, None, d) for d in dil)
    )
    return win[index]


# -- convolution ---------------------------------------------------------------------------------


def _conv_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, w, *b = values
    dtype = same_dtype(values, FLOATS)
    group = attr_int(attrs, "group")
    check(x.rank >= 3 and w.rank == x.rank, f"input {x.shape} and weight {w.shape} ranks")
    check(
        group >= 1 and x.shape[1] % group == 0 and w.shape[0] % group == 0,
        f"group {group} does not divide channels {x.shape[1]} and filters {w.shape[0]}",
    )
    check(
        w.shape[1] * group == x.shape[1],
        f"weight {w.shape} expects {w.shape[1] * group} input channels, input has {x.shape[1]}",
    )
    check(not b or b[0].shape == (w.shape[0],), f"bias {b[0].shape if b else ()} is not ({w.shape[0]},)")
    return [TensorType((x.shape[0], w.shape[0]) + _spatial(x, attrs, w.shape[2:]), dtype)]


def _conv(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, w, *b = xs
    n, m, g = x.shape[0], w.shape[0], attr_int(attrs, "group")
    kernel = w.shape[2:]
    out = _spatial(Value("x", x.shape, x.dtype.name), attrs, kernel)
    rank = len(out)
    cg, positions, taps = x.shape[1] // g, math.prod(out), math.prod(kernel)
    if cg == 1 and m == g and rank == 2 and set(_ints(attrs, "dilations")) == {1}:
        strides, pads = _ints(attrs, "strides"), _ints(attrs, "pads")
        return [depthwise_conv2d(x, w, strides, pads, out, b[0] if b else None)]
    if g == 1 and cg >= _RUN and _pointwise(attrs, kernel):
        return [_biased(_pointwise_conv(x, w), b[0] if b else None, x.dtype)]
    win = _windows(x, attrs, kernel, out, 0.0)  # (N, C, *out, *kernel)
    if g == 1 and cg >= _RUN:
        y = _dense_conv(win, w, positions)
    elif cg == 1 and m == g:
        y = _depthwise_conv(win, w)
    else:  # im2col per group: (N, g, positions, cg * taps) @ (g, cg * taps, m / g)
        win = win.reshape(n, g, cg, *out, taps)
        cols = np.moveaxis(win, 2, 2 + rank).reshape(n, g, positions, cg * taps)
        wg = w.reshape(g, m // g, cg * taps).transpose(0, 2, 1)
        y = np.matmul(cols, wg).transpose(0, 1, 3, 2)
    return [_biased(y.reshape(n, m, *out), b[0] if b else None, x.dtype)]


def _biased(y: np.ndarray, bias: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """`(y + bias).astype(dtype)` of a convolution's fresh result `y` (N, M, *out), bias (M,):
    added in y's own buffer where that is the same sum in the same type and y fills its buffer
    (its layout is then the one `y + bias` would allocate), saving two copies."""
    if bias is None:
        return y.astype(dtype, copy=False)
    bias = bias.reshape((-1,) + (1,) * (y.ndim - 2))
    if y.dtype == dtype and np.result_type(y, bias) == dtype and _dense(y):
        return np.add(y, bias, out=y)
    return (y + bias).astype(dtype)


def _dense(y: np.ndarray) -> bool:
    """Whether `y` (not overlapping itself) spans no more memory than its elements."""
    span = sum((n - 1) * abs(s) for n, s in zip(y.shape, y.strides, strict=True)) + y.itemsize
    return y.size > 0 and span == y.size * y.itemsize


# The fewest input channels for which `_dense_conv`'s channel runs beat im2col in the weight's order.
_RUN = 16


def _dense_conv(win: np.ndarray, w: np.ndarray, positions: int) -> np.ndarray:
    """A group-1 convolution of the windows `win` (N, C, *out, *kernel) as one GEMM,
    (N, positions, taps * C) @ (taps * C, M), returned as (N, M, positions). The columns are
    gathered one kernel tap at a time, channels last: each copy moves runs of C contiguous
    values instead of single ones (im2col in the weight's order: 4x slower on ResNet-18's 64-channel
    3x3 convolutions)."""
    n, c = win.shape[:2]
    rank = (win.ndim - 2) // 2
    out, kernel = win.shape[2 : 2 + rank], win.shape[2 + rank :]
    cols = np.empty((n, *out, math.prod(kernel), c), win.dtype)
    for t, tap in enumerate(np.ndindex(*kernel)):
        cols[..., t, :] = np.moveaxis(win[(Ellipsis, *tap)], 1, -1)
    wt = np.moveaxis(w, 1, -1).reshape(w.shape[0], -1)  # (M, taps * C), tap-major like cols
    return np.matmul(cols.reshape(n, positions, -1), wt.T).transpose(0, 2, 1)


def _pointwise(attrs: Attrs, kernel: Sequence[int]) -> bool:
    """Whether a convolution's windows are single input pixels: a 1x1 kernel, stride 1, no pads."""
    return set(kernel) == {1} and set(_ints(attrs, "strides")) == {1} and not any(_ints(attrs, "pads"))


def _pointwise_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`_dense_conv` of a 1x1 kernel at stride 1 without pads: the same GEMM of the same
    (N, positions, C) columns, which are x itself where x is channels-last in memory (the
    interpreter's GEMMs leave their results so), else its channels-last copy; (N, M, *out)."""
    n, c = x.shape[:2]
    cols = np.ascontiguousarray(np.moveaxis(x, 1, -1)).reshape(n, -1, c)
    y = np.matmul(cols, w.reshape(w.shape[0], c).T).transpose(0, 2, 1)
    return y.reshape(n, w.shape[0], *x.shape[2:])


def _depthwise_conv(win: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A convolution with one input and one output channel per group, as a sum over kernel taps
    of windows times per-channel weights (N, C, *out): 8x faster than C one-column GEMMs."""
    rank = (win.ndim - 2) // 2
    taps = w.reshape(w.shape[0], -1).astype(win.dtype)
    y = np.zeros(win.shape[: 2 + rank], win.dtype)
    product = np.empty_like(y)  # one buffer for every later tap's product: 25% faster than temporaries
    for t, tap in enumerate(np.ndindex(*win.shape[2 + rank :])):
        weight = taps[:, t].reshape((-1,) + (1,) * rank)
        np.multiply(win[(Ellipsis, *tap)], weight, out=y if t == 0 else product)
        if t:
            y += product
    return y


_WINDOW = {"strides": AttrSpec("ints"), "pads": AttrSpec("ints"), "dilations": AttrSpec("ints")}

register(
    OpDef(
        "Conv",
        (2, 3),
        _conv_rule,
        _conv,
        "convolution of NC* data with MC/g* weights, optional bias; any group count",
        {**_WINDOW, "group": AttrSpec("int", 1)},
    )
)


# -- dense products ------------------------------------------------------------------------------


def _gemm_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    a, b, *c = values
    dtype = same_dtype(values, FLOATS)
    check(a.rank == 2 and b.rank == 2, f"Gemm of {a.shape} and {b.shape} needs 2-D inputs")
    m, k = a.shape[::-1] if attrs["transA"] else a.shape
    kb, n = b.shape[::-1] if attrs["transB"] else b.shape
    check(k == kb, f"Gemm inner dimensions {k} and {kb} differ")
    if c:
        check(broadcast([c[0].shape, (m, n)]) == (m, n), f"bias {c[0].shape} does not broadcast to {(m, n)}")
    return [TensorType((m, n), dtype)]


def _gemm(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    a, b, *c = xs
    a = a.T if attrs["transA"] else a
    b = b.T if attrs["transB"] else b
    y = np.matmul(a, b)
    if attrs["alpha"] != 1.0:
        y = y * np.float32(attr_float(attrs, "alpha"))
    if c:
        y = y + (c[0] if attrs["beta"] == 1.0 else c[0] * np.float32(attr_float(attrs, "beta")))
    return [y.astype(a.dtype)]


register(
    OpDef(
        "Gemm",
        (2, 3),
        _gemm_rule,
        _gemm,
        "alpha * A' B' + beta * C (A', B' optionally transposed)",
        {
            "alpha": AttrSpec("float", 1.0),
            "beta": AttrSpec("float", 1.0),
            "transA": AttrSpec("int", 0),
            "transB": AttrSpec("int", 0),
        },
    )
)


def _matmul_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    a, b = values
    dtype = same_dtype(values)
    check(a.rank >= 1 and b.rank >= 1, "MatMul of a scalar")
    sa = (1,) + a.shape if a.rank == 1 else a.shape
    sb = b.shape + (1,) if b.rank == 1 else b.shape
    check(sa[-1] == sb[-2], f"MatMul inner dimensions of {a.shape} and {b.shape} differ")
    out = broadcast([sa[:-2], sb[:-2]]) + (sa[-2], sb[-1])
    out = out[:-2] + out[-2:][a.rank == 1 :]
    return [TensorType(out[:-1] if b.rank == 1 else out, dtype)]


register(
    OpDef(
        "MatMul",
        (2, 2),
        _matmul_rule,
        lambda xs, a: [np.matmul(xs[0], xs[1])],
        "numpy matmul (batched, broadcasting)",
    )
)


# -- pooling -------------------------------------------------------------------------------------


def _pool_rule(values: Sequence[Value], attrs: Attrs, allowed: Sequence[str] = FLOATS) -> list[TensorType]:
    (x,) = values
    check(x.rank >= 3, f"pooling needs NC + spatial dimensions, not {x.shape}")
    check(x.dtype in allowed, f"dtype {x.dtype} is not supported")
    spatial = _spatial(x, attrs, _ints(attrs, "kernel_shape"), bool(attrs["ceil_mode"]))
    return [TensorType(x.shape[:2] + spatial, x.dtype)]


def _pool_out(x: np.ndarray, attrs: Attrs) -> tuple[int, ...]:
    return _spatial(
        Value("x", x.shape, x.dtype.name), attrs, _ints(attrs, "kernel_shape"), bool(attrs["ceil_mode"])
    )


def _max_pool(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    (x,) = xs
    kernel, out = _ints(attrs, "kernel_shape"), _pool_out(x, attrs)
    # int8 max pooling (quantized graphs) is exact: pads never win, scale unchanged
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    win = _windows(x, attrs, kernel, out, fill)
    taps = [win[(Ellipsis, *tap)] for tap in np.ndindex(*kernel)]
    result = taps[0].copy()  # tap by tap: 8x faster than a max over the window axes
    for tap in taps[1:]:
        np.maximum(result, tap, out=result)
    return [result.astype(x.dtype, copy=False)]


def _avg_pool(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    (x,) = xs
    kernel, out = _ints(attrs, "kernel_shape"), _pool_out(x, attrs)
    axes = tuple(range(-len(kernel), 0))
    total = _windows(x, attrs, kernel, out, 0.0).sum(axis=axes, dtype=np.float64)
    # The divisor counts real cells, plus the explicit pads when count_include_pad; never the
    # cells that only ceil mode adds.
    ones = np.ones((1, 1) + x.shape[2:])
    if attrs["count_include_pad"]:
        rank = len(kernel)
        pads = _ints(attrs, "pads")
        ones = np.pad(
            ones, [(0, 0), (0, 0)] + [(pads[i], pads[i + rank]) for i in range(rank)], constant_values=1.0
        )
        attrs = {**attrs, "pads": (0,) * (2 * rank)}
    count = _windows(ones, attrs, kernel, out, 0.0).sum(axis=axes)
    return [(total / count).astype(x.dtype)]


_POOL = {**_WINDOW, "kernel_shape": AttrSpec("ints"), "ceil_mode": AttrSpec("int", 0)}
register(
    OpDef(
        "MaxPool",
        (1, 1),
        partial(_pool_rule, allowed=FLOATS + ("int8",)),
        _max_pool,
        "max over windows (only the values output); float or int8",
        _POOL,
    )
)
register(
    OpDef(
        "AveragePool",
        (1, 1),
        _pool_rule,
        _avg_pool,
        "mean over windows",
        {**_POOL, "count_include_pad": AttrSpec("int", 0)},
    )
)


def _global_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    check(x.rank >= 3 and x.dtype in FLOATS, f"global pooling of {x.type_str()}")
    return [TensorType(x.shape[:2] + (1,) * (x.rank - 2), x.dtype)]


def _global(fn: str) -> OpDef:
    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
        x = xs[0]
        axes = tuple(range(2, x.ndim))
        y = (
            x.astype(np.float64).mean(axis=axes, keepdims=True)
            if fn == "mean"
            else x.max(axis=axes, keepdims=True)
        )
        return [y.astype(x.dtype)]

    name = "GlobalAveragePool" if fn == "mean" else "GlobalMaxPool"
    return OpDef(name, (1, 1), _global_rule, run, f"{fn} over all spatial dimensions, kept as size 1")


register(_global("mean"))
register(_global("max"))


# -- normalisation and softmax -------------------------------------------------------------------


def _bn_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, *params = values
    dtype = same_dtype(values, FLOATS)
    check(x.rank >= 2, f"BatchNormalization of {x.shape}")
    for p in params:
        check(p.shape == (x.shape[1],), f"parameter {p.name} has shape {p.shape}, not ({x.shape[1]},)")
    return [TensorType(x.shape, dtype)]


def _bn(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, scale, bias, mean, var = (a.astype(np.float64) for a in xs)
    shape = (-1,) + (1,) * (x.ndim - 2)
    inv = scale / np.sqrt(var + attr_float(attrs, "epsilon"))
    y = (x - mean.reshape(shape)) * inv.reshape(shape) + bias.reshape(shape)
    return [y.astype(xs[0].dtype)]


register(
    OpDef(
        "BatchNormalization",
        (5, 5),
        _bn_rule,
        _bn,
        "inference batch norm (x, scale, bias, mean, var); only the Y output",
        {"epsilon": AttrSpec("float", 1e-5)},
    )
)


def _ln_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, *params = values
    dtype = same_dtype(values, FLOATS)
    axis = attr_int(attrs, "axis")
    axis_in(axis, x.rank)
    for p in params:
        check(
            broadcast([p.shape, x.shape[axis:]]) == x.shape[axis:],
            f"parameter {p.name} {p.shape} does not broadcast to {x.shape[axis:]}",
        )
    return [TensorType(x.shape, dtype)]


def _ln(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, scale, *bias = (a.astype(np.float64) for a in xs)
    axes = tuple(range(attr_int(attrs, "axis"), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + attr_float(attrs, "epsilon")) * scale
    return [(y + bias[0] if bias else y).astype(xs[0].dtype)]


register(
    OpDef(
        "LayerNormalization",
        (2, 3),
        _ln_rule,
        _ln,
        "normalise over axes axis.., times scale plus optional bias; only the Y output",
        {"axis": AttrSpec("int", -1), "epsilon": AttrSpec("float", 1e-5)},
    )
)


def _softmax_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    (x,) = values
    check(x.dtype in FLOATS, f"dtype {x.dtype} is not supported")
    axis_in(attr_int(attrs, "axis"), x.rank)
    return [TensorType(x.shape, x.dtype)]


def _softmax(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, axis = xs[0].astype(np.float64), attr_int(attrs, "axis")
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(xs[0].dtype)]


register(
    OpDef(
        "Softmax",
        (1, 1),
        _softmax_rule,
        _softmax,
        "softmax along one axis (opset 13 meaning)",
        {"axis": AttrSpec("int", -1)},
    )
)
