"""The CPU target's fusion rules: which graph nodes after a convolution or a matrix product
its kernel's epilogue computes (compiler.runtime.cpu_model places the group as one step).

Each rule takes the producing node, its kernel arguments and parameters, and the names of the
nodes already absorbed by another group, and returns the group's nodes (the producer first), the
kernel's arguments (the absorbed operands appended in the epilogue's order) and parameters.
A node joins only when it is the sole reader of the value before it (so no fused value is
needed elsewhere) and float32; an epilogue changes no bit of what the separate kernels compute
(each step is rounded as its operator rounds it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.graph.ir import Graph, Node
from compiler.graph.passes.common import sole_user

ACTIVATIONS = ("Relu", "Clip")
Group = tuple[list[Node], list[str], dict[str, Any]]


def _fused_conv(graph: Graph, conv: Node, args: list[str], params: dict[str, Any], absorbed: set[str]
                ) -> tuple[list[Node], list[str], dict[str, Any]]:
    """A float convolution with the residual Add and the Relu/Clip that read only its result
    (an Add of two convolutions goes to the first of them)."""
    nodes, out = [conv], conv.outputs[0]
    user = sole_user(graph, out)
    if user is not None and user.name in absorbed:
        return nodes, args, params
    user, out = _take_residual(graph, user, out, nodes, args, params)
    if user is not None and user.op in ACTIVATIONS and graph.values[out].dtype == "float32":
        nodes.append(user)
        lo, hi = (0.0, np.inf) if user.op == "Relu" else (user.float_attr("min"), user.float_attr("max"))
        params.update(act_lo=lo, act_hi=hi)
    return nodes, args, params


def _take_residual(graph: Graph, user: Node | None, out: str, nodes: list[Node], args: list[str],
                   params: dict[str, Any]) -> tuple[Node | None, str]:
    """`user` absorbed into the group when it adds a residual tensor to `out`: the next user
    and value then; else `user` and `out` unchanged."""
    other = _residual(graph, user, out) if user is not None else None
    if user is None or other is None:
        return user, out
    nodes.append(user)
    args.append(other)
    params["residual"] = True
    out = user.outputs[0]
    return sole_user(graph, out), out


def _other(add: Node, out: str) -> str | None:
    """The operand `add` adds to `out`, if `add` is an Add of `out` and another value."""
    if add.op != "Add" or len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
        return None
    return add.inputs[1] if add.inputs[0] == out else add.inputs[0]


def _residual(graph: Graph, add: Node, out: str) -> str | None:
    """The other operand of `add` if it adds a non-constant tensor of `out`'s shape to `out`."""
    other = _other(add, out)
    if other is None:
        return None
    v, mine = graph.values[other], graph.values[out]
    if v.data is not None or v.shape != mine.shape or v.dtype != "float32":
        return None
    return other


def _fused_matmul(graph: Graph, matmul: Node, args: list[str], params: dict[str, Any],
                  absorbed: set[str]) -> Group:
    """A float MatMul that takes the register tile, with the Add of a constant bias over its
    last axis, then a residual Add, then a Gelu (erf form), each reading only the value before."""
    from compiler.ops.cpu import host_op

    nodes, out = [matmul], matmul.outputs[0]
    if host_op("matmul", **params).tile is None:  # type: ignore[attr-defined]
        return nodes, args, params
    user = sole_user(graph, out)
    if user is not None and user.name not in absorbed and _bias(graph, user, out) is not None:
        nodes.append(user)
        args.append(_bias(graph, user, out))  # type: ignore[arg-type]
        params["bias"] = True
        out = user.outputs[0]
        user = sole_user(graph, out)
    user, out = _take_residual(graph, user, out, nodes, args, params)
    if user is not None and user.op == "Gelu" and user.attrs.get("approximate", "none") == "none":
        nodes.append(user)
        params["gelu"] = True
    return nodes, args, params


def _bias(graph: Graph, add: Node, out: str) -> str | None:
    """The constant float32 vector `add` adds to `out` along its last axis, if it is one."""
    other = _other(add, out)
    if other is None:
        return None
    v, mine = graph.values[other], graph.values[out]
    if v.data is None or v.dtype != "float32" or v.shape != mine.shape[-1:]:
        return None
    return other


FUSIBLE: dict[str, Callable[[Graph, Node, list[str], dict[str, Any], set[str]], Group]] = {
    "conv2d": _fused_conv,
    "matmul": _fused_matmul,
}
