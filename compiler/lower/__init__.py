"""Schedule -> loop IR."""

from compiler.lower.lower import LoweredFunc, lower

__all__ = ["LoweredFunc", "lower"]
