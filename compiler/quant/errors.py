"""The quantizer's error type."""

from __future__ import annotations

from hw.errors import WorkbenchError, WorkbenchWarning


class QuantizationError(WorkbenchError):
    """A graph cannot be quantized as asked: a QDQ file outside the symmetric int8 contract (zero
    points, unsigned or 16-bit types, mismatched scales), a scale ratio no multiply and shift can
    apply, a bias that overflows int32, or calibration data that does not fit the graph. The
    message names the node or tensor."""


class LayerQuantizationError(QuantizationError):
    """One convolution or dense layer (by its output, `layer`) cannot be quantized: `reason`.
    The quantizer keeps such a layer float (on the host) and warns instead of failing."""

    def __init__(self, layer: str, reason: str) -> None:
        super().__init__(reason)
        self.layer, self.reason = layer, reason


class QuantizationWarning(WorkbenchWarning):
    """A layer left float because it cannot be quantized; the message names it and says why."""
