"""Reading an ONNX model from a path, bytes or a ModelProto, with one-line errors.

Protobuf's own parse errors do not say whether a file was cut short or is something else
entirely, so the top level of the message is scanned first: a field that runs past the end of
the data means a truncated file, a field ModelProto does not have means not an ONNX file.
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import external_data_helper

from compiler.errors import ModelImportError

MIN_OPSET = 9
MAX_OPSET = onnx.defs.onnx_opset_version()
MAX_MODEL_BYTES = 2 << 30  # protobuf's own limit on one message

# ModelProto's top-level fields: number -> wire type (0 varint, 2 length-delimited)
_MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}

Source = str | os.PathLike[str] | bytes | onnx.ModelProto


def load_model(source: Source) -> tuple[onnx.ModelProto, str]:
    """The model (a private copy) and a label naming it in messages."""
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model, "<model>"
    if isinstance(source, bytes):
        return _parse(source, "<bytes>"), "<bytes>"
    path = Path(source)
    data = _read(path)
    model = _parse(data, str(path))
    _load_external_data(model, path)
    return model, str(path)


def _read(path: Path) -> bytes:
    if not path.exists():
        raise ModelImportError(f"{path}: no such file")
    if path.is_dir():
        raise ModelImportError(f"{path}: is a directory, not an ONNX file")
    try:
        if not path.is_file():  # a device or a pipe: reading it may never end
            raise ModelImportError(f"{path}: is not a regular file, not an ONNX file")
        size = path.stat().st_size
        if size > MAX_MODEL_BYTES:
            raise ModelImportError(
                f"{path}: {size} bytes, more than the limit of {MAX_MODEL_BYTES} for an ONNX model"
            )
        return path.read_bytes()
    except OSError as e:
        raise ModelImportError(f"{path}: cannot read ({e.strerror})") from None


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    if not data:
        raise ModelImportError(f"{label}: empty file, not an ONNX model")
    problem = scan_top_level(data)
    if problem == "foreign":
        raise ModelImportError(f"{label}: not an ONNX model (not a serialized ModelProto)")
    if problem == "truncated":
        raise ModelImportError(f"{label}: truncated ONNX model ({len(data)} bytes; the file was cut short)")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf's DecodeError; its message carries no detail worth showing
        raise ModelImportError(f"{label}: corrupted ONNX model (protobuf parse failed)") from None
    if not model.HasField("graph") or not model.opset_import:
        what = "graph" if not model.HasField("graph") else "opset_import"
        raise ModelImportError(f"{label}: truncated or incomplete ONNX model (no {what})")
    return model


def scan_top_level(data: bytes) -> str | None:
    """None if `data` is a well-framed sequence of ModelProto fields, else "truncated" (a field
    runs past the end) or "foreign" (a field ModelProto does not have, or a malformed tag)."""
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        if tag is None or tag < 0:
            return "truncated" if tag is None else "foreign"
        field, wire = tag >> 3, tag & 7
        if _MODEL_FIELDS.get(field) != wire:
            return "foreign"
        length, pos = _varint(data, pos)
        if length is None or length < 0:
            return "truncated" if length is None else "foreign"
        if wire == 2:
            pos += length
            if pos > len(data):
                return "truncated"
    return None


def _varint(data: bytes, pos: int) -> tuple[int | None, int]:
    """A protobuf varint at `pos` and the position after it; None if the data ends inside it,
    -1 if it is longer than any varint can be."""
    value, shift = 0, 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            return -1, pos
    return None, pos


def _load_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Weights stored beside the model; a location that is empty, absolute or climbs out of the
    model's directory (`..`) is refused before anything is opened."""
    external = [t for t in model.graph.initializer if external_data_helper.uses_external_data(t)]
    for tensor in external:
        location = external_location(tensor)
        if not location or Path(location).is_absolute() or ".." in Path(location).parts:
            raise ModelImportError(
                f"{path}: initializer {tensor.name!r} stores its data at {location!r}; external data "
                "must be a relative path inside the model's directory"
            )
    if not external:
        return
    try:
        external_data_helper.load_external_data_for_model(model, str(path.parent))
    except (OSError, ValueError, onnx.checker.ValidationError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelImportError(f"{path}: cannot load external weights ({first})") from None


def external_location(tensor: onnx.TensorProto) -> str:
    """Where an initializer's external data lives, as the file writes it ("" if not said)."""
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def default_opset(model: onnx.ModelProto, label: str) -> int:
    """The model's ai.onnx opset, which must be one this frontend handles."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise ModelImportError(f"{label}: the model imports no ai.onnx opset")
    opset = versions[0]
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ModelImportError(
            f"{label}: opset {opset} is not supported (supported: {MIN_OPSET} to {MAX_OPSET})"
        )
    return opset
