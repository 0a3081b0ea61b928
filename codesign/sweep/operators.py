"""A quantized graph's steps as the sweep sees them: each node either an accelerator operator
spec (shapes and epilogue, the batch left to the core) or a host step with the reason it stays
there.

This mirrors the partitioning of `compiler.runtime.model` (`_accel_step`, `is_shallow`) without
packing constants or building host kernels: a sweep needs only each accelerator operator's
Program, on hundreds of hardware points.  The operator of each step is the one
`compiler.runtime.accel` builds (tests compare the two), except that the batch is padded to a
multiple of the core's (`batch_for`), where the runtime would leave the step on the host.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from compiler.graph.ir import Graph, Node
from compiler.ops.accel import Conv2d, Conv2dSpec, Dense, DenseSpec, Eltwise, EltwiseSpec
from compiler.runtime.accel import requant_epilogue
from compiler.runtime.model import node_macs
from compiler.target.accel import AcceleratorTarget

Spec = Conv2dSpec | DenseSpec | EltwiseSpec
_VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze")


@dataclass(frozen=True)
class Step:
    """One node: `spec` (at the model's own batch) when the accelerator can run it, else `reason`.
    `shallow_channels`: a convolution's input channels, which decide per core whether it is
    shallow (compiler.runtime.model.is_shallow) and so stays on the host."""

    name: str
    op: str
    macs: int
    spec: Spec | None = None
    reason: str | None = None
    shallow_channels: int | None = None


def graph_steps(graph: Graph) -> list[Step]:
    """Every node of the quantized `graph`, in order, as a `Step`."""
    return [_step(graph, node) for node in graph.nodes]


def _step(graph: Graph, node: Node) -> Step:
    macs = node_macs(graph, node)
    channels = graph.values[node.inputs[0]].shape[1] if node.op in ("QConv", "Conv") else None
    if node.op in _VIEWS:
        return Step(node.name, node.op, macs, reason="a layout view (no computation)")
    spec, reason = _spec(graph, node)
    return Step(node.name, node.op, macs, spec, reason, channels)


def _spec(graph: Graph, node: Node) -> tuple[Spec | None, str | None]:
    shape = graph.values[node.inputs[0]].shape
    clip = (node.int_attr("clip_lo"), node.int_attr("clip_hi")) if "clip_lo" in node.attrs else (0, 0)
    if node.op == "QConv":
        return _conv(graph, node, shape, clip)
    if node.op == "QGemm":
        if _missing_constants(graph, node):
            return None, "its weights, bias or multipliers are not constants"
        n = graph.values[node.inputs[1]].shape[0]
        ep = requant_epilogue(node.int_attr("shift"), *clip, split=node.int_attr("split"))
        return DenseSpec(shape[0], shape[1], n, ep), None
    if node.op == "QAdd":
        if len(shape) != 4:
            return None, f"the accelerator adds NCHW tensors, not rank {len(shape)}"
        n, c, h, w = shape
        return EltwiseSpec("add", n, c, h, w, clip, node.int_attr("mult_a"), node.int_attr("mult_b"),
                           node.int_attr("shift")), None
    if node.op in ("Conv", "Gemm", "MatMul"):
        return None, "kept float by quantization (a float layer runs on the host)"
    return None, f"no accelerator operator for {node.op}"


def _conv(graph: Graph, node: Node, shape: tuple[int, ...],
          clip: tuple[int, int]) -> tuple[Spec | None, str | None]:
    group, pads = node.int_attr("group"), node.ints_attr("pads")
    strides, w_shape = node.ints_attr("strides"), graph.values[node.inputs[1]].shape
    if group != 1:
        return None, f"a grouped convolution ({group} groups): the accelerator runs one group"
    if node.int_attr("pad_value") and any(pads):
        return None, "its padding is not zero (the accelerator's loads pad with zeros only)"
    if _missing_constants(graph, node):
        return None, "its weights, bias or multipliers are not constants"
    k, _, r, s = w_shape
    if r != s or len(set(strides)) != 1 or len(set(pads)) != 1:
        return None, (f"the accelerator runs square kernels with equal strides and symmetric padding "
                      f"(kernel {r}x{s}, strides {tuple(strides)}, pads {tuple(pads)})")
    residual = node.int_attr("mult_r") if len(node.inputs) == 5 else None
    ep = requant_epilogue(node.int_attr("shift"), *clip, residual, node.int_attr("split"))
    n, c, h, w = shape
    return Conv2dSpec(n, c, h, w, k, r, strides[0], pads[0], ep), None


def _missing_constants(graph: Graph, node: Node) -> bool:
    return any(graph.const_data(x) is None for x in node.inputs[1:4])


def batch_for(model_batch: int, core_batch: int) -> int:
    """The batch an operator runs at on a core: the model's, padded to a multiple of the core's."""
    return -(-model_batch // core_batch) * core_batch


def model_batch(spec: Spec) -> int:
    return spec.m if isinstance(spec, DenseSpec) else spec.batch


def padded(spec: Spec, own: int, core_batch: int) -> Spec:
    """`spec`, a layer of a model of batch `own`, as it runs when the model runs at its padded
    batch (the next multiple of the core's): a convolution's batch and a dense layer's rows (a
    sequence model's are its batch times its sequence length) scale alike.  A layer whose rows
    are not a multiple of the model's batch has its rows padded alone."""
    run = batch_for(own, core_batch)
    rows = model_batch(spec)
    if run == own:
        return spec
    return at_batch(spec, rows // own * run if rows % own == 0 else batch_for(rows, core_batch))


def at_batch(spec: Spec, batch: int) -> Spec:
    """`spec` with its batch (a dense layer's rows) set to `batch`."""
    if isinstance(spec, DenseSpec):
        return replace(spec, m=batch)
    return replace(spec, batch=batch)


def is_shallow(step: Step, target: AcceleratorTarget) -> bool:
    """compiler.runtime.model.is_shallow for a step."""
    return step.shallow_channels is not None and 2 * step.shallow_channels <= target.block_in


def make_operator(spec: Spec, target: AcceleratorTarget) -> Any:
    """The accelerator operator of `spec` on `target` (raises ScheduleError as its constructor does)."""
    if isinstance(spec, Conv2dSpec):
        return Conv2d(spec, target)
    if isinstance(spec, DenseSpec):
        return Dense(spec, target)
    return Eltwise(spec, target)


__all__ = ["Spec", "Step", "at_batch", "batch_for", "graph_steps", "is_shallow", "make_operator",
           "model_batch"]
