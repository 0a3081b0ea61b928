"""Float graph + quantization plan -> quantized graph (the quantized-graph contract of
compiler.graph.opdefs.qops), fusing as it goes.

    rewrite(graph, plan) -> quantized graph (verified)

Each activation's coding (one scale, per-channel scales, a stream's factor, zero point -128, or
float) comes from the plan's `Coding` records (compiler.quant.plan, whose module doc says how the
ops carry them); this module only builds the ops. Fusions: Conv (+ bias) and dense layers
(canonical Gemm, or MatMul by a constant [K, N] plus an Add of a constant bias) become QConv/QGemm
with their requantization (compiler.quant.rewrite_dense); a Relu or Clip that is the only user of
such a result, of a residual Add, folds into the op's clip bounds (clip(round(y / s)) is exact
for any bounds, rounding being monotone). Add of two activations of one shape becomes QAdd;
GlobalAveragePool (and ReduceMean over H, W) QGlobalAvgPool. MaxPool, Relu, Flatten and Reshape
of an int8 value stay int8 with the input's scale. Every other op runs in float: Dequantize and
Quantize nodes are inserted where a value changes representation, once per value. With
`Plan.strict` (a QDQ file) a fold or an int8 MaxPool/Relu/Flatten/Reshape needs the scales to
match, as the plan's module doc says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.graph.builder import append
from compiler.graph.ir import Graph, Node, const
from compiler.graph.opdefs.qops import INT8_MAX, INT8_MIN
from compiler.graph.verify import verify
from compiler.quant.bias import BiasTarget, correct_biases
from compiler.quant.errors import QuantizationError
from compiler.quant.plan import Coding, Plan
from compiler.quant.requant import ACT_MAX, immediate_requant
from compiler.quant.rewrite_dense import conv, gemm, matmul


def rewrite(graph: Graph, plan: Plan) -> Graph:
    """The quantized graph of float `graph` coded as `plan` says (verified); inputs and outputs keep
    their names and types."""
    return Rewrite(graph, plan).run()


@dataclass(frozen=True)
class Act:
    """An activation folded into the op before it: its node and bounds (float units)."""

    node: Node
    lo: float
    hi: float


class Rewrite:
    """One rewrite of `src` by `plan`, for this module's handlers and compiler.quant.rewrite_dense's:
    the new graph `g` as it grows, where each source value is as float (`floats`) and as int8
    with the scale it was emitted at (`ints`), and the nodes already folded into an op before
    them (`absorbed`)."""

    def __init__(self, src: Graph, plan: Plan) -> None:
        self.src, self.plan = src, plan
        self.g = Graph(src.name)
        for name in src.inputs:
            v = src.values[name]
            self.g.add_input(name, v.shape, v.dtype)
        self.floats: dict[str, str] = {name: name for name in src.inputs}
        self.ints: dict[str, tuple[str, float]] = {}
        self.rows: dict[str, str] = {}  # int8 [M, K] views of inputs of rank > 2
        self.absorbed: set[int] = set()
        self.users = src.consumer_map()
        self.bias_targets: dict[str, BiasTarget] = {}  # QConv/QGemm output -> its float mean

    def run(self) -> Graph:
        for node in self.src.nodes:
            if id(node) in self.absorbed:
                continue
            handler = HANDLERS.get(node.op)
            if handler is None or not handler(self, node):
                self.emit_float(node)
        for name in self.src.outputs:
            if self.float_of(name) != name:
                raise QuantizationError(f"graph output {name} could not keep its name")
        self.g.outputs = list(self.src.outputs)
        g = verify(self.g.remove_dead())
        if not self.plan.correction_inputs:
            return g
        return verify(correct_biases(g, self.bias_targets, self.plan.correction_inputs))

    # -- values -----------------------------------------------------------------------------------

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.g.values or name in self.src.values:
            i += 1
            name = f"{base}.{i}"
        return name

    def const(self, name: str) -> np.ndarray | None:
        return self.src.const_data(name)

    def add_const(self, base: str, data: np.ndarray) -> str:
        name = self.fresh(base)
        self.g.add_value(const(name, data))
        return name

    def is_float_act(self, name: str) -> bool:
        v = self.src.values[name]
        return not v.is_const and v.dtype == "float32"

    def channel_coding(self, name: str) -> Coding | None:
        """The value's coding when it has per-channel scales, else None."""
        coding = self.plan.codings.get(name)
        return coding if coding is not None and coding.channel_scales is not None else None

    def unsigned(self, name: str) -> bool:
        """Whether the value is coded with zero point -128."""
        coding = self.plan.codings.get(name)
        return coding is not None and coding.unsigned

    def scale_of(self, name: str) -> float | None:
        """The value's scale; for a value with per-channel scales, whose readers fold them, its
        `Coding.step` (a stream's factor, else 1.0); an int8 value's as it was emitted."""
        channel = self.channel_coding(name)
        if channel is not None:
            return channel.step
        if name in self.ints:
            return self.ints[name][1]
        return self.plan.scale(name) if self.is_float_act(name) else None

    def float_of(self, name: str) -> str:
        """The name of `name` as float in the new graph (a Dequantize the first time it is needed)."""
        if name in self.floats:
            return self.floats[name]
        value = self.src.values[name]
        if value.is_const:
            self.g.values.setdefault(name, value)
            self.floats[name] = name
            return name
        coding = self.plan.codings.get(name)
        if coding is not None and not coding.dequantizable:
            raise QuantizationError(
                f"{name} has per-channel scales or a zero point and cannot be dequantized"
            )
        qname, scale = self.ints[name]
        out = name if name in self.src.outputs and name not in self.g.values else self.fresh(f"{name}.dq")
        append(self.g, "Dequantize", [qname], [out], {"scale": scale})
        self.floats[name] = out
        return out

    def int8_of(self, name: str) -> str:
        """The name of `name` as int8 (a Quantize the first time; the caller checked its scale)."""
        if name in self.ints:
            return self.ints[name][0]
        coding = self.plan.codings[name]
        out = self.fresh(f"{name}.q")
        attrs = {"scale": coding.scale, "zero_point": coding.zero_point}  # a float producer's value
        append(self.g, "Quantize", [self.float_of(name)], [out], attrs)
        self.ints[name] = (out, coding.scale)
        return out

    def emit_int8(
        self, name: str, op: str, inputs: Sequence[str], attrs: Mapping[str, object], scale: float
    ) -> str:
        """Append an op whose int8 output stands for float value `name` at `scale`."""
        out = self.fresh(f"{name}.q") if name in self.src.outputs else name
        append(self.g, op, inputs, [out], attrs)
        self.ints[name] = (out, scale)
        return out

    def emit_float(self, node: Node) -> None:
        append(self.g, node.op, [self.float_of(i) for i in node.inputs], node.outputs, node.attrs)
        self.floats.update((o, o) for o in node.outputs)

    # -- patterns ---------------------------------------------------------------------------------

    def activation_after(self, name: str) -> Act | None:
        """The Relu or Clip that is the only user of `name`, when it can fold into `name`'s op."""
        users = self.users.get(name, [])
        if name in self.src.outputs or len(users) != 1 or users[0].op not in ("Relu", "Clip"):
            return None
        act = users[0]
        if act.op == "Relu":
            lo, hi = 0.0, math.inf
        else:
            lo, hi = act.float_attr("min"), act.float_attr("max")
        if lo > hi:
            return None
        if self.plan.strict:
            pre, post = self.plan.scale(name), self.plan.scale(act.outputs[0])
            if pre is not None and pre != post:
                return None
        return Act(act, lo, hi)

    def clip_bounds(self, act: Act | None, scale: float, offset: int = 0) -> tuple[int, int]:
        """The int8 codes of the activation's bounds at `scale`, codes being round(x / scale) - `offset`."""
        if act is None:
            return INT8_MIN, INT8_MAX
        return _to_int8(act.lo, scale, offset), _to_int8(act.hi, scale, offset)

    def single_user(self, name: str, op: str) -> Node | None:
        users = self.users.get(name, [])
        if name in self.src.outputs or len(users) != 1 or users[0].op != op:
            return None
        return users[0]


