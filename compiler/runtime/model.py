"""`CompiledModel`: a quantized graph partitioned into accelerator steps and host steps.

Partitioning: a QConv with one group (square kernel, equal strides, symmetric padding), a QGemm
and a 4-D QAdd become accelerator steps (compiler/runtime/accel.py) when the operator compiles
for the target; everything else runs on the host.  A shallow convolution (input channels filling
at most half of the GEMM's input block, like an image network's first layer) stays on the host
unless `offload_shallow`: on the accelerator most of its multiply-accumulates would be padding
(ResNet-18's 3-channel conv1 takes 3.2 M cycles on `vta`, 32 ms at 100 MHz, where the host's
int8 kernel takes a few ms); VTA leaves that layer on the CPU for the same reason.  Host steps
use a native kernel where the host-kernel registry has one (compiler/ops/cpu, JIT-compiled with
LLVM); layout-only ops (Flatten, Reshape, Squeeze, Unsqueeze) are views; an op with neither is
evaluated by the graph interpreter and reported as `host-numpy`, so the report never hides
where an operator ran.

`run` executes the steps in order against one environment of named arrays (host values in the
host arena, `compiler.graph.memory`) and one device DRAM image (every accelerator step's relocated
Program, its constants and the packed activations, `compiler.runtime.arena`), and returns the
outputs with a per-step record (where it ran, cycles, GEMM micro-ops, utilization, host time).
This module never imports `sim`: the caller passes a backend (`sim.backends.make_backend`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from compiler.codegen.cpu import compiling_ahead
from compiler.errors import ScheduleError
from compiler.graph.interp import evaluate_node, run_graph
from compiler.graph.ir import Graph, Node
from compiler.graph.memory import plan_memory
from compiler.runtime.accel import AccelStep, KnobsFor, Precise, add_step, conv_step, dense_step
from compiler.runtime.arena import AccelUse, DeviceArena, StepInArena
from compiler.target.accel import AcceleratorTarget
from hw.program import Program

if TYPE_CHECKING:  # the runtime only names sim's Stats: backends come from the caller
    from sim.backend import Stats

_VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze")


class Backend(Protocol):
    """What `run` needs of a simulator (sim.backend.Backend): a program run in place against
    the device arena's DRAM image, returning its Stats."""

    name: str

    def run_in(self, program: Program, dram: np.ndarray) -> Stats: ...


@dataclass
class Step:
    node: Node
    where: str  # "accel", "host", "host-numpy" or "view"
    accel: AccelStep | None = None
    host: Callable[[list[np.ndarray]], list[np.ndarray]] | None = None
    compile_s: float = 0.0


@dataclass
class StepRecord:
    name: str
    op: str
    where: str
    cycles: int | None = None
    gemm_uops: int | None = None
    utilization: float | None = None
    host_s: float = 0.0
    macs: int = 0
    stats: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ModelResult:
    outputs: dict[str, np.ndarray]
    steps: list[StepRecord] = field(default_factory=list)
    # the integer tensors where the quantized graph hands over to float (Dequantize inputs)
    boundary: dict[str, np.ndarray] = field(default_factory=dict)
    # the float tensors it takes over from (Quantize inputs computed by a step: host kernels
    # round differently from numpy, so the integer reference quantizes these same values)
    handed_in: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        return sum(s.cycles or 0 for s in self.steps)

    @property
    def host_s(self) -> float:
        return sum(s.host_s for s in self.steps)


