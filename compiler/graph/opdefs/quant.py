"""Quantize/dequantize ops of QDQ models, kept as ops (never folded) for the quantization work.

Canonical form: the zero point is always an input (the frontend adds a zero constant where the
model omits it); scale and zero point are per tensor (shape () or (1,)) or per channel along
`axis` (shape (C,)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.graph.ir import Value, attr_int
from compiler.graph.opdefs.base import FLOATS, Attrs, AttrSpec, OpDef, TensorType, axis_in, check, register

QUANT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _check_params(x: Value, scale: Value, zero: Value, axis: int) -> None:
    check(scale.dtype in FLOATS, f"scale has dtype {scale.dtype}")
    check(zero.shape == scale.shape, f"zero point {zero.shape} and scale {scale.shape} shapes differ")
    if scale.size == 1 and scale.rank <= 1:
        return  # per tensor (a per-channel parameter of one channel is the same thing)
    axis_in(axis, x.rank)
    check(
        scale.shape == (x.shape[axis],), f"scale {scale.shape} is not per channel of axis {axis} of {x.shape}"
    )


def _along(param: np.ndarray, x: np.ndarray, axis: int) -> np.ndarray:
    """A per-channel parameter shaped to broadcast against x on `axis`."""
    if param.size == 1:
        return param.reshape(())
    shape = [1] * x.ndim
    shape[axis] = -1
    return param.reshape(shape)


def _quantize_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, scale, zero = values
    check(x.dtype in FLOATS, f"QuantizeLinear of {x.dtype}")
    check(zero.dtype in QUANT_DTYPES, f"zero point dtype {zero.dtype}")
    _check_params(x, scale, zero, attr_int(attrs, "axis"))
    return [TensorType(x.shape, zero.dtype)]


def _quantize(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, scale, zero = xs
    axis = attr_int(attrs, "axis")
    # float32 division then round-half-even, as onnxruntime does
    q = np.rint(x / _along(scale, x, axis).astype(x.dtype)).astype(np.float64)
    info = np.iinfo(zero.dtype)
    return [np.clip(q + _along(zero, x, axis), info.min, info.max).astype(zero.dtype)]


def _dequantize_rule(values: Sequence[Value], attrs: Attrs) -> list[TensorType]:
    x, scale, zero = values
    check(
        x.dtype in QUANT_DTYPES and zero.dtype == x.dtype,
        f"DequantizeLinear of {x.dtype} (zero {zero.dtype})",
    )
    _check_params(x, scale, zero, attr_int(attrs, "axis"))
    return [TensorType(x.shape, scale.dtype)]


def _dequantize(xs: Sequence[np.ndarray], attrs: Attrs) -> list[np.ndarray]:
    x, scale, zero = xs
    axis = attr_int(attrs, "axis")
    diff = x.astype(np.int64) - _along(zero, x, axis).astype(np.int64)
    return [diff.astype(scale.dtype) * _along(scale, x, axis)]


_AXIS = {"axis": AttrSpec("int", 1)}
register(
    OpDef(
        "QuantizeLinear",
        (3, 3),
        _quantize_rule,
        _quantize,
        "saturate(round(x / scale) + zero_point), per tensor or per channel",
        _AXIS,
        foldable=False,
    )
)
register(
    OpDef(
        "DequantizeLinear",
        (3, 3),
        _dequantize_rule,
        _dequantize,
        "(x - zero_point) * scale, per tensor or per channel",
        _AXIS,
        foldable=False,
    )
)