def _to_int8(bound: float, scale: float, offset: int = 0) -> int:
    """A float bound in int8 steps (less `offset`), rounded as Quantize rounds (so the clip is exact)."""
    if math.isinf(bound):
        return INT8_MAX if bound > 0 else INT8_MIN
    q = float(np.rint(np.float32(bound) / np.float32(scale))) - offset
    return int(min(max(q, INT8_MIN), INT8_MAX))


# -- element-wise and pooling ----------------------------------------------------------------------


def _add(lw: Rewrite, node: Node) -> bool:
    a, b = node.inputs
    if not (lw.is_float_act(a) and lw.is_float_act(b)) or lw.src.values[a].shape != lw.src.values[b].shape:
        return False
    act = lw.activation_after(node.outputs[0])
    out = act.node.outputs[0] if act else node.outputs[0]
    s_a, s_b, s_out = lw.scale_of(a), lw.scale_of(b), lw.scale_of(out)
    if s_a is None or s_b is None or s_out is None:
        return False
    _check_stream_profiles(lw, (a, b, out), f"node {out} (QAdd)")
    (mult_a, mult_b), shift = immediate_requant(np.array([s_a, s_b]) / s_out, ACT_MAX, f"node {out} (QAdd)")
    lo, hi = lw.clip_bounds(act, s_out)
    attrs = {
        "mult_a": mult_a,
        "mult_b": mult_b,
        "shift": shift,
        "clip_lo": lo,
        "clip_hi": hi,
        "out_scale": s_out,
    }
    lw.emit_int8(out, "QAdd", [lw.int8_of(a), lw.int8_of(b)], attrs, s_out)
    if act:
        lw.absorbed.add(id(act.node))
    return True


