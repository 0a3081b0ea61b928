"""Schedule -> loop IR for an NVIDIA GPU: one kernel, one grid, shared and local buffers.

The same bound inference as the other targets (compiler.lower.lower.Lowering), with the GPU's
rules, each broken one a ScheduleError that says why:

- one stage is computed at the root, the output: it defines the launch.  Its loops bound to
  blockIdx come first, then those bound to threadIdx, then the serial ones, so every thread of
  the grid runs the serial loops of its own output elements;
- every other stage is inlined or computed at a loop (compute_at) in scope "shared" (one copy per
  block, in the 48 KiB a block may hold statically) or "local" (per thread: registers);
- a shared stage's region ranges over the block's threads (its reader's threadIdx loops are not
  fixed), so the block fetches it together: its own loops may bind threadIdx (a cooperative
  fetch; a loop shorter than the block's dimension is guarded).  It is computed between two
  barriers (an `Attr("barrier")` around its nest), so no thread reads the tile before every
  thread wrote it, nor overwrites it while another still reads the previous one;
- bound loops of attached stages use only the thread dimensions the output binds, no longer
  than the output's; a local stage binds none; blockIdx is bound by the output only;
- `unroll` takes loops of at most MAX_UNROLL iterations; `vectorize` the innermost loop of a
  stage, 2 or 4 float32 lanes stored contiguously (one 64- or 128-bit access).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from compiler.errors import ScheduleError
from compiler.lower.bounds import LoopAxis
from compiler.lower.cpu import drop_unit_loops, fold_divisions, itemsize
from compiler.lower.lower import LoweredFunc, Lowering
from compiler.schedule.records import THREAD_TAGS
from compiler.schedule.schedule import Schedule, Stage
from compiler.target.gpu import GpuTarget
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.te.tensor import Tensor
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir

MAX_UNROLL = 64
SHARED_ALIGN = 16  # bytes: each shared tile starts 16-byte aligned (128-bit accesses)
VECTOR_LANES = (2, 4)


@dataclass(frozen=True)
class GpuKernelIR:
    """One kernel's loop IR and launch: `grid` and `block` (x, y, z), static shared bytes."""

    func: LoweredFunc
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def dims(self) -> dict[str, int]:
        """The extent of every thread tag (1 where unbound): blockIdx.x ... threadIdx.z."""
        values = self.grid + self.block
        return dict(zip(THREAD_TAGS, values, strict=True))


def is_thread(kind: str) -> bool:
    return kind.startswith("threadIdx")


def is_block(kind: str) -> bool:
    return kind.startswith("blockIdx")


