"""The int8 convolution's register tile over channel pairs: the accumulation the "channels"
schedule of compiler.ops.cpu.convbase takes for int8 data (`ConvOp.pairs`), and its packing.

acc[b, y, x, k] = sum over pairs p and the window (ry, rx) of
data[b, 2p, ...] * w[k, 2p, ry, rx] + data[b, 2p+1, ...] * w[k, 2p+1, ry, rx],
read from the padded input widened to int16 and interleaved by pairs once per call (`paired`:
(N, ceil(C/2), H', W', 2)) and from the weights as int16 pairs per lane ((K/L, ceil(C/2), R, S,
L, 2), packed once by the caller: `pack_pairs`).  One reduction step of the tile is then
`int32(a[p, 0]) * int32(w[.., k, 0]) + int32(a[p, 1]) * int32(w[.., k, 1])` across the k lanes,
which compiler.codegen.llvm.vector emits as vpmaddwd (16 int16 products summed pairwise into 8
int32 per instruction on AVX2), where the plain int8 tile widens each operand to int32 and
multiplies with vpmulld (8 products per instruction, at a quarter of the rate).  The same sum
as the plain tile's, exactly: every product of two int8 values is exact in int32, a pair's sum
too, and int32 adds wrap in any order.  (vpmaddubsw, u8 x s8 summed into int16, would be
twice as wide but saturates; VNNI's vpdpbusd does not, on hosts that have it.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, reduce_axis, sum

if TYPE_CHECKING:
    from compiler.ops.cpu.convbase import ConvOp


def pair_accumulation(op: ConvOp, data: Tensor, weight: Tensor) -> Tensor:
    """`op`'s accumulator (N, OH, OW, K) over channel pairs, from `data` (N, C, H, W) and
    `weight`, packed (`op.packed`: pack_pairs's layout) or (K, C, R, S) int8, packed here."""
    k_out, c, r, s = op.weight_shape
    sh, sw = op.stride_hw
    src = paired(op, data)
    lanes, half = op.weight_block, -(-c // 2)
    zero = E.const(0, "int16")

    def unpacked(ko: E.Expr, p: E.Expr, ry: E.Expr, rx: E.Expr, ki: E.Expr, j: E.Expr) -> E.Expr:
        value = E.cast("int16", weight[ko * lanes + ki, p * 2 + j, ry, rx])
        return value if c % 2 == 0 else E.if_then_else(E.lt(p * 2 + j, c), value, zero)

    wt = weight if op.packed else compute(op.packed_weight_shape, unpacked, "wt")
    ip, ry, rx = reduce_axis(half, "ic"), reduce_axis(r, "ry"), reduce_axis(s, "rx")
    n, _, oh, ow = op.out_shape

    def dot(b: E.Expr, y: E.Expr, x: E.Expr, k: E.Expr) -> E.Expr:
        def term(j: int) -> E.Expr:
            return (E.cast("int32", src[b, ip, y * sh + ry.var, x * sw + rx.var, j])
                    * E.cast("int32", wt[k // lanes, ip, ry, rx, k % lanes, j]))
        return sum(term(0) + term(1), [ip, ry, rx])

    return compute((n, oh, ow, k_out), dot, "acc")


def paired(op: ConvOp, data: Tensor) -> Tensor:
    """`op`'s padded input as int16, channels interleaved by pairs: (N, ceil(C/2), H', W', 2)
    (an odd C's last pair takes the pad value for its missing channel, which meets a zero
    weight)."""
    n, c, h, w = op.shape
    top, left, bottom, right = op.pad_tlbr
    fill = E.const(op.pad_fill, "int16")

    def value(b: E.Expr, p: E.Expr, y: E.Expr, x: E.Expr, j: E.Expr) -> E.Expr:
        ch = p * 2 + j
        conds = [E.ge(y, top), E.lt(y, h + top), E.ge(x, left), E.lt(x, w + left)]
        conds = (conds if any(op.pad_tlbr) else []) + ([E.lt(ch, c)] if c % 2 else [])
        inside = E.cast("int16", data[b, ch, y - top, x - left])
        return E.if_then_else(E.all_of(*conds), inside, fill) if conds else inside

    return compute((n, -(-c // 2), h + top + bottom, w + left + right, 2), value, "data_pair")


def pack_pairs(weight: np.ndarray, lanes: int) -> np.ndarray:
    """(K, C, R, S) int8 -> (K/lanes, ceil(C/2), R, S, lanes, 2) int16, contiguous: a lane's
    two channels of a pair adjacent, an odd C padded with a zero channel."""
    k, c, r, s = weight.shape
    half = -(-c // 2)
    wide = np.zeros((k, 2 * half, r, s), np.int16)
    wide[:, :c] = weight
    blocks = wide.reshape(k // lanes, lanes, half, 2, r, s)
    return np.ascontiguousarray(blocks.transpose(0, 2, 4, 5, 1, 3))


def unpack_pairs(packed: np.ndarray, channels: int) -> np.ndarray:
    """pack_pairs's inverse: (K, channels, R, S), still int16."""
    blocks, half, r, s, lanes, _ = packed.shape
    full = packed.transpose(0, 4, 1, 5, 2, 3).reshape(blocks * lanes, 2 * half, r, s)
    return full[:, :channels]
