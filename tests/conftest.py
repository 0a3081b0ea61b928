import os

import pytest

# `codesign run/compile` keep compiled host kernels under ~/.cache unless this says otherwise; the
# tests that call them in-process must not write there (the kernel cache's own tests set it).
os.environ.setdefault("CODESIGN_KERNEL_CACHE", "off")
# Likewise fsim's recorded runs (sim.run_cache); its own tests choose a folder.
os.environ.setdefault("CODESIGN_FSIM_CACHE", "off")
# and the JIT helper process the command line forks for a model's host kernels: a test that calls
# `codesign compile/run` in-process would leave it on for the tests after it (its own tests turn
# it on, and tests/codesign/cli checks a compile with it)
os.environ.setdefault("CODESIGN_JIT_HELPER", "off")
# Every operator the tests compile, in-process or in a `codesign` subprocess (which inherits the
# environment), has its loop IR verified: an accelerator operator after lowering and after every
# pass (compiler.build.run_passes), a CPU kernel after its lowering (compiler.lower.cpu); set
# CODESIGN_VERIFY_IR=0 to time the suite without it.
os.environ.setdefault("CODESIGN_VERIFY_IR", "1")

from hw.config import PRESETS, AcceleratorConfig


@pytest.fixture(params=sorted(PRESETS))
def preset_cfg(request: pytest.FixtureRequest) -> AcceleratorConfig:
    """Each preset in turn: vta, tiny and the non-square rect."""
    return PRESETS[request.param]