class GpuLowering(Lowering):
    """The GPU's: shared and local buffers, the launch taken from the output's bound loops."""

    def __init__(self, sched: Schedule, target: GpuTarget) -> None:
        super().__init__(sched)
        self.target = target
        self.dims: dict[str, int] = {}
        self.shared_bytes = 0

    def symbolic(self, st: Stage, outer: list[LoopAxis]) -> set[E.Var]:
        """A shared stage is one tile per block: its readers' thread loops range over it."""
        if st.scope == "shared":
            return {lp.var for lp in outer if not is_thread(lp.kind)}
        return {lp.var for lp in outer}

    # -- checks ---------------------------------------------------------------------------------
    def check_launch(self) -> None:
        """One root stage, the output, its bound loops outermost; the launch from them."""
        roots = [s for s in self.order if s.attach is None]
        extra = [s.name for s in roots if not self.sched.is_output(s.name)]
        if extra or len(roots) != 1:
            names = ", ".join(s.name for s in roots)
            raise ScheduleError(f"stages {names} are computed at the root: a GPU kernel launches one "
                                "grid for its one output; inline the others or compute them at a "
                                "loop of the output")
        root = self.loops[roots[0].name]
        rank = {"blockIdx": 0, "threadIdx": 1}
        seen = -1
        for lp in root.leaves:
            level = rank.get(lp.kind.split(".")[0], 2)
            if level < seen:
                raise ScheduleError(f"bind({root.stage.name}, {lp.name}, {lp.kind}): the loop lies "
                                    "inside a loop that is not bound to blocks; bound loops must be "
                                    "the outermost, blocks outside threads")
            seen = level
            if lp.kind in THREAD_TAGS:
                self.dims[lp.kind] = lp.extent
        self._check_limits(root.stage.name)

    def _check_limits(self, name: str) -> None:
        threads = 1
        for tag in THREAD_TAGS[3:]:
            threads *= self.dims.get(tag, 1)
        if threads > self.target.max_threads_per_block:
            raise ScheduleError(f"stage {name}: {threads} threads per block, more than the "
                                f"{self.target.max_threads_per_block} the {self.target.arch} allows")
        if self.dims.get("threadIdx.z", 1) > 64:
            raise ScheduleError(f"stage {name}: threadIdx.z extent {self.dims['threadIdx.z']} is "
                                "more than 64")
        for tag in ("blockIdx.y", "blockIdx.z"):
            if self.dims.get(tag, 1) > 65535:
                raise ScheduleError(f"stage {name}: {tag} extent {self.dims[tag]} is more than 65535")

    def check_loops(self) -> None:
        """Attached stages' bindings, barriers outside guards, unroll and vectorize limits."""
        for st in self.live:
            sl = self.loops[st.name]
            for lp in sl.leaves:
                self._check_loop(st, lp, sl.leaves)
            if st.scope == "shared":
                for lp in sl.outer:
                    if is_thread(lp.kind) and lp.extent < self.dims.get(lp.kind, 1):
                        raise ScheduleError(
                            f"stage {st.name} in scope shared is computed inside loop {lp.name}, "
                            f"which only {lp.extent} of {self.dims[lp.kind]} threads run: its "
                            "barriers would not be reached by every thread")

    def _check_loop(self, st: Stage, lp: LoopAxis, leaves: list[LoopAxis]) -> None:
        what = f"{lp.kind}({st.name}, {lp.name})"
        if lp.kind in THREAD_TAGS and st.attach is not None:
            if is_block(lp.kind):
                raise ScheduleError(f"bind({st.name}, {lp.name}, {lp.kind}): only the output stage "
                                    "binds blocks (the launch is its grid)")
            if st.scope == "local":
                raise ScheduleError(f"bind({st.name}, {lp.name}, {lp.kind}): a local stage is per "
                                    "thread and cannot be spread over threads")
            if lp.kind not in self.dims:
                raise ScheduleError(f"bind({st.name}, {lp.name}, {lp.kind}): the output does not "
                                    f"bind {lp.kind}, so the block has no such threads")
            if lp.extent > self.dims[lp.kind]:
                raise ScheduleError(f"bind({st.name}, {lp.name}, {lp.kind}): extent {lp.extent} is "
                                    f"more than the block's {self.dims[lp.kind]} threads")
        if lp.kind == "unroll" and lp.extent > MAX_UNROLL:
            raise ScheduleError(f"{what}: {lp.extent} iterations, more than {MAX_UNROLL} to unroll")
        if lp.kind == "vectorize":
            self._check_vector(st, lp, leaves, what)

    def _check_vector(self, st: Stage, lp: LoopAxis, leaves: list[LoopAxis], what: str) -> None:
        if leaves[-1] is not lp or (st.name, lp.name) in self.children:
            raise ScheduleError(f"{what}: not the innermost loop of {st.name} (with nothing "
                                "computed inside it)")
        if lp.extent not in VECTOR_LANES or st.tensor.dtype != "float32":
            raise ScheduleError(f"{what}: a vector access is 2 or 4 float32 lanes, not "
                                f"{lp.extent} of {st.tensor.dtype}")
        sl = self.loops[st.name]
        indices = [E.substitute(a.var, sl.index) for a in st.axes]
        loops = {x.var: x.extent for x in sl.outer + sl.leaves}
        strides = [_stride(e, lp.var, loops) for e in indices]
        if strides[-1] != 1 or any(c != 0 for c in strides[:-1]):
            raise ScheduleError(f"{what}: {lp.name} does not run along the last dimension of "
                                f"{st.name} with stride 1, so its elements are not contiguous")

    # -- buffers --------------------------------------------------------------------------------
    def allocate(self) -> None:
        for st in self.order:
            if self.sched.is_output(st.name):
                continue
            if st.scope not in ("shared", "local"):
                where = "global memory" if st.scope == "global" else f"accelerator scope {st.scope}"
                raise ScheduleError(f"stage {st.name} would be stored in {where}: on the GPU only "
                                    "the output is; inline it or cache it in shared or local")
            shape = tuple(d.extent for d in self.loops[st.name].domain)
            elems = _prod(shape)
            if st.scope == "shared":
                nbytes = elems * itemsize(st.tensor.dtype)
                self.shared_bytes += -(-nbytes // SHARED_ALIGN) * SHARED_ALIGN
            elif elems > self.target.registers_per_thread:
                raise ScheduleError(f"stage {st.name} in scope local holds {elems} elements per "
                                    f"thread, more than the {self.target.registers_per_thread} "
                                    "registers a thread has")
            self.buffers[st.name] = S.Buffer(st.name, shape, st.tensor.dtype, None, st.scope, Affine())
        if self.shared_bytes > self.target.shared_bytes_per_block:
            tiles = ", ".join(f"{b.name}{list(b.shape)}" for b in self.buffers.values()
                              if b.scope == "shared")
            raise ScheduleError(f"shared tiles {tiles} need {self.shared_bytes} bytes, more than the "
                                f"{self.target.shared_bytes_per_block} a block holds on "
                                f"{self.target.arch}")

    def _stage_stmt(self, st: Stage) -> S.Stmt:
        body = super()._stage_stmt(st)
        return S.Attr("barrier", "shared", st.name, body) if st.scope == "shared" else body


def lower_gpu(sched: Schedule, target: GpuTarget, name: str = "main",
              inputs: list[Tensor] | None = None) -> GpuKernelIR:
    """The GPU loop IR of `sched` for `target`, with its launch; `inputs` fixes the argument
    order of the input tensors (default: the schedule's placeholders in order)."""
    _check_gpu(sched)
    lw = GpuLowering(sched, target)
    lw.infer()
    lw.check_launch()
    lw.check_loops()
    lw.allocate()
    body = fold_divisions(drop_unit_loops(lw.build()))
    used = list(sched.inputs.values())
    if inputs is not None:
        if sorted(t.name for t in inputs) != sorted(t.name for t in used):
            raise ScheduleError(f"inputs {[t.name for t in inputs]} do not match the schedule's "
                                f"placeholders {[t.name for t in used]}")
        used = [sched.inputs[t.name] for t in inputs]
    func = LoweredFunc(name, body, used, list(sched.outputs), lw.buffers)
    dims = lw.dims
    grid = (dims.get("blockIdx.x", 1), dims.get("blockIdx.y", 1), dims.get("blockIdx.z", 1))
    block = (dims.get("threadIdx.x", 1), dims.get("threadIdx.y", 1), dims.get("threadIdx.z", 1))
    return GpuKernelIR(func, grid, block, lw.shared_bytes)


def print_gpu(kernel: GpuKernelIR) -> str:
    """The kernel's launch, signature, buffers and loop IR as text (tests, `--print-ir`)."""
    func = kernel.func
    args = [f"{t.name}: {t.dtype}{list(t.shape)}" for t in func.inputs + func.outputs]
    lines = [f"kernel {func.name}({', '.join(args)}) grid={list(kernel.grid)} block={list(kernel.block)}"]
    for buf in func.buffers.values():
        lines.append(f"  {buf.scope} {buf.name}: {buf.dtype}{list(buf.shape)}")
    lines.extend("  " + line for line in print_ir(func.body).splitlines())
    return "\n".join(lines)


def _check_gpu(sched: Schedule) -> None:
    for st in sched.stages.values():
        if st.pragmas or st.tensorize is not None or st.vthreads:
            raise ScheduleError(f"stage {st.name}: pragma, tensorize and virtual_thread are "
                                "accelerator records; the GPU lowering does not take them")
        if E.BITS[st.tensor.dtype] > 32 or st.tensor.dtype == "bool":
            raise ScheduleError(f"stage {st.name}: the GPU kernels compute 8- to 32-bit values, "
                                f"not {st.tensor.dtype}")


def _stride(e: E.Expr, var: E.Var, loops: dict[E.Var, int]) -> int | None:
    """How much index `e` moves per step of loop `var` (the other loops at sampled values), or
    None where that differs between samples: an index need not be affine in the other loops
    (a fused loop's // and %) to be contiguous along `var`."""
    others = sorted((v for v in E.free_vars(e) if v != var), key=lambda v: v.name)
    steps = set()
    for sample in range(8):
        env = {v: (sample * 7919 + k * 104729) % loops.get(v, 1) for k, v in enumerate(others)}
        values = [E.evaluate(e, {**env, var: x}) for x in range(loops.get(var, 1))]
        steps |= {int(b) - int(a) for a, b in itertools.pairwise(values)}
    return steps.pop() if len(steps) == 1 else (0 if not steps else None)


def _prod(xs: tuple[int, ...]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
