"""Mutations every file kind shares: raw bytes, a JSON-like tree changed at one place, TOML
written back, and `.npz` archives damaged as a hostile or careless file could (a dtype, a shape,
a value, a name, a header that lies, a pickle, a zip member)."""

from __future__ import annotations

import io
import json
import math
import os
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

from codesign.fuzz.engine import MARKER_ENV

HUGE = 1 << 62
# values a field may be replaced by: wrong types, boundaries, non-finite numbers, huge sizes
HOSTILE: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 3, 1.5, -0.0, HUGE, -HUGE, 1 << 64, 1e308, math.nan, math.inf, -math.inf,
    "", "x", "vta", "nan", "1KiB", "-8KiB", "9" * 40, "../../etc/passwd", "\u00e9\n\x00",
    [], [0], [-1, 2], ["a"], [HUGE] * 3, {}, {"a": 1}, {"min": 1, "max": 0},
)


def pick(rng: np.random.Generator, items: Any) -> Any:
    items = list(items)
    return items[int(rng.integers(len(items)))]


# -- raw bytes --------------------------------------------------------------------------------
def mutate_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    """Truncated, a few bytes flipped, random bytes, bytes inserted or prefixed, or empty."""
    buf = bytearray(data)
    choice = int(rng.integers(6))
    if choice == 0 or not buf:
        return bytes(buf[: int(rng.integers(len(buf) + 1))])
    if choice == 1:
        for _ in range(int(rng.integers(1, 9))):
            buf[int(rng.integers(len(buf)))] = int(rng.integers(256))
        return bytes(buf)
    if choice == 2:
        return rng.bytes(int(rng.integers(1, 4096)))
    if choice == 3:
        at = int(rng.integers(len(buf) + 1))
        return bytes(buf[:at]) + rng.bytes(int(rng.integers(1, 64))) + bytes(buf[at:])
    if choice == 4:
        return rng.bytes(int(rng.integers(1, 16))) + bytes(buf)
    return b""


# -- trees (JSON, TOML) --------------------------------------------------------------------------
def paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a tree of dicts and lists, the root first."""
    out = [prefix]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out += paths(value, (*prefix, i))
    return out


def _get(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def mutate_tree(tree: Any, rng: np.random.Generator, hostile: tuple[Any, ...] = HOSTILE) -> Any:
    """`tree` (a parsed JSON or TOML document, changed in place and returned) with one place
    replaced by a hostile value, deleted, doubled, given an unknown key or nudged (a number
    times 2, plus or minus one, negated)."""
    where = pick(rng, paths(tree))
    if not where:
        return pick(rng, (hostile[int(rng.integers(len(hostile)))], [tree], {"x": tree}))
    parent, key = _get(tree, where[:-1]), where[-1]
    value = parent[key]
    choice = int(rng.integers(6))
    if choice == 0:
        del parent[key]
    elif choice == 1 and isinstance(value, dict):
        value[pick(rng, ("bogus", "", "name", "format", "version"))] = pick(rng, hostile)
    elif choice == 2 and isinstance(value, list):
        value.extend(value[:1] * int(rng.integers(1, 4)))
    elif choice == 3 and isinstance(value, (int, float)) and not isinstance(value, bool):
        parent[key] = pick(rng, (value * 2, value + 1, value - 1, -value, value * 1024, float(value), 0))
    elif choice == 4 and isinstance(value, str):
        parent[key] = pick(rng, (value + "x", value[:-1], value.upper(), value * 3, ""))
    else:
        parent[key] = pick(rng, hostile)
    return tree


def mutate_json(data: bytes, rng: np.random.Generator) -> bytes:
    """One JSON document changed at one place (non-finite numbers written as NaN/Infinity)."""
    return json.dumps(mutate_tree(json.loads(data), rng), indent=1).encode()


def dump_toml(tree: dict[str, Any]) -> str:
    """A TOML document of `tree` (scalars and lists first, then tables, then arrays of tables);
    a value TOML cannot hold (None, a non-string key) is written as a string."""
    return _toml_table(tree, ())


def _toml_table(table: dict[str, Any], prefix: tuple[str, ...]) -> str:
    lines, tables, arrays = [], [], []
    for key, value in table.items():
        if isinstance(value, dict) and value and prefix == ():
            tables.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and prefix == ():
            arrays.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    out = "\n".join(lines) + "\n"
    for key, value in tables:
        out += f"\n[{_toml_key(key)}]\n" + _toml_table(value, (*prefix, key))
    for key, items in arrays:
        for item in items:
            out += f"\n[[{_toml_key(key)}]]\n" + _toml_table(item, (*prefix, key))
    return out


def _toml_key(key: Any) -> str:
    return json.dumps(str(key))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


# -- npz archives -----------------------------------------------------------------------------
def read_arrays(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def write_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


class Payload:
    """Unpickling this creates the file the fuzz child's MARKER_ENV names: code ran."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (os.system, (f'touch "${MARKER_ENV}"',))