class CompiledModel:
    """The steps of one quantized graph on one accelerator target."""

    def __init__(self, graph: Graph, target: AcceleratorTarget, steps: list[Step],
                 offload_shallow: bool = False) -> None:
        self.graph, self.target, self.steps = graph, target, steps
        self.offload_shallow = offload_shallow
        self.unpacked = _needs_unpacked(graph, steps)
        # one host arena for every activation that exists unpacked (packed hand-overs between
        # accelerator steps never materialise in NCHW), buffers shared where lifetimes allow
        kept_packed = {s.node.outputs[0] for s in steps if s.accel is not None} - self.unpacked
        self.memory = plan_memory(graph, skip=kept_packed)
        # one device arena for every accelerator step's program, constants and packed activations
        constants = {i: s.accel.constants for i, s in enumerate(steps) if s.accel is not None}
        self.device = DeviceArena(_accel_uses(steps), target.cfg, constants)

    @classmethod
    def compile(cls, graph: Graph, target: AcceleratorTarget, *, offload: bool = True,
                offload_shallow: bool = False, knobs_for: KnobsFor | None = None,
                ) -> CompiledModel:
        """`knobs_for(op)`: the schedule point of an accelerator operator (a tuning log's best),
        or None for its default schedule; `offload_shallow`: shallow convolutions too (see the
        module doc)."""
        with compiling_ahead():  # host kernels JIT-compiled in a helper while the steps are planned
            steps = [_plan(graph, node, target, offload, offload_shallow, knobs_for) for node in graph.nodes]
        return cls(graph, target, steps, offload_shallow)

    @property
    def compile_s(self) -> float:
        return sum(s.compile_s for s in self.steps)

    def offloaded_macs_fraction(self) -> float:
        total = sum(node_macs(self.graph, s.node) for s in self.steps)
        accel = sum(node_macs(self.graph, s.node) for s in self.steps if s.where == "accel")
        return accel / total if total else 0.0

    def prepare(self, backend: Backend) -> int:
        """Get every accelerator step ready on `backend` before the first input, where the
        backend has such a step (`prepare(program, dram)`: fsim loads or records each Program's
        run and binds its replay, work the first input would do otherwise); the number of steps
        made ready."""
        prepare = getattr(backend, "prepare", None)
        if prepare is None:
            return 0
        dram = self.device.new_dram()  # a scratch image: its micro-op tables are the runs'
        return sum(bool(prepare(self.device.at(index).program, dram))
                   for index, step in enumerate(self.steps) if step.accel is not None)

    def run(self, inputs: Mapping[str, np.ndarray], backend: Backend) -> ModelResult:
        """Execute the steps in order.  Accelerator steps run against one device DRAM image
        (`self.device`, compiler/runtime/arena.py) that holds every program and constant from the
        start.  An accelerator step's output stays packed in it for the accelerator steps that
        read it in the same layout (in place), and is unpacked only for the others
        (`self.unpacked`): consecutive convolutions pass their activations without a copy and
        without a round trip through NCHW."""
        arena = np.zeros(self.memory.arena_bytes, np.uint8)
        dram = self.device.new_dram()
        env = {k: v.data for k, v in self.graph.values.items() if v.data is not None}
        for name, array in inputs.items():
            env[name] = self._place(arena, name, array)
        records = []
        boundary: dict[str, np.ndarray] = {}
        handed_in: dict[str, np.ndarray] = {}
        for index, step in enumerate(self.steps):
            if step.node.op == "Dequantize":
                boundary[step.node.inputs[0]] = env[step.node.inputs[0]].copy()
            if step.node.op == "Quantize" and step.node.inputs[0] not in self.graph.inputs:
                handed_in[step.node.inputs[0]] = env[step.node.inputs[0]].copy()
            outputs: Sequence[np.ndarray | None]
            if step.accel is not None:
                unpack = step.node.outputs[0] in self.unpacked
                outputs, record = _execute_accel(self.graph, step, step.accel, self.device.at(index), env,
                                                 dram, backend, unpack)
            else:
                arrays = [env[x] for x in step.node.inputs]
                outputs, record = _execute(self.graph, step, arrays, backend)
            for name, value in zip(step.node.outputs, outputs, strict=True):
                if value is not None:
                    env[name] = self._place(arena, name, value)
            records.append(record)
        results = {name: env[name].copy() for name in self.graph.outputs}
        return ModelResult(results, records, boundary, handed_in)

    def _place(self, arena: np.ndarray, name: str, value: np.ndarray) -> np.ndarray:
        """`value` stored at its planned place in the arena (a buffer it may share with values
        that are dead by now)."""
        v = self.graph.values[name]
        view = self.memory.view(arena, name, v.shape, v.dtype)
        np.copyto(view, np.asarray(value).reshape(v.shape), casting="no")
        return view


