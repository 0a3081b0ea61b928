"""Residual additions fused into the convolution that feeds them: QConv -> QAdd becomes one
QConv with a `residual` input (the quantized-graph contract, compiler.graph.opdefs.qops).

Unfused, the convolution requantizes its accumulator to int8 (y = rs((acc + b) * m1, s1)) and the
add requantizes again, out = clip(rs(y * m_y + r * m_r, s_a)).  Fused, one requantization takes
both: out = clip(rs((acc + b) * m + r * m_r', s)), with m / 2**s = m1 * m_y / 2**(s1 + s_a) and
m_r' / 2**s = m_r / 2**s_a.  That drops one rounding and the int8 saturation of y (the result
is closer to the float model, not bit-equal to the unfused graph), and on the accelerator the
add costs two ALU instructions inside the convolution's epilogue instead of an operator of its
own that loads both tensors and stores the sum (ResNet-18 on `vta`: 0.64 M cycles of adds).

Only a convolution whose output nothing else reads, and that saturates only at the int8 range
(no ReLU before the add), is fused.  The shift is chosen as `requant.py` chooses it: the largest
for which no value can wrap, where the accumulator bound is the one the convolution's own
multiplier was chosen for (|acc + b| * |m1| + rounding <= 2**31 - 1) and |r| <= 128.

A QDQ file's graph is not fused: onnxruntime rounds between the two, and agreement with it is
the point of importing one.
"""

from __future__ import annotations

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.graph.opdefs.qops import INT8_MAX, INT8_MIN, INT32_MAX
from compiler.graph.verify import verify
from compiler.quant.requant import ACT_MAX, choose_shift


def fuse_residual_adds(graph: Graph) -> Graph:
    """A new graph with every fusable QConv -> QAdd pair as one QConv (see the module doc)."""
    g = graph.copy()
    for add in [n for n in g.nodes if n.op == "QAdd"]:
        conv, mult_conv, residual, mult_res = _pattern(g, add)
        if conv is None:
            continue
        fused = _fused(g, conv, add, mult_conv, residual, mult_res)
        g.nodes.remove(conv)
        g.replace_node(add, [fused])
    g.remove_dead()
    verify(g)
    return g


def _pattern(g: Graph, add: Node) -> tuple[Node | None, int, str, int]:
    """(the QConv to fuse into, its multiplier in the add, the other input, that one's multiplier);
    the QConv is None when neither input qualifies.  Of two candidates, the later one: the other
    input then exists before the fused node, which takes the add's place."""
    a, b = add.inputs
    if a == b:
        return None, 0, "", 0
    ma, mb = add.int_attr("mult_a"), add.int_attr("mult_b")
    order = {n.name: i for i, n in enumerate(g.nodes)}
    options = [(conv, m, other, m_other) for name, m, other, m_other in ((a, ma, b, mb), (b, mb, a, ma))
               if (conv := _fusable(g, name, add)) is not None]
    if not options:
        return None, 0, "", 0
    return max(options, key=lambda o: order[o[0].name])


def _fusable(g: Graph, name: str, add: Node) -> Node | None:
    conv = g.producer(name)
    if conv is None or conv.op != "QConv" or len(conv.inputs) != 4 or name in g.outputs:
        return None
    if (conv.int_attr("clip_lo"), conv.int_attr("clip_hi")) != (INT8_MIN, INT8_MAX):
        return None
    return conv if g.consumers(name) == [add] else None


def _fused(g: Graph, conv: Node, add: Node, mult_conv: int, residual: str, mult_res: int) -> Node:
    m1 = g.const_data(conv.inputs[3])
    assert m1 is not None, f"{conv.name}: multiplier is not a constant"
    m1 = m1.astype(np.float64)
    s1, s_a = conv.int_attr("shift"), add.int_attr("shift")
    reals = np.append(m1 * mult_conv / 2.0 ** (s1 + s_a), mult_res / 2.0**s_a)
    rounding1 = (1 << (s1 - 1)) if s1 else 0
    bounds = np.floor((INT32_MAX - rounding1) / np.maximum(np.abs(m1), 1.0))

    def fits(mult: np.ndarray, shift: int) -> bool:
        if np.abs(mult).max(initial=0) > INT32_MAX:
            return False
        rounding = (1 << (shift - 1)) if shift else 0
        worst = bounds * np.abs(mult[:-1]) + ACT_MAX * abs(mult[-1]) + rounding
        return bool((worst <= INT32_MAX).all())

    mult, shift = choose_shift(reals, fits, f"{conv.name} + {add.name}")
    name = g.add_const(f"{conv.name}.mult_fused", mult[:-1].astype(np.int32))
    attrs = {**conv.attrs, "shift": shift, "mult_r": int(mult[-1]), "clip_lo": add.int_attr("clip_lo"),
             "clip_hi": add.int_attr("clip_hi"), "out_scale": add.float_attr("out_scale")}
    inputs = (*conv.inputs[:3], name, residual)
    return Node("QConv", inputs, add.outputs, attrs, f"{conv.name}+{add.name}")
