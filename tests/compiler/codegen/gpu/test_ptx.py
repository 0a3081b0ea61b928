"""PTX emission and offline assembly with ptxas (no GPU needed): every operator of the sample
assembles for sm_80 and sm_90 within the launch's register budget and without spills."""

from __future__ import annotations

import pytest

from compiler.codegen.gpu import assemble, emit_kernel, find_ptxas, parse_ptxas, to_ptx
from compiler.ops.gpu import SAMPLE, Conv2d, Eltwise, GpuOp, Knobs, MatMul
from compiler.target.gpu import gpu_preset
from hw.verilog import ToolchainError

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas: install the gpu extra "
                                 "(nvidia-cuda-nvcc-cu12) or put CUDA's bin on PATH")

PTXAS_OUTPUT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul' for 'sm_80'
ptxas info    : Function properties for matmul
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 8192 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'relu' for 'sm_80'
ptxas info    : Function properties for relu
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, 368 bytes cmem[0]
"""


def test_parse_ptxas_reads_registers_spills_and_shared_memory() -> None:
    first, second = parse_ptxas(PTXAS_OUTPUT)
    assert (first.kernel, first.arch, first.registers) == ("matmul", "sm_80", 96)
    assert (first.spill_store_bytes, first.spill_load_bytes, first.stack_bytes) == (4, 12, 8)
    assert first.shared_bytes == 8192
    assert (second.kernel, second.registers, second.shared_bytes) == ("relu", 18, 0)
    assert second.spill_store_bytes == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_names_its_target_and_kernel(arch: str) -> None:
    target = gpu_preset(arch)
    ptx = to_ptx(emit_kernel(Eltwise("relu", (256,)).lower(target)), target)
    assert ".version 8.0" in ptx and f".target {arch}" in ptx
    assert ".visible .entry eltwise(" in ptx


@needs_ptxas
def test_ptxas_rejects_bad_ptx_with_its_message() -> None:
    with pytest.raises(ToolchainError, match=r"ptxas -arch=sm_80 rejected the PTX: .*"):
        assemble(".version 8.0\n.target sm_80\n.address_size 64\nthis is not ptx\n", "sm_80")


def _check(op: GpuOp, arch: str, knobs: Knobs | None = None) -> None:
    target = gpu_preset(arch)
    kernel = op.lower(target, knobs)
    cubin, infos = assemble(to_ptx(emit_kernel(kernel), target), arch)
    assert cubin and len(infos) == 1
    info = infos[0]
    assert (info.kernel, info.arch) == (op.op, arch)
    assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0 and info.stack_bytes == 0, info
    assert 8 <= info.registers <= target.registers_per_thread, info
    assert info.registers * kernel.threads <= target.registers_per_block, (info, kernel.block)
    assert info.shared_bytes == kernel.shared_bytes <= target.shared_bytes_per_block


OTHER_KINDS = [  # the schedule kind the sample's defaults do not take, with a vectorised variant
    (Conv2d((1, 64, 56, 56), (64, 64, 3, 3), pad=(1, 1, 1, 1), bias=True), Knobs(threads=256, shared=False)),
    (MatMul(1, 128, 128, 128), Knobs(threads=128, shared=False)),
    (MatMul(1, 256, 256, 64), Knobs(tile_y=64, tile_x=64, thread_y=8, thread_x=16, tile_k=16, vector=4)),
    (Eltwise("add", (1, 64, 56, 56), (1, 64, 56, 56)), Knobs(threads=256, vector=4)),
]


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("op, knobs", OTHER_KINDS, ids=["conv2d-direct", "matmul-plain", "matmul-64x64",
                                                         "eltwise-vector4"])
def test_other_schedule_kinds_assemble_within_bounds(op: GpuOp, knobs: Knobs, arch: str) -> None:
    _check(op, arch, knobs)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("op", SAMPLE, ids=[f"{op.op}{i}" for i, op in enumerate(SAMPLE)])
def test_every_sample_operator_assembles_within_bounds(op: GpuOp, arch: str) -> None:
    _check(op, arch)


def test_a_missing_ptxas_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.codegen.gpu import ptx

    monkeypatch.setattr(ptx, "find_ptxas", lambda: None)
    with pytest.raises(ToolchainError, match=r"ptxas not found: install the gpu extra "
                                             r"\(nvidia-cuda-nvcc-cu12\) "
                                             r"or put CUDA's bin on PATH"):
        ptx.assemble(".version 8.0\n", "sm_80")
