"""Backends by name, so tools and tests pick a fidelity with a string, and ask what it can do
(`capabilities`) before building it (an RTL backend compiles Verilator on first use)."""

from __future__ import annotations

import importlib
from typing import Any

from hw.config import AcceleratorConfig
from hw.errors import InputError
from sim.backend import Backend, Capabilities, TracingBackend

# name -> "module:class"; the modules are imported only when asked for
_CLASSES = {
    "fsim": "sim.fsim:FunctionalSimulator",
    "timing": "sim.timing:TimingSimulator",
    "rtl": "sim.rtl.backend:RtlSimulator",
}
NAMES = tuple(_CLASSES)


def _class(name: str) -> Any:
    if name not in _CLASSES:
        raise InputError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}")
    module, cls = _CLASSES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def capabilities(name: str) -> Capabilities:
    """What backend `name` can do (see `sim.backend.Capabilities`)."""
    caps: Capabilities = _class(name).capabilities
    return caps


def having(capability: str) -> tuple[str, ...]:
    """The names of the backends whose `capability` (a field of Capabilities) holds."""
    return tuple(n for n in NAMES if getattr(capabilities(n), capability))


def make_backend(name: str, cfg: AcceleratorConfig, **options: Any) -> Backend:
    """`fsim` (options: seed), `timing` (options: see sim.timing.TimingSimulator) or `rtl`
    (options: see sim.rtl.backend.RtlSimulator)."""
    backend: Backend = _class(name)(cfg, **options)
    return backend


def make_tracing_backend(name: str, cfg: AcceleratorConfig, **options: Any) -> TracingBackend:
    """`make_backend` for a backend that records module activity; ValueError for one that does not."""
    if not capabilities(name).traces:
        raise InputError(f"backend {name} records no activity; {', '.join(having('traces'))} do")
    backend: TracingBackend = _class(name)(cfg, **options)
    return backend
