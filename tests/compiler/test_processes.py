"""fork_may_help: each condition that rules a forked helper out."""

from __future__ import annotations

import multiprocessing
import os
import threading

import pytest

from compiler.processes import fork_may_help


@pytest.fixture
def helpful(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Two CPUs and one thread (a test runner's own threads aside): a fork may help."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    assert fork_may_help()
    return monkeypatch


def test_another_thread_rules_it_out(helpful: pytest.MonkeyPatch) -> None:
    helpful.setattr(threading, "active_count", lambda: 2)
    assert not fork_may_help()


def test_one_cpu_rules_it_out(helpful: pytest.MonkeyPatch) -> None:
    helpful.setattr(os, "sched_getaffinity", lambda _pid: {3}, raising=False)
    assert not fork_may_help()


def test_a_pool_worker_rules_it_out(helpful: pytest.MonkeyPatch) -> None:
    helpful.setattr(multiprocessing.current_process(), "daemon", True, raising=False)
    assert not fork_may_help()


def test_no_fork_rules_it_out(helpful: pytest.MonkeyPatch) -> None:
    helpful.delattr(os, "fork")
    assert not fork_may_help()
