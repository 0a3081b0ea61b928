"""A function in a forked child: its result or its exception comes back; leaving early kills it."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from compiler.quant.errors import QuantizationError
from compiler.quant.forked import WORKERS_ENV, Forked, can_fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def test_the_childs_result_comes_back_while_the_caller_works() -> None:
    data = np.arange(300_000, dtype=np.int64)  # shared by the fork; more than a pipe buffer back
    with Forked(lambda: (os.getpid(), data * 2)) as child:
        mine = int(data.sum())
        pid, doubled = child.join()
    assert pid != os.getpid() and mine == 44_999_850_000
    np.testing.assert_array_equal(doubled, data * 2)


def _fails() -> None:
    raise QuantizationError("calibration: 'x' holds NaN values")


def _unpicklable() -> None:
    class Local(Exception):
        pass

    raise Local("made here")


def test_the_childs_exception_is_raised_by_join() -> None:
    with Forked(_fails) as child, pytest.raises(QuantizationError, match=r"^calibration: 'x' holds NaN"):
        child.join()
    with Forked(_unpicklable) as child, pytest.raises(RuntimeError, match=r"^Local: made here$"):
        child.join()


def test_leaving_early_kills_the_child() -> None:
    with pytest.raises(ValueError, match="the caller failed"), Forked(lambda: time.sleep(60)) as child:
        raise ValueError("the caller failed")
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped already


def test_one_worker_when_the_environment_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert not can_fork()
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # a test runner's own threads aside
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setenv(WORKERS_ENV, "2")
    assert can_fork()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not can_fork()


def test_no_fork_beside_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(threading, "active_count", lambda: 2)
    assert not can_fork()


def test_a_child_that_dies_without_a_word_is_an_error() -> None:
    with Forked(lambda: os._exit(3)) as child, \
            pytest.raises(RuntimeError, match=r"^the forked calibration worker died without a result$"):
        child.join()


def test_no_fork_beside_other_threads() -> None:
    started, stop = threading.Event(), threading.Event()

    def wait() -> None:
        started.set()
        stop.wait()

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        started.wait()
        assert not can_fork()
    finally:
        stop.set()
        thread.join()
