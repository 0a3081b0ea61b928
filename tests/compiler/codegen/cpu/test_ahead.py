"""compiling_ahead: kernels compiled in a forked helper give the caller's own object code and
results; the caller takes back what the helper has not started; a failing helper, a kernel
called early and an exception inside the block cost nothing but time; when it is used at all."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from compiler import te
from compiler.codegen.cpu import ahead, compile_func, set_disk_cache
from compiler.codegen.cpu import kernel as kernel_module
from compiler.codegen.cpu.jit import cache_key, compile_ir, object_code
from compiler.codegen.llvm.emit import emit_module
from compiler.lower.cpu import lower_host
from compiler.schedule import Schedule
from compiler.target.cpu import host_target

_SALT = iter(range(10**6))  # every test's kernels are new to this process's cache


def _kernel(factor: float, n: int):  # type: ignore[no-untyped-def]
    """A distinct kernel: out = x * factor + salt (the salt keeps it out of the process cache)."""
    salt = float(next(_SALT)) + os.getpid() * 1e-3
    x = te.placeholder((3, n), "float32", "x")
    out = te.compute((3, n), lambda i, j: x[i, j] * factor + salt, "out")
    return lower_host(Schedule(out), f"k{n}"), salt


@pytest.fixture
def helper(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The helper turned on, as on a two-CPU machine with one thread (a test runner's aside)."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    ahead.use(True)
    yield
    ahead.use(False)


def _check(kernel, factor: float, salt: float, n: int) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(3 * n, dtype=np.float32).reshape(3, n)
    assert np.array_equal(kernel(x), x * np.float32(factor) + np.float32(salt))


def test_helper_compiles_the_callers_object_code(helper: None) -> None:
    funcs = [(_kernel(1.5 + k, 4 + k), 1.5 + k, 4 + k) for k in range(6)]
    threads = len(threading.enumerate())
    with ahead.compiling_ahead():
        batch = ahead.current()
        assert batch is not None
        kernels = [compile_func(f) for (f, _), _, _ in funcs]
        jobs = list(batch.jobs.values())
        jobs[0].future.result(timeout=120)  # the helper has made the first one at least
    assert len(jobs) == 6 and ahead.current() is None and batch.pool is None
    assert len(threading.enumerate()) == threads  # the pool's threads joined: a later fork is safe
    before = kernel_module.cache_info()  # every kernel is in the process cache once the block ends
    again = [compile_func(f) for (f, _), _, _ in funcs]
    after = kernel_module.cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (6, 0)
    assert [a.jit for a in again] == [job.jit for job in jobs]
    helped = [j for j in jobs if not j.future.cancelled()]
    assert helped, "the helper compiled none of the kernels"
    for (( _, salt), factor, n), kernel in zip(funcs, kernels, strict=True):
        _check(kernel, factor, salt, n)
        assert not kernel.jit.from_disk and kernel.optimized_ir
    for job in helped:  # byte for byte what this process makes of the same IR
        assert job.future.result() == object_code(job.ir_text, job.opt_level)


def test_one_key_is_one_job_and_counts_as_a_hit(helper: None) -> None:
    func, salt = _kernel(2.0, 5)
    before = kernel_module.cache_info()
    with ahead.compiling_ahead():
        a, b = compile_func(func), compile_func(func)
        batch = ahead.current()
        assert batch is not None and len(batch.jobs) == 1
    after = kernel_module.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    assert a.jit is b.jit
    _check(b, 2.0, salt, 5)


def test_a_kernel_called_inside_the_block_is_resolved_then(helper: None) -> None:
    func, salt = _kernel(3.0, 7)
    with ahead.compiling_ahead():
        kernel = compile_func(func)
        _check(kernel, 3.0, salt, 7)  # before the block ends
    _check(kernel, 3.0, salt, 7)


def _broken(ir_text: str, opt_level: int) -> None:
    raise RuntimeError("helper broke")


def test_a_failing_helper_costs_only_time(helper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "object_code", _broken)  # the fork inherits it
    funcs = [_kernel(0.5, 3 + k) for k in range(3)]
    with ahead.compiling_ahead():
        kernels = [compile_func(f) for f, _ in funcs]
        batch = ahead.current()
        assert batch is not None
        first = next(iter(batch.jobs.values())).future
        with pytest.raises(RuntimeError, match="helper broke"):
            first.result(timeout=120)
    for (_, salt), kernel, k in zip(funcs, kernels, range(3), strict=True):
        _check(kernel, 0.5, salt, 3 + k)


def test_an_exception_in_the_block_leaves_usable_kernels(helper: None) -> None:
    func, salt = _kernel(4.0, 6)
    with pytest.raises(KeyError, match="planning failed"), ahead.compiling_ahead():
        kernel = compile_func(func)
        raise KeyError("planning failed")
    assert ahead.current() is None
    _check(kernel, 4.0, salt, 6)


def test_helper_objects_go_to_the_disk_cache(helper: None, tmp_path: Path) -> None:
    set_disk_cache(tmp_path)
    try:
        func, _ = _kernel(5.0, 8)
        with ahead.compiling_ahead():
            kernel = compile_func(func)
        key = kernel.jit.key
        assert not kernel.jit.from_disk
        assert (tmp_path / f"{key}.o").is_file()
        ir = str(emit_module(func, host_target().triple, False))
        assert cache_key(ir, 3) == key and compile_ir(ir, func.name).from_disk
        with ahead.compiling_ahead():  # an object on disk is loaded here, not handed over
            compile_func(func)
            batch = ahead.current()
            assert batch is not None and not batch.jobs
    finally:
        set_disk_cache(None)


def test_when_the_helper_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    ahead.use(False)
    assert not ahead.can_help()  # the library's default
    for value, on in (("", True), ("1", True), ("off", False), ("0", False), ("OFF ", False)):
        monkeypatch.setenv(ahead.ENV, value)
        ahead.use_default()
        assert ahead.can_help() is on, value
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # another thread: no fork
    assert not ahead.can_help()
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)  # one CPU
    assert not ahead.can_help()
    with ahead.compiling_ahead():
        assert ahead.current() is None
    ahead.use(False)


def test_blocks_nest_into_the_outer_batch(helper: None) -> None:
    with ahead.compiling_ahead():
        outer = ahead.current()
        with ahead.compiling_ahead():
            assert ahead.current() is outer
        assert ahead.current() is outer
    assert ahead.current() is None
