"""`codesign bench gpu`: offline (no GPU) it compiles and assembles every kernel of a model;
on the device path without a GPU it says why."""

from __future__ import annotations

import json

import pytest

from codesign.bench.gpu import gpu_check
from codesign.cli import main
from compiler.codegen.gpu import find_ptxas
from compiler.errors import GpuUnavailableError
from compiler.runtime.gpu_driver import gpu_available

AVAILABLE, REASON = gpu_available()


@pytest.mark.skipif(find_ptxas() is None, reason="no ptxas: install the gpu extra")
def test_offline_compiles_and_assembles_every_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "gpu", "--offline", "--models", "mlp", "--arch", "sm_90"]) == 0
    report = json.loads(capsys.readouterr().out)
    mlp = report["models"]["mlp"]
    assert report["mode"] == "offline" and report["arch"] == "sm_90"
    assert mlp["fallbacks"] == [] and mlp["gpu_steps"] == mlp["steps"] == 5
    assert mlp["spill_bytes"] == 0 and 8 <= mlp["max_registers"] <= 255


@pytest.mark.skipif(AVAILABLE, reason="a GPU is present: the refusal is not taken")
def test_the_device_run_needs_a_gpu() -> None:
    with pytest.raises(GpuUnavailableError, match=r"codesign bench gpu needs an NVIDIA GPU: no GPU"):
        gpu_check(("mlp",))


def test_models_must_be_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "gpu", "--models", ","]) == 2
    assert "--models ',' names nothing" in capsys.readouterr().err
