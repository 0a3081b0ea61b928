"""`GpuModel`: a whole float graph on the GPU target, activations kept on the device.

Each node maps to a GPU operator (compiler.ops.gpu) through the CPU target's own node mapping
(compiler.runtime.cpu.host_spec) and fusion (compiler.runtime.cpu_fuse: a convolution absorbs
its residual Add and Relu/Clip, a MatMul its bias Add, residual Add and Gelu), so both targets
see the same graph-level decisions.  Weights are uploaded once when the model is built; a run
uploads the inputs, launches one kernel per step with the activations staying on the executor,
and downloads the outputs.  A node no GPU kernel covers (or whose schedule space has no point
on the target) runs in numpy on the host, its operands copied across, and is reported as
`host-numpy` (`fallbacks()`), so a report never hides where an op ran.

The graph is simplified first, as the CPU target's fp32 graph is (compiler.graph.passes.simplify:
batch norms folded into convolutions).  The executor is a real GPU (`CudaExecutor`) or, for
tests without one, `SimtExecutor`, which runs the same kernels' loop IR with numpy
(compiler.runtime.gpu_simt).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.errors import ScheduleError
from compiler.graph.interp import evaluate_node
from compiler.graph.ir import Graph, Node
from compiler.graph.passes import simplify
from compiler.ops.gpu import (
    Conv2d,
    Eltwise,
    GlobalAvgPool2d,
    GpuOp,
    LayerNorm,
    MatMul,
    MaxPool2d,
    Softmax,
    Transpose,
)
from compiler.runtime.cpu import host_spec
from compiler.runtime.cpu_fuse import FUSIBLE
from compiler.runtime.gpu import DeviceTensor, Executor, GpuKernel, compile_kernel
from compiler.runtime.model import ModelResult, StepRecord, node_macs
from compiler.target.gpu import GpuTarget

VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze")
Value = DeviceTensor | np.ndarray


@dataclass
class GpuStep:
    """One kernel launch ("gpu"), a view, or a node run in numpy ("host-numpy"): `nodes` (a
    fused group's first names it), `args` (the values its kernel reads, in argument order)."""

    nodes: tuple[Node, ...]
    where: str
    args: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: GpuKernel | None = None
    extra: tuple[np.ndarray, ...] = ()  # constant operands the graph lacks (a zero LayerNorm bias)
    macs: int = 0

    @property
    def name(self) -> str:
        return self.nodes[0].name

    @property
    def op(self) -> str:
        return self.nodes[0].op


def gpu_op_for(graph: Graph, node: Node, absorbed: set[str]) -> tuple[GpuOp, list[Node], list[str]] | None:
    """The GPU operator computing `node` (with the nodes it fuses and its argument values), or
    None where none does."""
    spec = host_spec(graph, node)
    if spec is None:
        return None
    name, params, arity = spec
    nodes, args = [node], list(node.inputs[:arity])
    if name in FUSIBLE:
        nodes, args, params = FUSIBLE[name](graph, node, args, dict(params), absorbed)
    op = _translate(name, params)
    return (op, nodes, args) if op is not None else None


def _translate(name: str, p: dict[str, Any]) -> GpuOp | None:
    """The host operator `name`'s parameters as a GPU operator (float32 only)."""
    if p.get("dtype", "float32") != "float32":
        return None
    epilogue = {k: p[k] for k in ("residual", "act_lo", "act_hi") if k in p}
    if name == "conv2d":
        return Conv2d(tuple(p["shape"]), tuple(p["weight_shape"]), tuple(p["strides"]),  # type: ignore[arg-type]
                      tuple(p["pads"]), p["group"], p["bias"], **epilogue)
    if name == "gemm":
        (m, k), (n, _) = p["shape"], p["weight_shape"]
        return MatMul(1, m, n, k, transpose_b=True, bias=p["bias"])
    if name == "matmul":
        return _matmul(p)
    if name == "max_pool2d":
        (pt, pl) = p["pad"]
        return MaxPool2d(tuple(p["shape"]), tuple(p["kernel"]), tuple(p["stride"]), (pt, pl, pt, pl))
    if name == "global_avg_pool2d" and len(p["shape"]) == 4:
        return GlobalAvgPool2d(tuple(p["shape"]))
    if name in ("add", "sub", "mul", "div"):
        return Eltwise(name, tuple(p["a_shape"]) or (1,), tuple(p["b_shape"]) or (1,))
    if name == "transpose":
        return Transpose(tuple(p["shape"]), tuple(p["perm"]))
    if name in ("relu", "gelu", "tanh"):
        return Eltwise(name, tuple(p["shape"]))
    if name == "hard_swish":
        return Eltwise("hardswish", tuple(p["shape"]))
    if name == "clip":
        return Eltwise("clip", tuple(p["shape"]), lo=p["min"], hi=p["max"])
    if name == "softmax" and 2 <= len(p["shape"]) <= 4:
        return Softmax(tuple(p["shape"]))
    if name == "layer_norm" and 2 <= len(p["shape"]) <= 4:
        return LayerNorm(tuple(p["shape"]), p["eps"])
    return None


def _matmul(p: dict[str, Any]) -> GpuOp | None:
    a, b = tuple(p["a_shape"]), tuple(p["b_shape"])
    if len(a) < 2 or len(b) < 2 or (len(b) > 2 and b[:-2] != a[:-2]):
        return None
    fused = {k: p[k] for k in ("bias", "residual", "gelu") if k in p}
    return MatMul(math.prod(a[:-2]), a[-2], b[-1], a[-1], b_batched=len(b) > 2, **fused)


class GpuModel:
    """The steps of one float graph on `executor`, compiled for `target`."""

    def __init__(self, graph: Graph, steps: list[GpuStep], executor: Executor, target: GpuTarget) -> None:
        self.graph, self.steps, self.executor, self.target = graph, steps, executor, target
        self.constants: dict[str, DeviceTensor] = {}
        for name, v in graph.values.items():
            if v.data is not None and v.dtype == "float32":
                self.constants[name] = executor.upload(v.data)
        self.extras = [[executor.upload(x) for x in s.extra] for s in steps]
        self.buffers: dict[str, DeviceTensor] = {}  # every float value's memory, kept between runs

    @classmethod
    def compile(cls, graph: Graph, executor: Executor, target: GpuTarget) -> GpuModel:
        """`graph` simplified as the CPU target's fp32 graph is (batch norms folded into the
        convolutions, constants folded), then every step compiled."""
        simple = simplify(graph)
        return cls(simple, plan_gpu_steps(simple, target), executor, target)

    def fallbacks(self) -> list[str]:
        return sorted({s.op for s in self.steps if s.where == "host-numpy"})

    def kernels(self) -> list[GpuKernel]:
        return [s.kernel for s in self.steps if s.kernel is not None]

    def run(self, inputs: Mapping[str, np.ndarray]) -> ModelResult:
        env: dict[str, Value] = {}
        for name in self.graph.inputs:
            env[name] = self._place(name, np.asarray(inputs[name]))
        records = []
        for step, extra in zip(self.steps, self.extras, strict=True):
            start = time.perf_counter()
            self._execute(step, env, extra)
            records.append(StepRecord(step.name, step.op, step.where, macs=step.macs,
                                      host_s=time.perf_counter() - start))
        self.executor.synchronize()
        outputs = {name: self._host(env, name) for name in self.graph.outputs}
        self.last_env = env
        return ModelResult(outputs, records)

    def kernel_args(self) -> list[tuple[GpuStep, list[DeviceTensor]]]:
        """Each GPU step with the device tensors its kernel ran on in the last run (inputs, then
        the output), for timing kernels one by one (CudaExecutor.time_kernel)."""
        env = getattr(self, "last_env", None)
        if env is None:
            raise RuntimeError("kernel_args needs a run first")
        out = []
        for step, extra in zip(self.steps, self.extras, strict=True):
            if step.where == "gpu":
                args = [self._device(env, a) for a in step.args] + extra
                out.append((step, [*args, self.buffers[step.outputs[0]]]))
        return out

    def _execute(self, step: GpuStep, env: dict[str, Value], extra: list[DeviceTensor]) -> None:
        out_name = step.outputs[0]
        shape = self.graph.values[out_name].shape
        if step.where == "view":
            src = self._get(env, step.args[0])
            env[out_name] = src.view(shape) if isinstance(src, DeviceTensor) else src.reshape(shape)
        elif step.where == "gpu":
            assert step.kernel is not None
            args = [self._device(env, a) for a in step.args] + extra
            out = self._buffer(out_name, shape)
            self.executor.launch(step.kernel, args + [out])
            env[out_name] = out
        else:
            node = step.nodes[0]
            results = evaluate_node(self.graph, node, [self._host(env, a) for a in node.inputs])
            for name, array in zip(node.outputs, results, strict=True):
                env[name] = self._place(name, array)

    def _buffer(self, name: str, shape: tuple[int, ...]) -> DeviceTensor:
        """The device memory of value `name`, allocated on first use and kept."""
        if name not in self.buffers:
            self.buffers[name] = self.executor.empty(shape)
        return self.buffers[name]

    def _place(self, name: str, array: np.ndarray) -> Value:
        """A host result as the value `name`: float32 copied into its device buffer, any other
        dtype (token ids, a mask) kept on the host for the nodes that run there."""
        if array.dtype != np.float32:
            return array
        tensor = self._buffer(name, array.shape)
        self.executor.write(tensor, array)
        return tensor

    def _get(self, env: dict[str, Value], name: str) -> Value:
        if name in env:
            return env[name]
        if name in self.constants:
            return self.constants[name]
        data = self.graph.values[name].data
        assert data is not None, f"value {name} is neither computed nor constant"
        return data

    def _device(self, env: dict[str, Value], name: str) -> DeviceTensor:
        value = self._get(env, name)
        if isinstance(value, DeviceTensor):
            return value
        return self.executor.upload(np.asarray(value, dtype=np.float32))

    def _host(self, env: dict[str, Value], name: str) -> np.ndarray:
        value = self._get(env, name)
        return self.executor.download(value) if isinstance(value, DeviceTensor) else np.asarray(value)


def plan_gpu_steps(graph: Graph, target: GpuTarget) -> list[GpuStep]:
    """The graph's nodes as steps in graph order, fused groups placed at their last node, each
    GPU operator compiled (its default schedule) now, so a run never compiles."""
    absorbed: set[str] = set()
    placed: list[tuple[int, GpuStep]] = []
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.name in absorbed:
            continue
        step = _step(graph, node, target, absorbed)
        absorbed.update(n.name for n in step.nodes[1:])
        placed.append((index[step.nodes[-1].name], step))
    return [step for _, step in sorted(placed, key=lambda p: p[0])]


def _step(graph: Graph, node: Node, target: GpuTarget, absorbed: set[str]) -> GpuStep:
    if node.op in VIEWS:
        return GpuStep((node,), "view", (node.inputs[0],), tuple(node.outputs))
    fallback = GpuStep((node,), "host-numpy", tuple(node.inputs), tuple(node.outputs),
                       macs=node_macs(graph, node))
    found = gpu_op_for(graph, node, absorbed)
    if found is None:
        return fallback
    op, nodes, args = found
    try:
        kernel = compile_kernel(op, target)
    except ScheduleError:
        return fallback
    extra: tuple[np.ndarray, ...] = ()
    if isinstance(op, LayerNorm) and len(args) == 2:  # no bias: a zero one
        extra = (np.zeros(op.shape[-1], np.float32),)
    return GpuStep(tuple(nodes), "gpu", tuple(args), tuple(nodes[-1].outputs), kernel, extra,
                   macs=node_macs(graph, node))
