"""The quantizer's error type."""

from __future__ import annotations

from hw.errors import WorkbenchError


class QuantizationError(WorkbenchError):
    """A graph cannot be quantized as asked: a QDQ file outside the symmetric int8 contract (zero
    points, unsigned or 16-bit types, mismatched scales), a scale ratio no multiply and shift can
    apply, a bias that overflows int32, or calibration data that does not fit the graph. The
    message names the node or tensor."""