def _plan(graph: Graph, node: Node, target: AcceleratorTarget, offload: bool, offload_shallow: bool,
          knobs_for: KnobsFor | None) -> Step:
    start = time.perf_counter()
    step: Step
    if node.op in _VIEWS:
        step = Step(node, "view")
    else:
        wanted = offload and (offload_shallow or not is_shallow(graph, node, target))
        accel = _accel_step(graph, node, target, knobs_for) if wanted else None
        if accel is not None:
            accel.warm([graph.values[x].shape for x in accel.activation_inputs(node.inputs)])
            step = Step(node, "accel", accel=accel)
        else:
            host = _host_kernel(graph, node)
            step = Step(node, "host" if host else "host-numpy", host=host)
    step.compile_s = time.perf_counter() - start
    return step


def is_shallow(graph: Graph, node: Node, target: AcceleratorTarget) -> bool:
    """A convolution (int8 or float) whose input channels fill at most half of the GEMM's input block."""
    return node.op in ("QConv", "Conv") and 2 * graph.values[node.inputs[0]].shape[1] <= target.block_in


def _accel_step(graph: Graph, node: Node, target: AcceleratorTarget,
                knobs_for: KnobsFor | None) -> AccelStep | None:
    """The node as an accelerator step, or None when the accelerator cannot run it."""
    shape = graph.values[node.inputs[0]].shape
    clip = (node.int_attr("clip_lo"), node.int_attr("clip_hi")) if "clip_lo" in node.attrs else (0, 0)
    try:
        if node.op == "QConv" and node.int_attr("group") == 1:
            if node.int_attr("pad_value") and any(node.ints_attr("pads")):
                return None  # the accelerator's loads pad with zeros only
            w, b, m = (graph.const_data(x) for x in node.inputs[1:4])
            if w is None or b is None or m is None:
                return None
            residual = node.int_attr("mult_r") if len(node.inputs) == 5 else None
            return conv_step(node.name, target, shape, w, b, m, strides=node.ints_attr("strides"),
                             pads=node.ints_attr("pads"), shift=node.int_attr("shift"), clip=clip,
                             residual=residual, knobs_for=knobs_for,
                             precise=_precise(graph, node))
        if node.op == "QGemm":
            w, b, m = (graph.const_data(x) for x in node.inputs[1:4])
            if w is None or b is None or m is None:
                return None
            return dense_step(node.name, target, shape, w, b, m, shift=node.int_attr("shift"), clip=clip,
                              knobs_for=knobs_for, precise=_precise(graph, node))
        if node.op == "QAdd" and len(shape) == 4:
            return add_step(node.name, target, shape, mult_a=node.int_attr("mult_a"),
                            mult_b=node.int_attr("mult_b"), shift=node.int_attr("shift"),
                            clip=clip, knobs_for=knobs_for)
    except ScheduleError:
        return None  # not this accelerator's shape: the host runs it
    return None


def _precise(graph: Graph, node: Node) -> Precise | None:
    """A QConv/QGemm's precise requantization parameters (the contract checked them), or None."""
    split = node.int_attr("split")
    if not split:
        return None
    lo, hi = (graph.const_data(x) for x in node.inputs[4:6])
    assert lo is not None and hi is not None, f"{node.name}: clamp bounds must be constants"
    return Precise(split, lo, hi)


def _host_kernel(graph: Graph, node: Node) -> Callable[[list[np.ndarray]], list[np.ndarray]] | None:
    """A native host kernel for the node, when the registry has one for its op."""
    from compiler.runtime.cpu import host_kernel

    return host_kernel(graph, node)


