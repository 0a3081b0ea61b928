"""A function run in a forked child process while the caller works on, its result (or its
exception) pickled back through a pipe: calibration's second core (compiler.quant.calibrate).

The child is a fork, so it shares the caller's graph and inputs without pickling them; it ends
with os._exit and so runs no exit handlers and flushes none of the caller's buffers.

    with Forked(fn) as child:   # fn() starts in the child
        ...                     # the caller's own share of the work
        value = child.join()    # fn's result, or fn's exception raised here
    # leaving the block early (an exception) kills the child

Work of many items shared between the two: `Ends(count)` made before the fork hands the caller
items from the front (`front()`, in order) and the child items from the back (`back()`), each
taking the next when it is ready for it, until they meet; so both finish together whatever
each item costs and whatever else runs on the machine.
"""

from __future__ import annotations

import contextlib
import mmap
import multiprocessing
import os
import pickle
import signal
import struct
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Generic, TypeVar

from compiler.processes import fork_may_help

T = TypeVar("T")

WORKERS_ENV = "CODESIGN_CALIBRATION_WORKERS"  # "1" keeps calibration in one process


def can_fork() -> bool:
    """Whether a second process may help: the environment does not say 1 worker, and
    `compiler.processes.fork_may_help` (fork exists, no pool worker, no other thread, two CPUs)."""
    return os.environ.get(WORKERS_ENV, "").strip() != "1" and fork_may_help()


class Forked(Generic[T]):
    """`fn` running in a forked child (see the module doc)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read)
            _child(fn, write)
        os.close(write)
        self.pid, self.fd = pid, read
        self.done = False

    def join(self) -> T:
        """Wait for the child; its result, or its exception raised here."""
        with os.fdopen(self.fd, "rb") as pipe:
            data = pipe.read()
        os.waitpid(self.pid, 0)
        self.done = True
        if not data:
            raise RuntimeError("the forked calibration worker died without a result")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()


class Ends:
    """Items 0..count-1 shared out from both ends (see the module doc): the caller's `front()`
    yields 0, 1, ... and the child's `back()` count-1, count-2, ... (never an item below
    `reserved`: those are the front's alone), each item once. The two counters live in memory
    shared across the fork, under a lock made before it."""

    def __init__(self, count: int, reserved: int = 0) -> None:
        self._lock = multiprocessing.Lock()
        self._ends = mmap.mmap(-1, 16)  # anonymous and shared: [next front item, one past the back]
        struct.pack_into("qq", self._ends, 0, 0, count)
        self.reserved = reserved

    def front(self) -> Iterator[int]:
        while (item := self._take(back=False)) is not None:
            yield item

    def back(self) -> Iterator[int]:
        while (item := self._take(back=True)) is not None:
            yield item

    def _take(self, back: bool) -> int | None:
        with self._lock:
            front, end = struct.unpack_from("qq", self._ends)
            if back:
                if end - 1 < max(front, self.reserved):
                    return None
                struct.pack_into("q", self._ends, 8, end - 1)
                return end - 1
            if front >= end:
                return None
            struct.pack_into("q", self._ends, 0, front + 1)
            return front


def _child(fn: Callable[[], T], fd: int) -> None:
    try:
        try:
            payload = pickle.dumps((True, fn()), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # every failure goes back to the caller
            try:
                payload = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exception that does not pickle
                payload = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(payload)
    finally:
        os._exit(0)
