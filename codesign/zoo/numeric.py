"""numpy kernels with onnxruntime's semantics, used to evaluate zoo graphs while they are written.

All take and return float32 arrays with the batch on axis 0 and images in NCHW. They favour
clarity over speed, but are fast enough to push a few 224x224 images through ResNet-18.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

FloatArray = np.ndarray


def conv2d(x: FloatArray, weight: FloatArray, bias: FloatArray | None, *,
           stride: int, pad: int, group: int) -> FloatArray:
    """ONNX Conv with square kernels, symmetric padding, dilation 1; `group` is 1 or C (depthwise)."""
    channels = x.shape[1]
    if group == 1:
        out = _dense_conv(x, weight, stride, pad)
    elif group == channels == weight.shape[0] and weight.shape[1] == 1:
        out = _depthwise_conv(x, weight, stride, pad)
    else:
        raise ValueError(f"conv2d supports group 1 or depthwise, not group {group} on {channels} channels")
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def _pad_hw(x: FloatArray, pad: int, value: float = 0.0) -> FloatArray:
    if pad == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=value)


def _windows(x: FloatArray, kernel: int, stride: int) -> FloatArray:
    """View [N, C, Ho, Wo, kernel, kernel] of the kernel-sized windows at each output position."""
    return sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]


def _dense_conv(x: FloatArray, weight: FloatArray, stride: int, pad: int) -> FloatArray:
    out_channels, _, kernel, _ = weight.shape
    win = _windows(_pad_hw(x, pad), kernel, stride)
    n, _, out_h, out_w = win.shape[:4]
    # im2col with rows (n, y, x) and columns (c, ky, kx): the order of weight.reshape(K, -1).
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * out_h * out_w, -1)
    out = cols @ weight.reshape(out_channels, -1).T
    return np.ascontiguousarray(out.reshape(n, out_h, out_w, out_channels).transpose(0, 3, 1, 2))


def _depthwise_conv(x: FloatArray, weight: FloatArray, stride: int, pad: int) -> FloatArray:
    kernel = weight.shape[2]
    xp = _pad_hw(x, pad)
    out_h = (xp.shape[2] - kernel) // stride + 1
    out_w = (xp.shape[3] - kernel) // stride + 1
    out = np.zeros((x.shape[0], x.shape[1], out_h, out_w), np.float32)
    for ky in range(kernel):
        for kx in range(kernel):
            tap = xp[:, :, ky : ky + stride * out_h : stride, kx : kx + stride * out_w : stride]
            out += tap * weight[None, :, 0, ky, kx, None, None]
    return out


def max_pool(x: FloatArray, *, kernel: int, stride: int, pad: int) -> FloatArray:
    """ONNX MaxPool; padding never wins the maximum."""
    win = _windows(_pad_hw(x, pad, -np.inf), kernel, stride)
    return np.ascontiguousarray(win.max(axis=(4, 5)))


def batch_norm(x: FloatArray, gamma: FloatArray, beta: FloatArray, mean: FloatArray,
               var: FloatArray, eps: float) -> FloatArray:
    """ONNX BatchNormalization in inference mode, channels on axis 1."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = gamma / np.sqrt(var + eps)
    return (x - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)


def layer_norm(x: FloatArray, gamma: FloatArray, beta: FloatArray, eps: float) -> FloatArray:
    """ONNX LayerNormalization over the last axis."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x: FloatArray, axis: int = -1) -> FloatArray:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def erf(x: FloatArray) -> FloatArray:
    """Error function to about 1e-7 absolute (Abramowitz and Stegun 7.1.26), enough for float32."""
    sign = np.sign(x)
    a = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


def gelu(x: FloatArray) -> FloatArray:
    """Exact (erf) GELU, as ONNX Gelu with approximate='none'."""
    return 0.5 * x * (1.0 + erf(x / np.float32(np.sqrt(2.0))))


def round_significant(x: FloatArray, bits: int = 10) -> FloatArray:
    """Round to `bits` significant bits.

    Statistics measured by a forward pass depend on BLAS summation order (thread count, CPU
    kernel) in their last bits; rounding them makes the exported bytes the same on any machine
    except at rare rounding boundaries.
    """
    mantissa, exponent = np.frexp(np.asarray(x, np.float64))
    return np.ldexp(np.round(mantissa * 2.0**bits) / 2.0**bits, exponent).astype(np.float32)
