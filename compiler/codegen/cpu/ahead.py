"""Host kernels compiled in a helper process while the caller goes on planning.

A model's compile (compiler.runtime.model.CompiledModel.compile) asks for a few dozen host kernels,
one after another, each some 50-150 ms of LLVM optimisation and code generation on one core, while
the machine's second core waits. Inside `compiling_ahead()`, `compile_func` hands each kernel it
must compile to one helper process (forked on the first such kernel) and returns at once a kernel
whose code comes later; the caller plans on. Leaving the block, the caller takes back the kernels
the helper has not started, from the last one down, and compiles them itself while the helper
finishes the others (it takes them in order, so the two meet in the middle); the helper's object
code comes back through the pool and is loaded as a disk cache's object would be (and kept in the
disk cache, when one is in use). A kernel called before that is resolved on the spot.

Nothing about the code changes: the helper runs the same passes on the same IR for the same
target machine (`jit.object_code`), so its object is the one the caller would have made. A helper
that fails or dies only costs the time: its kernels are compiled in the caller.

Off unless turned on: `use(True)` turns it on for this process, `use_default()` is the command
line's choice (on unless CODESIGN_JIT_HELPER says "off" or "0"). It is used only where a fork is
safe and helps: two CPUs or more, this process no pool's worker and running no other thread.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from compiler.codegen.cpu.jit import JitFunction, Made, compile_ir, object_code
from compiler.processes import fork_may_help

ENV = "CODESIGN_JIT_HELPER"
_OFF = ("0", "off", "no", "false")
_SETTING = {"on": False}


def use(on: bool) -> None:
    """Compile kernels ahead in a helper inside `compiling_ahead()` blocks (True) or not."""
    _SETTING["on"] = on


def use_default() -> None:
    """The command line's choice: on, unless CODESIGN_JIT_HELPER is "off" or "0"."""
    use(os.environ.get(ENV, "").strip().lower() not in _OFF)


def can_help() -> bool:
    """Whether a forked helper may run now: turned on, and `compiler.processes.fork_may_help`
    (fork exists, no pool worker, no other thread, at least two CPUs)."""
    return _SETTING["on"] and fork_may_help()


@dataclass(eq=False)
class Job:
    """One kernel handed to the helper: its IR, and its compiled function once resolved."""

    ir_text: str
    name: str
    opt_level: int
    future: Future[Made]
    keep: Callable[[JitFunction], JitFunction]  # the caller's process-wide kernel cache
    jit: JitFunction | None = field(default=None, repr=False)

    def result(self) -> JitFunction:
        """The compiled function: the helper's object loaded here, or compiled here when the helper
        had not started it (or failed); kept in the caller's cache as soon as it is made."""
        if self.jit is None:
            made = None
            if not self.future.cancel():
                with contextlib.suppress(Exception):  # the helper's failure: compiled here instead
                    made = self.future.result()
            self.jit = self.keep(compile_ir(self.ir_text, self.name, self.opt_level, made))
        return self.jit


class Batch:
    """The kernels of one `compiling_ahead()` block, and the helper that compiles them."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.pool: ProcessPoolExecutor | None = None

    def submit(self, key: str, ir_text: str, name: str, opt_level: int,
               keep: Callable[[JitFunction], JitFunction]) -> Job:
        """The job compiling this kernel (one per key): handed to the helper when it is new; `keep`
        files its compiled function where the caller looks kernels up."""
        job = self.jobs.get(key)
        if job is None:
            if self.pool is None:
                self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            job = Job(ir_text, name, opt_level, self.pool.submit(object_code, ir_text, opt_level), keep)
            self.jobs[key] = job
        return job

    def finish(self) -> None:
        """Resolve every job: the caller compiles those the helper has not started, last first,
        then loads the helper's."""
        jobs = list(self.jobs.values())
        for job in reversed(jobs):
            if job.jit is not None:
                continue
            if not job.future.cancel():
                break  # the helper takes jobs in order: it has started every earlier one
            job.result()
        for job in jobs:
            job.result()
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


_CURRENT: list[Batch] = []


def current() -> Batch | None:
    """The innermost `compiling_ahead()` block's batch, when a helper may compile for it."""
    return _CURRENT[-1] if _CURRENT else None


@contextlib.contextmanager
def compiling_ahead() -> Iterator[None]:
    """Inside: kernels are compiled in a helper where `can_help()` (see the module doc); leaving
    the block, all of them are ready. Elsewhere, or nested in another block, it changes nothing."""
    if _CURRENT or not can_help():
        yield
        return
    batch = Batch()
    _CURRENT.append(batch)
    try:
        yield
    except BaseException:
        _CURRENT.pop()
        batch.close()  # its kernels are compiled here when first called
        raise
    _CURRENT.pop()
    batch.finish()


__all__ = ["ENV", "Batch", "Job", "can_help", "compiling_ahead", "current", "use", "use_default"]
