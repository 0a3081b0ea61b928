"""Backends by name: what each declares it can do, and the errors for the rest."""

import pytest

from hw.config import PRESETS
from sim.backend import Capabilities
from sim.backends import NAMES, capabilities, having, make_backend, make_tracing_backend

TINY = PRESETS["tiny"]


def test_each_backend_declares_what_it_can_do():
    assert capabilities("fsim") == Capabilities(values=True, cycles=False, seeded=True)
    assert capabilities("timing") == Capabilities(values=False, cycles=True, traces=True)
    assert capabilities("rtl") == Capabilities(values=True, cycles=True, traces=True, signals=True)


@pytest.mark.parametrize("name", ["fsim", "timing"])
def test_a_backend_carries_the_capabilities_of_its_name(name):
    backend = make_backend(name, TINY)
    assert backend.name == name and backend.capabilities == capabilities(name)


def test_names_are_the_three_fidelities():
    assert NAMES == ("fsim", "timing", "rtl")


@pytest.mark.parametrize("call", [capabilities, lambda n: make_backend(n, TINY)])
def test_unknown_backend(call):
    with pytest.raises(ValueError, match=r"^unknown backend 'gpu'; choose one of fsim, timing, rtl$"):
        call("gpu")


def test_a_tracing_backend_must_trace():
    assert make_tracing_backend("timing", TINY).capabilities.traces
    with pytest.raises(ValueError, match=r"^backend fsim records no activity; timing, rtl do$"):
        make_tracing_backend("fsim", TINY)


def test_having_names_the_backends_with_a_capability():
    assert having("traces") == ("timing", "rtl") and having("signals") == ("rtl",)
    assert having("values") == ("fsim", "rtl") and having("seeded") == ("fsim",)
