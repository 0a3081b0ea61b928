"""GpuTarget: the presets an offline compile uses, and their derived values."""

from __future__ import annotations

import dataclasses

import pytest

from compiler.target.gpu import PRESETS, GpuTarget, fp32_lanes, gpu_preset
from hw.errors import InputError


def test_presets_name_their_ptx_target() -> None:
    assert gpu_preset("sm_80").arch == "sm_80"
    assert gpu_preset("sm_90").arch == "sm_90"
    assert set(PRESETS) == {"sm_80", "sm_90"}


def test_unknown_preset_is_refused() -> None:
    with pytest.raises(InputError, match=r"unknown GPU preset 'sm_75'; known: sm_80, sm_90"):
        gpu_preset("sm_75")


def test_peak_is_two_flops_per_fma_unit_per_cycle() -> None:
    a100 = gpu_preset("sm_80")  # 108 SMs x 64 FP32 units x 1.41 GHz x 2 = 19.5 TFLOP/s
    assert a100.peak_fp32_flops == pytest.approx(19.49e12, rel=1e-3)
    h100 = gpu_preset("sm_90")  # 132 x 128 x 1.98 GHz x 2 = 66.9 TFLOP/s
    assert h100.peak_fp32_flops == pytest.approx(66.9e12, rel=1e-3)


def test_fp32_lanes_by_compute_capability() -> None:
    assert fp32_lanes(8, 0) == 64
    assert fp32_lanes(8, 6) == 128
    assert fp32_lanes(9, 0) == 128


def test_target_is_frozen_and_serialises() -> None:
    t = gpu_preset("sm_90")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.sm_count = 1  # type: ignore[misc]
    data = t.to_json()
    assert data["arch"] == "sm_90" and data["shared_bytes_per_block"] == 48 * 1024
    assert data["warp_size"] == 32 and data["max_threads_per_block"] == 1024
    assert GpuTarget.name == "gpu"
