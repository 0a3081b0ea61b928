"""Host kernels split along their outer dimension, for `CpuModel`'s threads.

`split_spec(name, params, parts)` gives the host ops that compute disjoint slices of one
operator's output, and for each the slice of every argument (inputs then the output) it takes,
as ranges over the flattened arrays: with a batch of one, a range of output channels of a
convolution (its weights, per-channel vectors, residual and output rows are contiguous ranges),
of a pool's channels, of a single-row classifier's outputs, or of an element-wise op's elements.
Every slice is a contiguous view, so no slice copies and no two outputs overlap; an operator
that does not split this way (or `parts` 1) is one host op over whole arrays (slices `()`).
"""

from __future__ import annotations

from typing import Any

Spec = tuple[str, dict[str, Any]]
Cut = tuple[slice, ...]  # one slice per argument over its flattened array; () : every one whole
LANES = 8  # channel ranges are multiples of this (a vector of float32 on AVX2), but the last


def split_spec(name: str, params: dict[str, Any], parts: int) -> tuple[tuple[Spec, ...], tuple[Cut, ...]]:
    """Host ops computing `parts` slices of op `name` (fewer where it has fewer rows), with the
    argument slices of each; one op over whole arrays where it does not split."""
    split = _SPLITTERS.get(name)
    pieces = None if split is None or parts < 2 else split(params, parts)
    if not pieces or len(pieces) < 2:
        return ((name, params),), ((),)
    return tuple((name, p) for p, _ in pieces), tuple(c for _, c in pieces)


def ranges(total: int, parts: int, multiple: int = 1) -> list[tuple[int, int]]:
    """`total` cut into at most `parts` consecutive ranges, each a multiple of `multiple` but
    the last, as even as that allows."""
    step = -(-total // parts)
    step = -(-step // multiple) * multiple
    return [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _conv(params: dict[str, Any], parts: int) -> list[tuple[dict[str, Any], Cut]] | None:
    """Output channels: the weight's, the vectors', the residual's and the output's rows; the
    data whole (or, depthwise, its matching channels)."""
    n, c, h, w = params["shape"]
    k, cg, r, s = params["weight_shape"]
    group = params.get("group", 1)
    depthwise = group == c == k and cg == 1
    if n != 1 or not (group == 1 or depthwise):
        return None
    pieces = []
    probe = _conv_out_hw(params)
    for lo, hi in ranges(k, parts, LANES):
        kt = hi - lo
        p = {**params, "weight_shape": (kt, cg, r, s)}
        data = slice(None)
        if depthwise:
            p.update(shape=(n, kt, h, w), group=kt)
            data = slice(lo * h * w, hi * h * w)
        plane = probe[0] * probe[1]
        vectors = _vector_count(params)
        cut = (data, slice(lo * cg * r * s, hi * cg * r * s), *([slice(lo, hi)] * vectors))
        if params.get("residual"):
            cut = (*cut, slice(lo * plane, hi * plane))
        pieces.append((p, (*cut, slice(lo * plane, hi * plane))))
    return pieces


def _vector_count(params: dict[str, Any]) -> int:
    """The per-channel vector arguments of a conv2d (bias) or qconv2d (bias, mult[, clamps])."""
    if "precise" in params:  # qconv2d
        return 4 if params["precise"] else 2
    return 1 if params.get("bias") else 0


def _conv_out_hw(params: dict[str, Any]) -> tuple[int, int]:
    from compiler.ops.cpu import host_op

    op = host_op("qconv2d" if "precise" in params else "conv2d", **params)
    return op.out_hw  # type: ignore[attr-defined, no-any-return]


def _pool(params: dict[str, Any], parts: int) -> list[tuple[dict[str, Any], Cut]] | None:
    """Channels: input and output planes."""
    from compiler.ops.cpu import host_op

    n, c, h, w = params["shape"]
    if n != 1:
        return None
    name = "max_pool2d" if "kernel" in params else "global_avg_pool2d"
    out = host_op(name, **params).tensors()["out"].shape
    plane = _size(tuple(out[2:]))
    pieces: list[tuple[dict[str, Any], Cut]] = []
    for lo, hi in ranges(c, parts):
        p = {**params, "shape": (n, hi - lo, h, w)}
        pieces.append((p, (slice(lo * h * w, hi * h * w), slice(lo * plane, hi * plane))))
    return pieces


def _flat(key: str) -> Any:
    """Element-wise over one shape (`key` names it): equal ranges of the flattened operands."""

    def split(params: dict[str, Any], parts: int) -> list[tuple[dict[str, Any], Cut]] | None:
        shapes = [params[k] for k in ("a_shape", "b_shape") if k in params] or [params[key]]
        if any(tuple(s) != tuple(shapes[0]) for s in shapes):
            return None  # broadcasting
        total = _size(tuple(shapes[0]))
        if total < 4096 * parts:
            return None  # too small to be worth a thread
        pieces = []
        for lo, hi in ranges(total, parts, 64):
            p = {**params}
            for k in ("a_shape", "b_shape", "shape"):
                if k in p:
                    p[k] = (hi - lo,)
            pieces.append((p, (slice(lo, hi),) * (len(shapes) + 1)))
        return pieces

    return split


def _gemm(params: dict[str, Any], parts: int) -> list[tuple[dict[str, Any], Cut]] | None:
    """A single-row classifier: output columns, the weight's rows and the bias."""
    (m, k), n = params["shape"], params["weight_shape"][0]
    if m != 1:
        return None
    pieces = []
    for lo, hi in ranges(n, parts, LANES):
        p = {**params, "weight_shape": (hi - lo, k)}
        cut: Cut = (slice(None), slice(lo * k, hi * k),
                    *([slice(lo, hi)] if params.get("bias", True) else []), slice(lo, hi))
        pieces.append((p, cut))
    return pieces


_SPLITTERS = {
    "conv2d": _conv,
    "qconv2d": _conv,
    "max_pool2d": _pool,
    "global_avg_pool2d": _pool,
    "relu": _flat("shape"),
    "clip": _flat("shape"),
    "add": _flat("a_shape"),
    "mul": _flat("a_shape"),
    "gemm": _gemm,
}
