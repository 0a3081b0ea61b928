"""A function in a forked child: its result or its exception comes back; leaving early kills it."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from compiler.quant.errors import QuantizationError
from compiler.quant.forked import WORKERS_ENV, Ends, Forked, can_fork

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


def test_ends_share_every_item_once_the_front_in_order_the_back_from_the_last() -> None:
    ends = Ends(40, reserved=5)
    with Forked(lambda: [(item, time.sleep(0.002))[0] for item in ends.back()]) as child:
        mine = [(item, time.sleep(0.001))[0] for item in ends.front()]
        theirs = child.join()
    assert mine == list(range(len(mine))) and len(mine) >= 5  # the reserved ones are the front's
    assert theirs == list(range(39, 39 - len(theirs), -1)) and theirs  # the child took some
    assert sorted(mine + theirs) == list(range(40))


def test_the_back_never_takes_a_reserved_item_nor_one_the_front_took() -> None:
    ends = Ends(6, reserved=4)
    assert list(ends.back()) == [5, 4] and list(ends.front()) == [0, 1, 2, 3] and not list(ends.back())
    ends = Ends(3)
    front = ends.front()
    assert next(front) == 0 and list(ends.back()) == [2, 1] and list(front) == []