def pickled_member() -> bytes:
    """An .npy member holding an object array whose unpickling runs code."""
    buf = io.BytesIO()
    np.save(buf, np.array([Payload()], dtype=object), allow_pickle=True)
    return buf.getvalue()


def _lying_header(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    """An .npy member whose header promises `shape` with no data behind it."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def _with_member(data: bytes, name: str, member: bytes, replace: bool) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate member name is one of the damages
        for info in src.infolist():
            if not (replace and info.filename == name):
                dst.writestr(info, src.read(info))
        dst.writestr(name, member)
    return out.getvalue()


def mutate_npz_member(data: bytes, rng: np.random.Generator) -> bytes:
    """A member replaced or added: a pickle that runs code, a header that lies about the
    shape, a file that is no .npy, or a name with a folder in it."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
    name = pick(rng, names + ["extra.npy", "sub/x.npy", "../up.npy", "noext"])
    choice = int(rng.integers(5))
    if choice == 0:
        member = pickled_member()
    elif choice == 1:
        member = _lying_header(pick(rng, ((1 << 40,), (1 << 20, 1 << 20), (-1, 3), (0,), ())))
    elif choice == 2:
        member = _lying_header((4,), pick(rng, ("|O", "<U3", "V8", "<c8", ">f8", "|b1", "<M8[s]", "bogus")))
    elif choice == 3:
        member = rng.bytes(int(rng.integers(0, 200)))
    else:
        member = b"\x93NUMPY\x09\x00" + rng.bytes(20)
    return _with_member(data, name, member, replace=bool(rng.integers(2)))


def mutate_npz_array(data: bytes, rng: np.random.Generator) -> bytes:
    """One array changed: its dtype, its shape, a value (NaN, Inf, huge), emptied, renamed,
    dropped, or a new one added."""
    arrays = read_arrays(data)
    if not arrays:
        return write_arrays({"x": np.zeros(3, np.float32)})
    name = pick(rng, sorted(arrays))
    a = arrays[name]
    choice = int(rng.integers(8))
    if choice == 0 and a.dtype.kind in "biufc":
        arrays[name] = a.astype(pick(rng, (np.float16, np.float64, np.int8, np.int64, np.uint8, np.bool_,
                                           np.complex64, "U4")))
    elif choice == 1 and a.ndim:
        arrays[name] = a.reshape(-1) if rng.integers(2) else a[None]
    elif choice == 2 and a.size and a.dtype.kind == "f":
        a = a.copy()
        a.reshape(-1)[int(rng.integers(a.size))] = pick(rng, (np.nan, np.inf, -np.inf, 3e38))
        arrays[name] = a
    elif choice == 3:
        arrays[name] = a[:0] if a.ndim else np.zeros(0, a.dtype)
    elif choice == 4:
        arrays[pick(rng, ("input", "x", "", "meta", name + "_"))] = arrays.pop(name)
    elif choice == 5:
        del arrays[name]
    elif choice == 6:
        shape = pick(rng, ((1,), (2, 64), (0,)))
        arrays[pick(rng, ("extra", "input2", "labels"))] = np.zeros(shape, np.float32)
    else:
        arrays[name] = np.repeat(a, int(rng.integers(2, 5)), axis=0) if a.ndim else a
    return write_arrays(arrays)


MutationFn = Callable[[bytes, np.random.Generator], bytes]


def npz_mutations() -> dict[str, MutationFn]:
    """The npz mutations, by name, and raw bytes."""
    return {"array": mutate_npz_array, "member": mutate_npz_member, "bytes": mutate_bytes}
