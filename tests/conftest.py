import pytest

from hw.config import PRESETS, AcceleratorConfig


@pytest.fixture(params=sorted(PRESETS))
def preset_cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    """Each preset in turn: vta, tiny and the non-square rect."""
    return PRESETS[request.param]
