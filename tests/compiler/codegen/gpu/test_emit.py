"""NVPTX LLVM IR of a GPU kernel: the kernel convention, address spaces, special registers,
barriers, guards and unrolled loops."""

from __future__ import annotations

from compiler.codegen.gpu import emit_kernel
from compiler.lower.gpu import lower_gpu
from compiler.ops.gpu import Eltwise, Knobs, MatMul
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import gpu_preset
from compiler.te.tensor import compute, placeholder

SM80 = gpu_preset("sm_80")


def test_a_tiled_matmul_is_a_ptx_kernel_with_shared_tiles_and_barriers() -> None:
    op = MatMul(1, 128, 128, 32)
    knobs = Knobs(tile_y=64, tile_x=64, thread_y=8, thread_x=16, tile_k=16, vector=4)
    text = str(emit_kernel(op.lower(SM80, knobs)))
    assert 'target triple = "nvptx64-nvidia-cuda"' in text
    assert "define ptx_kernel void @\"matmul\"(ptr addrspace(1) noalias align 16" in text
    assert '@"a.shared" = internal addrspace(3) global [1024 x float] undef, align 16' in text
    assert "call void @\"llvm.nvvm.barrier0\"()" in text
    assert text.count("llvm.nvvm.read.ptx.sreg.tid.x") >= 1 and "llvm.nvvm.read.ptx.sreg.ctaid.y" in text
    assert "alloca float, i32 32" in text  # the 8x4 register tile of each thread


def test_a_loop_shorter_than_the_block_is_guarded() -> None:
    x = placeholder((4, 8), "float32", "x")
    mid = compute((4, 8), lambda i, j: x[i, j] * 2.0, "mid")
    s = Schedule(compute((4, 8), lambda i, j: mid[i, j] + 1.0, "out"))
    s.bind("out", "i", "blockIdx.x")
    s.bind("out", "j", "threadIdx.x")
    s.set_scope("mid", "shared")
    s.compute_at("mid", "out", "i")
    _, lane = s.split("mid", "j", 4)
    s.bind("mid", lane, "threadIdx.x")
    text = str(emit_kernel(lower_gpu(s, SM80, "k")))
    assert "icmp ult i32" in text and ", 4" in text  # tid.x < 4 around mid's copy


def test_vector_lanes_are_unrolled_with_constant_offsets() -> None:
    op = Eltwise("relu", (4, 64))
    knobs = op.space(SM80)[0]
    assert knobs.vector == 4
    text = str(emit_kernel(op.lower(SM80, knobs)))
    assert "br label" not in text.split("entry:")[1].split("ret void")[0] or "loop" not in text
    assert text.count("store float") == 4


def test_bool_tensors_are_refused() -> None:
    import pytest

    from compiler.errors import TensorExprError
    from compiler.te import expr as E

    flag = placeholder((8,), "bool", "flag")
    s = Schedule(compute((8,), lambda i: E.if_then_else(flag[i], 1.0, 0.0), "out"))
    s.bind("out", "i", "threadIdx.x")
    with pytest.raises(TensorExprError, match=r"kernel k: tensor flag is bool; GPU kernels take "
                                              r"numeric tensors "
                                              r"only"):
        emit_kernel(lower_gpu(s, SM80, "k"))
