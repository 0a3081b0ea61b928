"""HostKernel: argument checks with exact messages, the in-process cache, the disk cache, the
host target."""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

from compiler import te
from compiler.codegen.cpu import HostKernel, cache_info, compile_func, set_disk_cache
from compiler.codegen.cpu.jit import (
    CACHE_ENV,
    _disk_dir,
    compile_ir,
    default_cache_dir,
    use_default_disk_cache,
)
from compiler.lower.cpu import lower_host
from compiler.schedule import Schedule
from compiler.target.cpu import CpuTarget, host_target


def _scale(factor: float, n: int = 6):  # type: ignore[no-untyped-def]
    x = te.placeholder((2, n), "float32", "x")
    out = te.compute((2, n), lambda i, j: x[i, j] * factor, "out")
    return lower_host(Schedule(out), "scale")


def test_kernel_runs_into_given_or_fresh_outputs():
    kernel = compile_func(_scale(3.0))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert np.array_equal(kernel(x), x * 3)
    out = np.zeros((2, 6), np.float32)
    assert kernel(x, out=out) is out and np.array_equal(out, x * 3)
    assert repr(kernel) == "HostKernel(scale(x: float32[2, 6], out: float32[2, 6]))"


def test_wrong_arguments_are_rejected_with_their_names():
    kernel = compile_func(_scale(3.0))
    x = np.zeros((2, 6), np.float32)
    cases = [
        ((), {}, ValueError, r"kernel scale: expected 1 input arrays \(x\), got 0"),
        ((x, x), {}, ValueError, r"expected 1 input arrays \(x\), got 2"),
        ((x.astype(np.float64),), {}, ValueError, "input x has dtype float64, expected float32"),
        ((x[:1],), {}, ValueError, r"input x has shape \(1, 6\), expected \(2, 6\)"),
        ((np.zeros((6, 2), np.float32).T,), {}, ValueError, "input x is not C-contiguous"),
        (([[0.0] * 6] * 2,), {}, TypeError, "input x must be a numpy array, not list"),
        ((x,), {"out": np.zeros((2, 6), np.int32)}, ValueError, "output out has dtype int32, expected float"),
        ((x,), {"out": [x.copy(), x.copy()]}, ValueError, "expected 1 output arrays, got 2"),
        ((x,), {"out": x}, ValueError, "kernel scale: output out overlaps input x"),
    ]
    for args, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            kernel(*args, **kwargs)
    frozen = np.zeros((2, 6), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="output out is read-only"):
        kernel(x, out=frozen)


def test_equal_kernels_compile_once():
    before = cache_info()
    first = compile_func(_scale(1.25, n=7))
    again = compile_func(_scale(1.25, n=7))  # rebuilt from scratch: same IR, same key
    after = cache_info()
    assert again.jit is first.jit
    assert (after.misses - before.misses, after.hits - before.hits, after.size - before.size) == (1, 1, 1)
    other = compile_func(_scale(1.5, n=7))  # another constant is another kernel
    assert other.jit is not first.jit and cache_info().size == after.size + 1


def test_disk_cache_skips_optimisation_in_a_later_compile(tmp_path):
    text = compile_func(_scale(2.75, n=5)).llvm_ir
    set_disk_cache(tmp_path)
    try:
        fresh = compile_ir(text, "scale")
        assert not fresh.from_disk and list(tmp_path.glob("*.o")) == [tmp_path / f"{fresh.key}.o"]
        loaded = compile_ir(text, "scale")
    finally:
        set_disk_cache(None)
    assert loaded.from_disk and loaded.key == fresh.key and loaded.optimized_ir == ""
    kernel = HostKernel(_scale(2.75, n=5), loaded, text)  # the object that came from disk
    x = np.ones((2, 5), np.float32)
    assert np.array_equal(kernel(x), x * np.float32(2.75))


def test_opt_level_is_checked():
    with pytest.raises(ValueError, match="opt_level must be 0, 1, 2 or 3, not 5"):
        compile_func(_scale(3.0), opt_level=5)


def test_host_target_is_this_cpu():
    target = host_target()
    assert isinstance(target, CpuTarget) and target.name == "cpu" and host_target() is target
    assert target.cpu == llvm.get_host_cpu_name()
    assert target.features == llvm.get_host_cpu_features().flatten()
    assert target.triple == llvm.get_process_triple()


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_several_outputs_at_every_opt_level(opt_level):
    x = te.placeholder((5,), "float32", "x")
    k = te.reduce_axis(5, "k")
    top = te.compute((1,), lambda i: te.max_reduce(x[k], k), "top")
    low = te.compute((1,), lambda i: te.min_reduce(x[k], k), "low")
    kernel = compile_func(lower_host(Schedule([top, low]), "minmax"), opt_level)
    assert [a.name for a in kernel.outputs] == ["top", "low"]
    got = kernel(np.array([3, -1, 7, 2, 0], np.float32))
    assert isinstance(got, tuple) and [a.tolist() for a in got] == [[7.0], [-1.0]]
    both = np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="kernel minmax: output low overlaps output top"):
        kernel(np.zeros(5, np.float32), out=(both, both))


def test_the_environment_variable_names_a_cache_directory_made_on_first_write(tmp_path, monkeypatch):
    text = compile_func(_scale(3.25, n=6)).llvm_ir
    where = tmp_path / "new" / "kernels"
    monkeypatch.setenv(CACHE_ENV, str(where))
    fresh = compile_ir(text, "scale")
    assert not fresh.from_disk and (where / f"{fresh.key}.o").is_file()
    assert compile_ir(text, "scale").from_disk
    for off in ("off", "0", ""):
        monkeypatch.setenv(CACHE_ENV, off)
        assert not compile_ir(text, "scale").from_disk


def test_the_command_line_default_cache_unless_the_environment_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "kernels"
    try:
        monkeypatch.setenv(CACHE_ENV, "off")
        use_default_disk_cache()
        assert _disk_dir() is None
        monkeypatch.delenv(CACHE_ENV)
        use_default_disk_cache()
        assert _disk_dir() == tmp_path / "kernels" and _disk_dir().is_dir()
    finally:
        set_disk_cache(None)


@pytest.mark.parametrize("how", ["truncated", "empty", "another kernel's"])
def test_a_damaged_object_is_compiled_again_not_loaded(tmp_path, how):
    """A damaged object handed to MCJIT aborted the process; it is detected and replaced."""
    text = compile_func(_scale(4.5, n=3)).llvm_ir
    other = compile_func(_scale(5.5, n=3)).llvm_ir
    set_disk_cache(tmp_path)
    try:
        fresh = compile_ir(text, "scale")
        path = tmp_path / f"{fresh.key}.o"
        if how == "another kernel's":
            theirs = compile_ir(other, "scale")
            (tmp_path / f"{theirs.key}.o").replace(path)
        else:
            path.write_bytes(path.read_bytes()[:100] if how == "truncated" else b"")
        again = compile_ir(text, "scale")
        assert not again.from_disk and path.is_file()
        assert compile_ir(text, "scale").from_disk  # the replacement is sound
    finally:
        set_disk_cache(None)
    kernel = HostKernel(_scale(4.5, n=3), again, text)
    x = np.ones((2, 3), np.float32)
    assert np.array_equal(kernel(x), x * np.float32(4.5))