def _check_stream_profiles(lw: Rewrite, names: Sequence[str], where: str) -> None:
    """An add's operands and result have per-channel scales all or none, and then one profile
    (scales over stream factor, `Coding.folded`), so that its multipliers are scalars."""
    scaled = [lw.channel_coding(name) for name in names]
    if not any(scaled):
        return
    if not all(c is not None and c.stream for c in scaled):
        listed = ", ".join(names)
        raise QuantizationError(f"{where}: {listed} are not all values of one stream with channel scales")
    first, *rest = (c.folded for c in scaled if c is not None)
    if any(not np.allclose(first, other, rtol=1e-6, atol=0.0) for other in rest):
        raise QuantizationError(f"{where}: {', '.join(names)} have channel scales of different profiles")


def _global_pool(lw: Rewrite, node: Node) -> bool:
    x, out = node.inputs[0], node.outputs[0]
    shape = lw.src.values[x].shape
    if node.op == "ReduceMean" and (node.ints_attr("axes") != (2, 3)):
        return False
    s_in, s_out = lw.scale_of(x), lw.scale_of(out)
    if len(shape) != 4 or s_in is None or s_out is None:
        return False
    cells = shape[2] * shape[3]
    (mult,), shift = immediate_requant(np.array([s_in / (cells * s_out)]), ACT_MAX * cells, f"node {out}")
    attrs = {"mult": mult, "shift": shift, "out_scale": s_out}
    if node.op == "GlobalAveragePool" or node.int_attr("keepdims"):
        lw.emit_int8(out, "QGlobalAvgPool", [lw.int8_of(x)], attrs, s_out)
        return True
    pooled = lw.fresh(f"{out}.pool")
    append(lw.g, "QGlobalAvgPool", [lw.int8_of(x)], [pooled], attrs)
    lw.emit_int8(out, "Reshape", [pooled], {"shape": lw.src.values[out].shape}, s_out)
    return True


def _keeps_scale(lw: Rewrite, node: Node) -> bool:
    """MaxPool, Relu, Flatten, Reshape on an int8 value: int8 out, the input's scale."""
    x, out = node.inputs[0], node.outputs[0]
    if x not in lw.ints:
        return False
    qname, scale = lw.ints[x]
    declared = lw.plan.scale(out)
    if lw.plan.strict and declared is not None and declared != scale:
        return False
    lw.emit_int8(out, node.op, [qname], node.attrs, scale)
    return True


HANDLERS: dict[str, Callable[[Rewrite, Node], bool]] = {
    "Conv": conv,
    "Gemm": gemm,
    "MatMul": matmul,
    "Add": _add,
    "GlobalAveragePool": _global_pool,
    "ReduceMean": _global_pool,
    "MaxPool": _keeps_scale,
    "Relu": _keeps_scale,
    "Flatten": _keeps_scale,
    "Reshape": _keeps_scale,
}
