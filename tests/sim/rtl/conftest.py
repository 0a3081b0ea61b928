"""Shared Verilator builds of the stub design: one per config for the whole session.

Builds are cached in $CODESIGN_CACHE (or ~/.cache/codesign), so only the first session on a
machine pays for them (about 10-15 s each).
"""

from __future__ import annotations

import pytest

from hw.config import AcceleratorConfig
from tests.sim.rtl.stub_accel import NARROW, WIDE, StubAccel


@pytest.fixture(scope="session")
def stub_design() -> type:
    return StubAccel  # type: ignore[no-any-return]


@pytest.fixture(scope="session", params=[NARROW, WIDE], ids=["bus64", "bus512"])
def stub_cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    return request.param  # type: ignore[no-any-return]
