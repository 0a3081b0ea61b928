"""Static shapes for an ONNX model: binding the graph inputs' symbolic dimensions from the
user's `input_shapes`, then ONNX shape inference for every other value."""

from __future__ import annotations

import faulthandler
import json
import math
import os
import signal
import tempfile
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from compiler.errors import ModelImportError

SUPPORTED_DTYPES = (
    "float16",
    "float32",
    "float64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "bool",
)

TypeInfo = tuple[tuple[int, ...] | None, str | None]

# The largest tensor a model may hold (inputs, weights, every intermediate), checked before
# anything is allocated: 2**28 elements, 1 GiB of float32, twenty times ResNet-18's largest
MAX_TENSOR_ELEMENTS = 1 << 28


def check_tensor_size(shape: Sequence[int], what: str) -> None:
    """ModelImportError naming `what` if a tensor of `shape` would exceed MAX_TENSOR_ELEMENTS."""
    elements = math.prod(int(d) for d in shape)
    if elements > MAX_TENSOR_ELEMENTS:
        dims = "x".join(str(d) for d in shape)
        raise ModelImportError(
            f"{what} has {elements} elements ({dims}), more than the limit of {MAX_TENSOR_ELEMENTS}"
        )


def numpy_dtype(elem_type: int, what: str) -> str:
    """The numpy dtype name of an ONNX element type; ModelImportError names `what` if unsupported."""
    try:
        name = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        name = ""
    if name not in SUPPORTED_DTYPES:
        type_name = (
            onnx.TensorProto.DataType.Name(elem_type)
            if elem_type in onnx.TensorProto.DataType.values()
            else str(elem_type)
        )
        raise ModelImportError(f"{what} has element type {type_name}, which is not supported")
    return name


def check_finite(data: np.ndarray, what: str) -> None:
    """Weights must be finite: NaN nowhere, and infinity only in a scalar (a Clip bound, a fill
    value), where it means "unbounded"; a NaN weight would calibrate to a NaN scale."""
    if data.dtype.kind != "f" or data.size == 0:
        return
    nan = np.isnan(data)
    if nan.any() or (data.size > 1 and np.isinf(data).any()):
        kind = "NaN" if nan.any() else "infinite"
        raise ModelImportError(f"{what} holds {kind} values (weights must be finite)")


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The real inputs: an input that is also an initializer is a constant with a default value
    (older exporters list every weight as an input) and is treated as that constant."""
    weights = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in weights]


def bind_inputs(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None, label: str
) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each graph input's static shape and dtype, written into `model`'s input types.

    `input_shapes` may fix any input's shape; symbolic dimensions it leaves open are an error
    telling the user what to pass.
    """
    inputs = graph_inputs(model)
    names = [vi.name for vi in inputs]
    given = dict(input_shapes or {})
    for name in given:
        if name not in names:
            raise ModelImportError(
                f"{label}: input_shapes names unknown input {name!r} "
                f"(model inputs: {', '.join(names) or 'none'})"
            )
    bound = {}
    for vi in inputs:
        if not vi.type.HasField("tensor_type"):
            raise ModelImportError(f"{label}: input {vi.name!r} is not a tensor")
        dtype = numpy_dtype(vi.type.tensor_type.elem_type, f"{label}: input {vi.name!r}")
        shape = _input_shape(vi, given.get(vi.name), label)
        check_tensor_size(shape, f"{label}: input {vi.name!r}")
        _write_shape(vi, shape)
        bound[vi.name] = (shape, dtype)
    return bound


def _declared(vi: onnx.ValueInfoProto) -> list[int | str] | None:
    """The declared dims: ints, names of symbolic dims ('?' when unnamed, '-1' for the negative
    size some exporters write for a dynamic dimension), None if no shape."""
    tensor = vi.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [_dim(d) for d in tensor.shape.dim]


def _dim(d: onnx.TensorShapeProto.Dimension) -> int | str:
    if d.HasField("dim_value"):
        return d.dim_value if d.dim_value >= 0 else str(d.dim_value)
    return d.dim_param or "?"


def _input_shape(vi: onnx.ValueInfoProto, given: Sequence[int] | None, label: str) -> tuple[int, ...]:
    declared = _declared(vi)
    if given is not None:
        return _check_given(vi.name, declared, given, label)
    if declared is None:
        raise ModelImportError(
            f"{label}: input {vi.name!r} has no shape in the model; "
            f"pass --input-shape {vi.name}=1,3,224,224 with its real dimensions"
        )
    for i, d in enumerate(declared):
        if isinstance(d, str):
            hint = ",".join(str(e) if isinstance(e, int) else "1" for e in declared)
            raise ModelImportError(
                f"{label}: input {vi.name!r} dimension {i} ({d!r}) is symbolic; "
                f"pass --input-shape {vi.name}={hint} (input_shapes={{{vi.name!r}: (...)}})"
            )
    return tuple(int(d) for d in declared)


