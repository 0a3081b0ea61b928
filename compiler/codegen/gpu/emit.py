"""GPU loop IR (compiler.lower.gpu) -> NVPTX LLVM IR: one `ptx_kernel` function per kernel.

`void NAME(ptr addrspace(1) noalias align 16 in0, ..., out0, ...)`, the host CPU's code
generator (compiler.codegen.llvm.emit) with the GPU's differences:

- tensors are in global memory (address space 1); a shared buffer is a module-level array in
  address space 3 (one per block); a local buffer an `alloca` that, indexed by constants after
  unrolling, SROA keeps in registers;
- a loop bound to a thread tag is no loop: its variable is the special register
  (`llvm.nvvm.read.ptx.sreg.{ctaid,tid}.{x,y,z}`), its body guarded by `var < extent` where
  the extent is shorter than the launch's dimension;
- an `Attr("barrier")` becomes `llvm.nvvm.barrier0` before and after its body;
- an `unroll` loop, and a `vectorize` loop (contiguous lanes, which LLVM's load-store vectoriser
  joins into one 64- or 128-bit access), are unrolled here: one copy of the body per iteration
  with the loop variable a constant.
The kernel uses the calling convention `ptx_kernel` (LLVM >= 20; no nvvm.annotations needed).
"""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen.llvm import fmath
from compiler.codegen.llvm.emit import LL_TYPES, PTR, _elems, _Emitter
from compiler.errors import TensorExprError
from compiler.lower.gpu import GpuKernelIR
from compiler.schedule.records import THREAD_TAGS
from compiler.te import expr as E
from compiler.tir import stmt as S

I32 = ir.IntType(32)
I64 = ir.IntType(64)
GLOBAL = ir.PointerType(addrspace=1)
SHARED_SPACE = 3
TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
_SREG = {"blockIdx": "ctaid", "threadIdx": "tid"}


def emit_kernel(kernel: GpuKernelIR, contract: bool = True) -> ir.Module:
    """The NVPTX module holding `kernel` (float products and sums may fuse into FMAs where
    `contract`: GPU results agree with numpy within float32 rounding, not bit for bit)."""
    module = ir.Module(name=kernel.func.name)
    module.triple = TRIPLE
    module.data_layout = DATA_LAYOUT
    _GpuEmitter(kernel, module, contract).run()
    return module


class _GpuEmitter(_Emitter):
    def __init__(self, kernel: GpuKernelIR, module: ir.Module, contract: bool) -> None:
        func = kernel.func
        self.kernel, self.dims = kernel, kernel.dims()
        self.func, self.module, self.contract = func, module, contract
        args = func.inputs + func.outputs
        for t in args:
            if t.dtype == "bool":
                raise TensorExprError(f"kernel {func.name}: tensor {t.name} is bool; GPU kernels "
                                      "take numeric tensors only")
        fnty = ir.FunctionType(ir.VoidType(), [GLOBAL] * len(args))
        self.fn = ir.Function(module, fnty, name=func.name)
        self.fn.calling_convention = "ptx_kernel"
        self.fn.attributes.add("nounwind")
        self.ptrs: dict[str, ir.Value] = {}
        self.tensors: dict[str, object] = {}  # type: ignore[assignment]
        for t, arg in zip(args, self.fn.args, strict=True):
            arg.name = t.name
            arg.add_attribute("noalias")
            arg.attributes.align = 16  # cuMemAlloc returns 256-byte aligned memory
            self.ptrs[t.name], self.tensors[t.name] = arg, t
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.loops: dict[E.Var, ir.Value] = {}
        self.math = fmath.MathEmitter(self.b, module)

    def run(self) -> None:
        self._temporaries()
        self._stmt(self.func.body)
        self.b.ret_void()

    def _temporaries(self) -> list[ir.Value]:
        for buf in self.func.buffers.values():
            ty, n = LL_TYPES[buf.dtype], _elems(buf.shape)
            if buf.scope == "shared":
                var = ir.GlobalVariable(self.module, ir.ArrayType(ty, n), f"{buf.name}",
                                        addrspace=SHARED_SPACE)
                var.linkage = "internal"
                var.initializer = ir.Constant(ir.ArrayType(ty, n), ir.Undefined)
                var.align = 16
                var.type = ir.PointerType(addrspace=SHARED_SPACE)  # opaque, as LLVM's IR has it
                ptr: ir.Value = var
            else:
                ptr = self.b.alloca(ty, size=n, name=buf.name)
                ptr.align = 16
            self.ptrs[buf.name], self.tensors[buf.name] = ptr, buf
        return []

    # -- statements -------------------------------------------------------------------------
    def _stmt(self, node: S.Stmt) -> None:
        if isinstance(node, S.Attr) and node.key == "barrier":
            self._barrier()
            self._stmt(node.body)
            self._barrier()
        elif isinstance(node, S.Attr):
            raise TypeError(f"GPU code generation: mark {node.key} {node.value} is not GPU IR")
        else:
            super()._stmt(node)

    def _barrier(self) -> None:
        fn = self._declare("llvm.nvvm.barrier0", ir.FunctionType(ir.VoidType(), []))
        self.b.call(fn, [])

    def _loop(self, node: S.For) -> None:
        if node.kind in THREAD_TAGS:
            self._bound(node)
        elif node.kind in ("unroll", "vectorize"):
            for k in range(node.extent):
                self.loops[node.var] = ir.Constant(I64, k)
                self._stmt(node.body)
            del self.loops[node.var]
        else:
            node = S.For(node.var, node.extent, node.body)  # a serial loop, no CPU hints
            super()._loop(node)

    def _bound(self, node: S.For) -> None:
        """The loop variable is the thread's (or block's) index; guarded where shorter."""
        level, axis = node.kind.split(".")
        name = f"llvm.nvvm.read.ptx.sreg.{_SREG[level]}.{axis}"
        reg = self.b.call(self._declare(name, ir.FunctionType(I32, [])), [])
        self.loops[node.var] = self.b.zext(reg, I64, name=node.var.name)
        if node.extent < self.dims[node.kind]:
            inside = self.b.icmp_unsigned("<", reg, ir.Constant(I32, node.extent))
            with self.b.if_then(inside):
                self._stmt(node.body)
        else:
            self._stmt(node.body)
        del self.loops[node.var]


__all__ = ["DATA_LAYOUT", "PTR", "TRIPLE", "emit_kernel"]
