"""A local process pool with a time limit per task, where a hung or crashed task costs only its
own result (a crash in `ProcessPoolExecutor` would fail every pending future).

Each worker is a process with a pipe.  A task past its limit has its worker killed and replaced;
a worker that dies (a segfault in a simulator) is replaced too; either way the task's result is a
failure record and the other tasks go on.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar, cast

Result = dict[str, Any]  # the result of a function that says nothing else (`failure` builds these)
R = TypeVar("R")  # what the pool's function returns
Failure = Callable[[str, str], Any]  # (status, reason) -> a result of the function's type


def failure(status: str, reason: str) -> Result:
    """The result of a task that returned nothing: status 'timeout', 'crash' or 'error'."""
    return {"status": status, "error": reason}


@dataclass
class _Worker:
    process: Any  # multiprocessing.Process of the pool's context
    conn: Connection
    task: int | None = None
    deadline: float = 0.0


def _serve(conn: Connection, fn: Callable[[Any], Any], fail: Failure) -> None:
    while True:
        try:
            item = conn.recv()
        except EOFError:
            return
        if item is None:
            return
        try:
            result = fn(item)
        except Exception as exc:  # a bug in fn: reported as this task's failure
            result = fail("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        conn.send(result)


class Pool(Generic[R]):
    """`run(items)` yields (index, result) as tasks finish; `fn` must be picklable (a module-level
    function) unless the context is 'fork'.  workers=0 runs in this process, with no limit.
    A task that gives no result (its time ran out, its worker died, `fn` raised) gets
    `fail(status, reason)`, of `fn`'s result type; the default `fail` is `failure` (a dict).

    The default context is 'fork': a worker starts in milliseconds with the compiler and the
    timing model already imported, and scripts need no `__main__` guard ('forkserver' and
    'spawn' re-import the main module).  Workers only compile and simulate, so the threads a
    forking parent may hold (BLAS, OpenMP in the cost model) are never used in them."""

    def __init__(self, fn: Callable[[Any], R], *, workers: int = 2, timeout_s: float = 60.0,
                 context: str = "fork", fail: Callable[[str, str], R] | None = None) -> None:
        if workers < 0:
            raise ValueError(f"workers must be at least 0, not {workers}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        self.fn, self.workers, self.timeout_s = fn, workers, timeout_s
        self.fail = fail if fail is not None else cast(Callable[[str, str], R], failure)
        self.ctx = multiprocessing.get_context(context) if workers else None
        self.idle: list[_Worker] = []

    def __enter__(self) -> Pool[R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for w in self.idle:
            with contextlib.suppress(OSError):
                w.conn.send(None)
            w.process.join(timeout=5)
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
        self.idle = []

    def _start(self) -> _Worker:
        assert self.ctx is not None
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_serve, args=(child, self.fn, self.fail), daemon=True)  # type: ignore[attr-defined]
        process.start()
        child.close()
        return _Worker(process, parent)

    def _retire(self, w: _Worker) -> None:
        w.process.kill()
        w.process.join()
        w.conn.close()

    def run(self, items: Sequence[Any]) -> Iterator[tuple[int, R]]:
        if not self.workers:
            for i, item in enumerate(items):
                try:
                    yield i, self.fn(item)
                except Exception as exc:
                    yield i, self.fail("error", f"{type(exc).__name__}: {exc}")
            return
        busy: list[_Worker] = []
        try:
            yield from self._dispatch(items, busy)
        finally:  # the caller stopped early: tasks still running are abandoned
            for w in busy:
                self._retire(w)

    def _dispatch(self, items: Sequence[Any], busy: list[_Worker]) -> Iterator[tuple[int, R]]:
        pending = deque(range(len(items)))
        while pending or busy:
            while pending and len(busy) < self.workers:
                w = self.idle.pop() if self.idle else self._start()
                w.task, w.deadline = pending.popleft(), time.monotonic() + self.timeout_s
                w.conn.send(items[w.task])
                busy.append(w)
            soonest = min(w.deadline for w in busy)
            ready = wait([w.conn for w in busy], timeout=max(soonest - time.monotonic(), 0.0))
            for w in [w for w in busy if w.conn in ready]:
                busy.remove(w)
                task = w.task
                assert task is not None
                try:
                    result = w.conn.recv()
                except (EOFError, OSError):
                    w.process.join(timeout=5)
                    self._retire(w)
                    yield task, self.fail("crash", f"the worker died (exit code {w.process.exitcode})")
                    continue
                self.idle.append(w)
                yield task, result
            now = time.monotonic()
            for w in [w for w in busy if w.deadline <= now]:
                busy.remove(w)
                self._retire(w)
                assert w.task is not None
                reason = f"no result within {self.timeout_s:g} s; the worker was killed"
                yield w.task, self.fail("timeout", reason)
