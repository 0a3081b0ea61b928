"""Whether a forked helper process may run beside this one now, and can help: the one rule that
calibration's worker (compiler.quant.forked) and the kernels' JIT helper
(compiler.codegen.cpu.ahead) both follow."""

from __future__ import annotations

import multiprocessing
import os
import threading


def fork_may_help() -> bool:
    """Fork exists, this process is no pool's worker (a sweep's workers have the cores already)
    and runs no other thread (a fork copies only this one: another's locks would stay held in
    the child), and it may run on at least two CPUs."""
    if not hasattr(os, "fork"):
        return False
    if multiprocessing.current_process().daemon or threading.active_count() > 1:
        return False
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return len(cpus) >= 2
