"""Targets: the where.  `AcceleratorTarget(cfg)` for the accelerator, `CpuTarget` (this machine's:
`host_target()`) for the CPU; both are `Target`s."""

from compiler.target.accel import AcceleratorTarget, GemmIntrinsic, Scope
from compiler.target.base import Target
from compiler.target.cpu import CpuTarget, host_target

__all__ = ["AcceleratorTarget", "CpuTarget", "GemmIntrinsic", "Scope", "Target", "host_target"]