def reference_boundary(graph: Graph, inputs: Mapping[str, np.ndarray],
                       handed_in: Mapping[str, np.ndarray] | None = None,
                       ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The graph interpreter's outputs and its integer tensors at the Dequantize boundary: the
    integer reference that `ModelResult.boundary` must equal exactly. `handed_in`: the float
    values the run quantized (`ModelResult.handed_in`), quantized here as they were there."""
    handed = [n.inputs[0] for n in graph.nodes if n.op == "Dequantize"]
    values = run_graph(graph, inputs, keep=handed, given=handed_in)
    return {name: values[name] for name in graph.outputs}, {name: values[name] for name in handed}


def _needs_unpacked(graph: Graph, steps: list[Step]) -> set[str]:
    """Outputs of accelerator steps that some reader needs in NCHW: a host step, a graph output,
    or an accelerator step that packs differently."""
    layout = {s.node.outputs[0]: s.accel.out_layout for s in steps if s.accel is not None}
    need = {name for name in graph.outputs if name in layout}
    for s in steps:
        reads = [] if s.accel is None else s.accel.activation_inputs(s.node.inputs)
        acts = {x: i for i, x in enumerate(reads)}
        for name in s.node.inputs:
            i = acts.get(name)
            if name in layout and (i is None or s.accel is None or s.accel.in_layout(i) != layout[name]):
                need.add(name)
    return need


def _accel_uses(steps: Sequence[Step]) -> list[AccelUse]:
    """What the device arena plan needs of each accelerator step (compiler/runtime/arena.py)."""
    uses = []
    for index, s in enumerate(steps):
        if s.accel is None:
            continue
        a = s.accel
        values = a.activation_inputs(s.node.inputs)
        pairs = enumerate(zip(a.activations, values, strict=True))
        acts = tuple((region, value, a.in_layout(i)) for i, (region, value) in pairs)
        uses.append(AccelUse(index, a.compiled.built.program, frozenset(a.constants), acts,
                             ("out", s.node.outputs[0], a.out_layout)))
    return uses


def _execute_accel(graph: Graph, step: Step, accel: AccelStep, device: StepInArena,
                   env: dict[str, np.ndarray], dram: np.ndarray, backend: Backend,
                   unpack: bool) -> tuple[list[np.ndarray | None], StepRecord]:
    """Run one accelerator step in the device arena: activations the host holds are packed into
    their regions (those a predecessor stored in the same layout are read in place), and the
    output is unpacked from the arena only when a reader needs it in NCHW."""
    node = step.node
    record = StepRecord(node.name, node.op, step.where, macs=node_macs(graph, node))
    start = time.perf_counter()
    for i, name in enumerate(accel.activation_inputs(node.inputs)):
        region = accel.activations[i]
        if not device.in_place(region):
            device.write(dram, region, accel.pack_one(i, env[name]))
    host = time.perf_counter() - start
    stats = backend.run_in(device.program, dram)
    start = time.perf_counter()
    out = accel.unpack(device.read(dram, "out")) if unpack else None
    record.cycles, record.gemm_uops = stats.cycles, stats.gemm_uops
    record.utilization = stats.gemm_uops / stats.cycles if stats.cycles else None
    record.stats = stats.to_dict()
    record.host_s = host + time.perf_counter() - start
    return [out], record


def _execute(graph: Graph, step: Step, arrays: Sequence[np.ndarray],
             backend: Backend) -> tuple[list[np.ndarray], StepRecord]:
    node = step.node
    record = StepRecord(node.name, node.op, step.where, macs=node_macs(graph, node))
    start = time.perf_counter()
    if step.where == "view":
        outputs = [np.asarray(arrays[0]).reshape(graph.values[node.outputs[0]].shape)]
    elif step.host is not None:
        outputs = step.host(list(arrays))
    else:
        outputs = evaluate_node(graph, node, arrays)
    record.host_s = time.perf_counter() - start
    return outputs, record


def node_macs(graph: Graph, node: Node) -> int:
    """Multiply-accumulates of a convolution or matrix product (0 for other ops)."""
    if node.op in ("QConv", "Conv"):
        out = graph.values[node.outputs[0]].shape
        w = graph.values[node.inputs[1]].shape
        return int(np.prod(out)) * int(np.prod(w[1:]))
    if node.op in ("QGemm", "Gemm", "MatMul"):
        a = graph.values[node.inputs[0]].shape
        out = graph.values[node.outputs[0]].shape
        return int(np.prod(out)) * int(a[-1])
    return 0
