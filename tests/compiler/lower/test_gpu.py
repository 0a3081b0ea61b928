"""The GPU lowering: launch, shared tiles between barriers, and every schedule it refuses, each
with its reason (a ScheduleError naming the record or stage)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compiler.errors import ScheduleError
from compiler.lower.gpu import lower_gpu, print_gpu
from compiler.schedule.schedule import Schedule
from compiler.target.gpu import gpu_preset
from compiler.te import expr as E
from compiler.te.tensor import Tensor, compute, placeholder, reduce_axis, sum

SM80 = gpu_preset("sm_80")


def _mm(m: int = 16, n: int = 16, k: int = 8, dtype: str = "float32") -> Schedule:
    a, b = placeholder((m, k), dtype, "a"), placeholder((k, n), dtype, "b")
    r = reduce_axis(k, "r")
    return Schedule(compute((m, n), lambda i, j: sum(a[i, r] * b[r, j], r), "out"))


def _tiled(tile: int = 4) -> Schedule:
    """out: 16x16 in 4x4 blocks of 4x4 threads, a and b through shared memory at r.o."""
    s = _mm()
    io, ii = s.split("out", "i", tile)
    jo, ji = s.split("out", "j", tile)
    ro, ri = s.split("out", "r", 4)
    s.reorder("out", io, jo, ii, ji, ro, ri)
    for axis, tag in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"), (ji, "threadIdx.x")):
        s.bind("out", axis, tag)
    for name in ("a", "b"):
        cache = s.cache_read(name, "shared", ["out"])
        s.compute_at(cache, "out", ro)
        x, y = s.stage(cache).leaves
        s.bind(cache, x, "threadIdx.y")
        s.bind(cache, y, "threadIdx.x")
    return s


def test_tiled_matmul_prints_its_launch_tiles_and_barriers() -> None:
    text = print_gpu(lower_gpu(_tiled(), SM80, "mm"))
    lines = text.splitlines()
    assert lines[0] == ("kernel mm(a: float32[16, 8], b: float32[8, 16], out: float32[16, 16]) "
                        "grid=[4, 4, 1] block=[4, 4, 1]")
    assert lines[1:3] == ["  shared a.shared: float32[4, 4]", "  shared b.shared: float32[4, 4]"]
    assert "  for blockIdx.y out.i.o in 0..4:" in lines
    assert len([line for line in lines if "// barrier shared" in line]) == 2
    body = "\n".join(lines)
    assert ("a.shared[a.shared.i0, a.shared.i1] = a[(a.shared.i0 + (out.i.o * 4)), (a.shared.i1 + "
            "(out.r.o * 4))]") in body


def test_shared_bytes_and_launch() -> None:
    kernel = lower_gpu(_tiled(), SM80)
    assert kernel.shared_bytes == 2 * 4 * 4 * 4
    assert kernel.grid == (4, 4, 1) and kernel.block == (4, 4, 1) and kernel.threads == 16


def _two_roots(s: Schedule) -> None:
    t = s.cache_write("out", "local")
    s.bind(t, s.stage(t).leaves[0], "blockIdx.x")


def _serial_outside(s: Schedule) -> None:
    s.bind("out", "j", "blockIdx.x")


def _threads_outside_blocks(s: Schedule) -> None:
    s.bind("out", "i", "threadIdx.x")
    s.bind("out", "j", "blockIdx.x")


def _too_many_threads(s: Schedule) -> None:
    s.bind("out", "i", "threadIdx.y")
    s.bind("out", "j", "threadIdx.x")


def _deep_z(s: Schedule) -> None:
    s.bind("out", "i", "threadIdx.z")


def _wide_grid(s: Schedule) -> None:
    s.bind("out", "i", "blockIdx.y")


def _attached_block(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "shared", ["out"])
    s.compute_at(c, "out", "j")
    s.bind(c, s.stage(c).leaves[0], "blockIdx.z")


def _local_threads(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "local", ["out"])
    s.compute_at(c, "out", "j")
    s.bind(c, s.stage(c).leaves[0], "threadIdx.x")


def _unbound_tag(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "shared", ["out"])
    s.compute_at(c, "out", "j")
    s.bind(c, s.stage(c).leaves[0], "threadIdx.y")


def _long_fetch(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("b", "shared", ["out"])
    s.compute_at(c, "out", "i")
    s.bind(c, s.stage(c).leaves[0], "threadIdx.x")


def _bound_out(s: Schedule) -> None:
    s.bind("out", "i", "blockIdx.x")
    s.bind("out", "j", "threadIdx.x")


def _long_unroll(s: Schedule) -> None:
    _bound_out(s)
    s.unroll("out", "r")


def _vector_outer(s: Schedule) -> None:
    s.bind("out", "i", "blockIdx.x")
    s.vectorize("out", "j")


def _global_temp(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "global", ["out"])
    s.compute_at(c, "out", "j")


def _accel_scope(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "inp", ["out"])
    s.compute_at(c, "out", "j")


def _big_local(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("b", "local", ["out"])
    s.compute_at(c, "out", "i")


def _guarded_barrier(s: Schedule) -> None:
    _bound_out(s)
    c = s.cache_read("a", "local", ["out"])
    s.compute_at(c, "out", "j")
    d = s.cache_read("b", "shared", ["out"])
    s.compute_at(d, "out", "j")
    x = s.split("out", "r", 2)[0]
    s.compute_at(d, "out", x)


def _pragma(s: Schedule) -> None:
    s.pragma("out", "i", "alu")


CASES: list[tuple[Callable[[Schedule], None], tuple[int, int, int], str]] = [
    (_two_roots, (16, 16, 8),
     r"stages out.local, out are computed at the root: a GPU kernel launches one grid for its one output"),
    (_serial_outside, (16, 16, 8), r"bind\(out, j, blockIdx.x\): the loop lies inside a loop that "
                                   r"is not bound to "
                                   r"blocks; bound loops must be the outermost, blocks outside threads"),
    (_threads_outside_blocks, (16, 16, 8), r"bind\(out, j, blockIdx.x\): the loop lies inside"),
    (_too_many_threads, (64, 32, 8), r"stage out: 2048 threads per block, more than the 1024 the "
                                     r"sm_80 allows"),
    (_deep_z, (128, 1, 8), r"stage out: threadIdx.z extent 128 is more than 64"),
    (_wide_grid, (70000, 1, 1), r"stage out: blockIdx.y extent 70000 is more than 65535"),
    (_attached_block, (16, 16, 8), r"bind\(a.shared, i0, blockIdx.z\): only the output stage binds blocks"),
    (_local_threads, (16, 16, 8), r"bind\(a.local, i0, threadIdx.x\): a local stage is per thread "
                                  r"and cannot be "
                                  r"spread over threads"),
    (_unbound_tag, (16, 16, 8), r"bind\(a.shared, i0, threadIdx.y\): the output does not bind "
                                r"threadIdx.y, so the "
                                r"block has no such threads"),
    (_long_fetch, (16, 16, 32), r"bind\(b.shared, i0, threadIdx.x\): extent 32 is more than the block's 16 "
                                r"threads"),
    (_long_unroll, (16, 16, 128), r"unroll\(out, r\): 128 iterations, more than 64 to unroll"),
    (_vector_outer, (16, 16, 8), r"vectorize\(out, j\): not the innermost loop of out"),
    (_global_temp, (16, 16, 8), r"stage a.global would be stored in global memory: on the GPU only "
                                r"the output "
                                r"is; inline it or cache it in shared or local"),
    (_accel_scope, (16, 16, 8), r"stage a.inp would be stored in accelerator scope inp"),
    (_big_local, (16, 16, 32), r"stage b.local in scope local holds 512 elements per thread, more "
                               r"than the 255 "
                               r"registers a thread has"),
    (_pragma, (16, 16, 8), r"stage out: pragma, tensorize and virtual_thread are accelerator records"),
]


@pytest.mark.parametrize("schedule, shape, message", CASES, ids=[c[0].__name__ for c in CASES])
def test_refused_schedules_say_why(schedule: Callable[[Schedule], None], shape: tuple[int, int, int],
                                   message: str) -> None:
    s = _mm(*shape)
    schedule(s)
    with pytest.raises(ScheduleError, match=message):
        lower_gpu(s, SM80)


def test_shared_tile_over_the_limit() -> None:
    s = _mm(16, 16, 16384)
    _bound_out(s)
    c = s.cache_read("a", "shared", ["out"])
    s.compute_at(c, "out", "i")
    with pytest.raises(ScheduleError, match=r"shared tiles a.shared\[1, 16384\] need 65536 bytes, "
                                            r"more than the "
                                            r"49152 a block holds on sm_80"):
        lower_gpu(s, SM80)


def test_barrier_under_a_guard_is_refused() -> None:
    """A shared stage inside a thread loop shorter than the block: not every thread would reach
    its barriers."""
    a, b = placeholder((4, 8), "float32", "a"), placeholder((8,), "float32", "b")
    mid = compute((4, 8), lambda i, j: a[i, j] * b[j], "mid")
    s = Schedule(compute((4, 8), lambda i, j: mid[i, j] + 1.0, "out"))
    s.bind("out", "i", "blockIdx.x")
    s.bind("out", "j", "threadIdx.x")
    s.set_scope("mid", "shared")
    s.compute_at("mid", "out", "i")
    _, lane = s.split("mid", "j", 4)
    s.bind("mid", lane, "threadIdx.x")
    c = s.cache_read("b", "shared", ["mid"])
    s.compute_at(c, "mid", lane)
    with pytest.raises(ScheduleError, match=r"stage b.shared in scope shared is computed inside "
                                            r"loop j.i, which "
                                            r"only 4 of 8 threads run: its barriers would not be reached"):
        lower_gpu(s, SM80)


def _scaled(shape: tuple[int, int] = (8, 16)) -> Schedule:
    x = placeholder(shape, "float32", "x")
    return Schedule(compute(shape, lambda i, j: x[i, j] * E.const(2.0, "float32"), "out"))


def test_vector_lanes_are_two_or_four() -> None:
    s = _scaled()
    s.bind("out", "i", "blockIdx.x")
    jo, ji = s.split("out", "j", 8)
    s.bind("out", jo, "threadIdx.x")
    s.vectorize("out", ji)
    with pytest.raises(ScheduleError, match=r"vectorize\(out, j.i\): a vector access is 2 or 4 "
                                            r"float32 lanes, "
                                            r"not 8 of float32"):
        lower_gpu(s, SM80)


def test_vector_lanes_must_be_contiguous() -> None:
    s = _scaled()
    io, ii = s.split("out", "i", 4)
    s.reorder("out", "j", io, ii)
    s.bind("out", "j", "blockIdx.x")
    s.bind("out", io, "threadIdx.x")
    s.vectorize("out", ii)
    with pytest.raises(ScheduleError, match=r"vectorize\(out, i.i\): i.i does not run along the "
                                            r"last dimension "
                                            r"of out with stride 1, so its elements are not contiguous"):
        lower_gpu(s, SM80)


def test_wide_types_are_refused() -> None:
    s = _mm(4, 4, 4, "int64")
    with pytest.raises(ScheduleError, match=r"stage out: the GPU kernels compute 8- to 32-bit "
                                            r"values, not int64"):
        lower_gpu(s, SM80)


def test_inputs_must_name_the_placeholders() -> None:
    s = _tiled()
    with pytest.raises(ScheduleError, match=r"inputs \['a'\] do not match the schedule's placeholders"):
        lower_gpu(s, SM80, inputs=[s.inputs["a"]])


def test_stride_check_follows_fused_indices() -> None:
    """A vector lane split off the last axis before fusing stays contiguous (the fused index is
    not affine, the lane's stride still is 1)."""
    x = placeholder((8, 16), "float32", "x")
    out: Tensor = compute((8, 16), lambda i, j: x[i, j] * E.const(2.0, "float32"), "out")
    s = Schedule(out)
    jo, ji = s.split("out", "j", 4)
    f = s.fuse("out", "i", jo)
    bo, bi = s.split("out", f, 8)
    s.bind("out", bo, "blockIdx.x")
    s.bind("out", bi, "threadIdx.x")
    s.vectorize("out", ji)
    kernel = lower_gpu(s, SM80)
    assert kernel.block == (8, 1, 1) and "for vectorize out.j.i in 0..4:" in print_gpu(kernel)
