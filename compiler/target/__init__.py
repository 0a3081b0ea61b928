"""Targets: the where.  `AcceleratorTarget(cfg)` for the accelerator."""

from compiler.target.accel import AcceleratorTarget, GemmIntrinsic, Scope

__all__ = ["AcceleratorTarget", "GemmIntrinsic", "Scope"]