def _check_given(
    name: str, declared: list[int | str] | None, given: Sequence[int], label: str
) -> tuple[int, ...]:
    shape = tuple(given)
    if not all(isinstance(d, int | np.integer) and d >= 1 for d in shape):
        raise ModelImportError(f"{label}: input_shapes[{name!r}] = {shape} must be positive integers")
    if declared is not None and len(declared) != len(shape):
        raise ModelImportError(
            f"{label}: input_shapes[{name!r}] has rank {len(shape)} but input {name!r} "
            f"has rank {len(declared)} in the model"
        )
    for i, (d, g) in enumerate(zip(declared or shape, shape, strict=True)):
        if isinstance(d, int) and d != g:
            raise ModelImportError(
                f"{label}: input_shapes[{name!r}] dimension {i} is {g} but the model fixes it to {d}"
            )
    return tuple(int(d) for d in shape)


def _write_shape(vi: onnx.ValueInfoProto, shape: tuple[int, ...]) -> None:
    tensor = vi.type.tensor_type
    tensor.ClearField("shape")
    tensor.shape.SetInParent()  # a rank-0 input keeps an explicit empty shape
    for d in shape:
        tensor.shape.dim.add().dim_value = d


def infer_types(model: onnx.ModelProto, label: str) -> dict[str, TypeInfo]:
    """Shape and dtype of every value ONNX shape inference derives; None where it cannot tell.

    Declared intermediate and output shapes are dropped first: they may still carry the
    symbolic dimensions the bound inputs replace.
    """
    del model.graph.value_info[:]
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    return _in_child(model, label)


def _in_child(model: onnx.ModelProto, label: str) -> dict[str, TypeInfo]:
    """_infer run in a forked child: an abort or a crash inside onnx's C++ (a check it asserts
    rather than reports) is a ModelImportError here, not the end of the process.  The types
    come back as JSON (never a pickle: the child has read a file a user handed over)."""
    if not hasattr(os, "fork"):  # no fork on this platform: inference in this process
        return _infer(model, label)
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as errors:  # what onnx prints as it aborts, for the message
        pid = os.fork()
        if pid == 0:  # the child: whatever happens, it ends here
            try:
                faulthandler.disable()
                os.dup2(errors.fileno(), 2)
                os.close(read_end)
                with os.fdopen(write_end, "wb") as out:
                    out.write(json.dumps(_reply(model, label)).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reply_file:
            reply = reply_file.read()
        _, status = os.waitpid(pid, 0)
        errors.seek(0)
        said = errors.read(4096).decode(errors="replace").strip()
    if not reply:
        how = f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status) \
            else f"exit status {os.waitstatus_to_exitcode(status)}"
        said = f": {said.splitlines()[0][:300]}" if said else ""
        raise ModelImportError(f"{label}: ONNX shape inference crashed ({how}{said}); the model is malformed")
    data = json.loads(reply)
    if "error" in data:
        raise ModelImportError(data["error"])
    if "bug" in data:
        raise RuntimeError(f"ONNX shape inference in the child: {data['bug']}")
    types = data["types"]
    return {name: (None if dims is None else tuple(dims), dtype) for name, (dims, dtype) in types.items()}


def _reply(model: onnx.ModelProto, label: str) -> dict[str, object]:
    try:
        return {"types": _infer(model, label)}
    except ModelImportError as e:
        return {"error": str(e)}
    except Exception as e:  # a bug: the parent raises it with its traceback's gist
        return {"bug": f"{type(e).__name__}: {e}"}


def _infer(model: onnx.ModelProto, label: str) -> dict[str, TypeInfo]:
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=False, strict_mode=False, data_prop=True
        )
    except Exception as e:  # onnx raises several types from C++; one line is all the user needs
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelImportError(f"{label}: ONNX shape inference failed: {first}") from None
    types: dict[str, TypeInfo] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        types[vi.name] = _type_info(vi)
    return types


def _type_info(vi: onnx.ValueInfoProto) -> TypeInfo:
    tensor = vi.type.tensor_type
    dtype = None
    if tensor.elem_type:
        try:
            dtype = numpy_dtype(tensor.elem_type, vi.name)
        except ModelImportError:
            dtype = None
    dims = _declared(vi) if tensor.HasField("shape") else None
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None, dtype
    return tuple(int(d) for d in dims), dtype
