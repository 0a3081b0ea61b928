"""`CpuModel`: a whole graph on the host CPU, every operator a native kernel: the CPU target, a
sibling of the accelerator's `CompiledModel` (compiler/runtime/model.py).

The graph is either float as imported (and simplified) or the quantizer's int8 graph, the same
one the accelerator runs, so that an int8 run is exact against the graph's integer reference.
Compilation does the graph-level work a CPU needs:
- fusion (compiler.runtime.cpu_fuse): a float convolution absorbs a residual Add that is its
  only reader and a Relu or Clip after either, a float MatMul a bias Add, a residual Add and a
  Gelu (the int8 graph's residual adds are fused by the quantizer already), so the intermediate
  tensors never exist;
- a static memory plan: every activation gets its place in one arena allocated once per model
  (buffers shared where lifetimes allow: compiler.graph.memory.place), views (Flatten,
  Reshape...) alias their input, and each kernel is bound once to its argument arrays
  (HostKernel.bind), so a run copies only the inputs in and the outputs out;
- `threads`: each step whose kernel splits along its outer dimension (output channels of a
  convolution, a pool's channels, a classifier's outputs, an element-wise op's elements) is
  compiled as `threads` kernels on disjoint slices, run concurrently (ctypes releases the GIL
  around a native call).
A node with no native kernel is evaluated by the graph interpreter and reported as
`host-numpy` (`CpuModel.fallbacks()` lists them), so a report never hides where an op ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.codegen.cpu import HostKernel
from compiler.graph.interp import evaluate_node
from compiler.graph.ir import Graph, Node
from compiler.graph.memory import Lifetime, MemoryPlan, aligned_bytes, place
from compiler.ops.cpu import compile_host_op, host_op
from compiler.runtime.cpu import host_spec
from compiler.runtime.cpu_fuse import FUSIBLE
from compiler.runtime.cpu_split import split_spec
from compiler.runtime.model import ModelResult, StepRecord, node_macs

VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze")


@dataclass
class CpuStep:
    """One kernel call (or `threads` of them), a view, or an interpreted node. `nodes`: the graph
    nodes it computes, the first naming it (a fused convolution's Add and activation follow);
    `args`: the values its kernel reads, in argument order; `outputs`: the values it writes."""

    nodes: tuple[Node, ...]
    where: str  # "host", "host-numpy" or "view"
    args: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: str = ""  # the host operator's name and parameters, for reports
    specs: tuple[tuple[str, dict[str, Any]], ...] = ()  # one host op per slice (threads)
    slices: tuple[tuple[slice, ...], ...] = ()  # per slice: one per argument (compiler.runtime.cpu_split)
    compile_s: float = 0.0
    macs: int = 0
    calls: list[Callable[[], None]] = field(default_factory=list)

    @property
    def node(self) -> Node:
        return self.nodes[0]

    @property
    def name(self) -> str:
        return self.nodes[0].name

    @property
    def op(self) -> str:
        return "+".join(n.op for n in self.nodes)


class CpuModel:
    """The steps of one graph (float or quantized) on the host, with one planned arena."""

    def __init__(self, graph: Graph, steps: list[CpuStep], threads: int = 1) -> None:
        self.graph, self.steps, self.threads = graph, steps, threads
        self.memory = _plan(graph, steps)
        self.arena = np.zeros(self.memory.arena_bytes, np.uint8)
        self.env = self._bind()
        self._pool = ThreadPoolExecutor(threads - 1) if threads > 1 else None

    @classmethod
    def compile(cls, graph: Graph, *, threads: int = 1, fuse: bool = True,
                tuned: Mapping[str, Mapping[str, Any]] | None = None) -> CpuModel:
        """Every node of `graph` as a native kernel where one covers it (fused as the module doc
        says when `fuse`), each kernel split `threads` ways where it splits; `tuned`: schedule
        knobs per convolution (compiler.tune.cpu.tuned_table), the defaults elsewhere."""
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, not {threads!r}")
        return cls(graph, plan_steps(graph, threads, fuse, tuned), threads)

    @property
    def precision(self) -> str:
        """"int8" for the quantizer's graph, "fp32" for a float one."""
        return "int8" if any(n.op in ("QConv", "QGemm", "Quantize") for n in self.graph.nodes) else "fp32"

    @property
    def compile_s(self) -> float:
        return sum(s.compile_s for s in self.steps)

    @property
    def macs(self) -> int:
        return sum(s.macs for s in self.steps)

    def fallbacks(self) -> list[str]:
        """The ops that run in numpy, not as native kernels (none, for the zoo's models)."""
        return sorted({s.op for s in self.steps if s.where == "host-numpy"})

    def run(self, inputs: Mapping[str, np.ndarray]) -> ModelResult:
        """Run every step in order on the planned arena; outputs are copies (the arena is reused
        by the next run, so a model runs one input at a time)."""
        env = self.env
        for name in self.graph.inputs:
            np.copyto(env[name], inputs[name], casting="no")
        records, boundary, handed_in = [], {}, {}
        for step in self.steps:
            node = step.node
            if node.op == "Dequantize":
                boundary[node.inputs[0]] = env[node.inputs[0]].copy()
            if node.op == "Quantize" and node.inputs[0] not in self.graph.inputs:
                handed_in[node.inputs[0]] = env[node.inputs[0]].copy()
            start = time.perf_counter()
            self._execute(step)
            records.append(StepRecord(step.name, step.op, step.where, macs=step.macs,
                                      host_s=time.perf_counter() - start))
        outputs = {name: env[name].copy() for name in self.graph.outputs}
        return ModelResult(outputs, records, boundary, handed_in)

    def _execute(self, step: CpuStep) -> None:
        if step.where == "view":
            return  # its output aliases its input
        if step.where == "host-numpy":
            results = evaluate_node(self.graph, step.node, [self.env[x] for x in step.node.inputs])
            for name, value in zip(step.outputs, results, strict=True):
                np.copyto(self.env[name], value, casting="no")
            return
        calls = step.calls
        if len(calls) == 1 or self._pool is None:
            for call in calls:
                call()
            return
        pending = [self._pool.submit(call) for call in calls[1:]]
        calls[0]()
        for future in pending:
            future.result()

    def _bind(self) -> dict[str, np.ndarray]:
        """Every value as an array: constants, arena views, aliases; each kernel bound to them."""
        env: dict[str, np.ndarray] = {k: v.data for k, v in self.graph.values.items() if v.data is not None}
        for name in self.memory.offsets:
            v = self.graph.values[name]
            env[name] = self.memory.view(self.arena, name, v.shape, v.dtype)
        for step in self.steps:
            if step.where == "view":
                src = env[step.node.inputs[0]]
                env[step.outputs[0]] = src.reshape(self.graph.values[step.outputs[0]].shape)
            elif step.where == "host":
                step.calls = [_bound(spec, [env[x] for x in (*step.args, *step.outputs)], cut)
                              for spec, cut in zip(step.specs, step.slices, strict=True)]
        return env


def _bound(spec: tuple[str, dict[str, Any]], arrays: list[np.ndarray],
           cut: tuple[slice, ...]) -> Callable[[], None]:
    """Host op `spec` bound to its slice `cut` of `arrays` (each reshaped as the kernel takes it:
    contiguous slices of contiguous arrays are views, never copies)."""
    kernel: HostKernel = compile_host_op(spec[0], **spec[1])
    specs = kernel.inputs + kernel.outputs
    cuts = cut or (slice(None),) * len(arrays)
    views = []
    for i, (a, sl, arg) in enumerate(zip(arrays, cuts, specs, strict=True)):
        # activations are contiguous arena views (a view again); a constant may be copied once
        flat = np.ascontiguousarray(a).reshape(-1)[sl]
        if i == 1 and spec[1].get("packed"):  # a convolution's constant weight, packed once
            op = host_op(*spec[:1], **spec[1])
            flat = op.pack_weight(flat.reshape(op.weight_shape))  # type: ignore[attr-defined]
        views.append(flat.reshape(arg.shape))
    return kernel.bind(*views)


def plan_steps(graph: Graph, threads: int = 1, fuse: bool = True,
               tuned: Mapping[str, Mapping[str, Any]] | None = None) -> list[CpuStep]:
    """The graph's nodes as steps, fused groups placed at their last node, in graph order."""
    absorbed: set[str] = set()
    placed: list[tuple[int, CpuStep]] = []
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.name in absorbed:
            continue
        start = time.perf_counter()
        step = _step(graph, node, threads, fuse, absorbed, tuned or {})
        step.compile_s = time.perf_counter() - start
        absorbed.update(n.name for n in step.nodes[1:])
        placed.append((index[step.nodes[-1].name], step))
    return [step for _, step in sorted(placed, key=lambda p: p[0])]


def _step(graph: Graph, node: Node, threads: int, fuse: bool, absorbed: set[str],
          tuned: Mapping[str, Mapping[str, Any]]) -> CpuStep:
    if node.op in VIEWS:
        return CpuStep((node,), "view", (node.inputs[0],), tuple(node.outputs))
    spec = host_spec(graph, node)
    if spec is None:
        return CpuStep((node,), "host-numpy", tuple(node.inputs), tuple(node.outputs),
                       macs=node_macs(graph, node))
    name, params, arity = spec
    nodes, args = [node], list(node.inputs[:arity])
    if fuse and name in FUSIBLE:
        nodes, args, params = FUSIBLE[name](graph, node, args, dict(params), absorbed)
    constant_weight = name in ("conv2d", "qconv2d") and graph.values[args[1]].data is not None
    if constant_weight and host_op(name, **params).chosen_strategy == "channels":  # type: ignore[attr-defined]
        params = {**params, "packed": True}
    if tuned:
        from compiler.tune.cpu import spec_key

        params = {**params, **tuned.get(spec_key(name, params), {})}
    outputs = tuple(nodes[-1].outputs)
    specs, slices = split_spec(name, params, threads)
    for s in specs:
        compile_host_op(s[0], **s[1])  # compiled now: a run never compiles
    return CpuStep(tuple(nodes), "host", tuple(args), outputs, f"{name}", specs, slices,
                   macs=node_macs(graph, node))


def _plan(graph: Graph, steps: Sequence[CpuStep]) -> MemoryPlan:
    """Lifetimes over the steps (a fused group's inner values need no buffer; a view's readers
    keep the value it aliases alive), then compiler.graph.memory.place."""
    root: dict[str, str] = {}
    for step in steps:
        if step.where == "view":
            src = step.node.inputs[0]
            root[step.outputs[0]] = root.get(src, src)
    end = len(steps)
    first = {name: -1 for name in graph.inputs}
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        reads = step.node.inputs if step.where != "host" else step.args
        for name in reads:
            base = root.get(name, name)
            if base in first:
                last[base] = i
        if step.where != "view":
            for name in step.outputs:
                first[name] = i
                last.setdefault(name, i)
    for name in graph.outputs:
        base = root.get(name, name)
        last[base] = end
    lives = {}
    for name, start in first.items():
        v = graph.values[name]
        size = aligned_bytes(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize)
        lives[name] = Lifetime(start, last.get(name, start), size)
    return place(lives)
