import os

import pytest

# `codesign run/compile` keep compiled host kernels under ~/.cache unless this says otherwise; the
# tests that call them in-process must not write there (the kernel cache's own tests set it).
os.environ.setdefault("CODESIGN_KERNEL_CACHE", "off")

from hw.config import PRESETS, AcceleratorConfig


@pytest.fixture(params=sorted(PRESETS))
def preset_cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    """Each preset in turn: vta, tiny and the non-square rect."""
    return PRESETS[request.param]
