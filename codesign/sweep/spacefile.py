"""Reading a design space's TOML file: every key checked, each refusal one line naming the key
and the rule (`SpaceError`).  `codesign.sweep.space` builds the `Space` from what this returns."""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesign.sweep.records import WorkloadSpec
from hw.config import AcceleratorConfig, ConfigError, preset
from hw.errors import InputError


class SpaceError(InputError):
    """A design space file breaks a rule; the message names the file, the key and the rule."""


TOP_KEYS = ("name", "base", "clock_mhz", "objectives", "layer_objective", "batch_policy", "dram", "params",
            "constraints", "workloads")
DRAM_KEYS = {"latency_cycles": "dram_latency_cycles", "bytes_per_cycle": "dram_bytes_per_cycle"}
CONSTRAINT_KEYS = ("max_area_mm2", "max_sram_bytes", "min_macs_per_cycle", "max_macs_per_cycle")
WORKLOAD_KEYS = ("name", "model", "weight", "input_shapes")
_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB|GiB)?\s*$")


@dataclass(frozen=True)
class ParsedSpace:
    name: str
    base: AcceleratorConfig
    dimensions: tuple[tuple[str, tuple[int, ...]], ...]
    constraints: dict[str, Any]
    workloads: tuple[WorkloadSpec, ...]
    objectives: tuple[str, ...]
    layer_objective: str
    batch_policy: str


def parse_space(text: str, path: Path, variable: tuple[str, ...], objectives: tuple[str, ...],
                layer_objectives: tuple[str, ...], batch_policies: tuple[str, ...]) -> ParsedSpace:
    where = str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpaceError(f"{where}: not valid TOML: {exc}") from None
    _known(where, "", data, TOP_KEYS)
    base = _base(where, data, path.parent)
    name = _string(where, "name", data.get("name", path.stem))
    params = _table(where, "params", data.get("params", {}))
    dims = tuple((key, _dimension(where, key, raw, base, variable)) for key, raw in params.items())
    dims = tuple(sorted(dims, key=lambda d: variable.index(d[0])))
    objs = _list(where, "objectives", data.get("objectives", ["latency", "area", "energy"]))
    for obj in objs:
        if obj not in objectives:
            raise SpaceError(f"{where}: objectives: unknown objective {obj!r} "
                             f"(one of {', '.join(objectives)})")
    if len(set(objs)) != len(objs):
        raise SpaceError(f"{where}: objectives: each objective may be named once, not {objs}")
    layer = _choice(where, "layer_objective", data.get("layer_objective", "cycles"), layer_objectives)
    policy = _choice(where, "batch_policy", data.get("batch_policy", "pad"), batch_policies)
    return ParsedSpace(name, base, dims, _constraints(where, data.get("constraints", {})),
                       _workloads(where, data.get("workloads"), path.parent), tuple(objs), layer, policy)


# -- the base config, the DRAM model and the clock ---------------------------------------------------
def _base(where: str, data: dict[str, Any], folder: Path) -> AcceleratorConfig:
    spec = _string(where, "base", data.get("base", "vta"))
    try:
        cfg = AcceleratorConfig.load(folder / spec) if spec.endswith(".json") else preset(spec)
    except (ConfigError, OSError) as exc:
        raise SpaceError(f"{where}: base: {exc}") from None
    changes: dict[str, Any] = {}
    dram = _table(where, "dram", data.get("dram", {}))
    _known(where, "dram.", dram, tuple(DRAM_KEYS))
    for key, field_name in DRAM_KEYS.items():
        if key in dram:
            changes[field_name] = _integer(where, f"dram.{key}", dram[key])
    if "clock_mhz" in data:
        clock = data["clock_mhz"]
        if isinstance(clock, bool) or not isinstance(clock, (int, float)):
            raise SpaceError(f"{where}: clock_mhz: must be a number, not {clock!r}")
        changes["clock_mhz"] = float(clock)
    changes["clock_mhz"] = float(changes.get("clock_mhz", cfg.clock_mhz))
    try:
        return dataclasses.replace(cfg, **changes)
    except ConfigError as exc:
        raise SpaceError(f"{where}: dram/clock_mhz: {exc}") from None


# -- one varied parameter ----------------------------------------------------------------------------
def _dimension(where: str, key: str, raw: Any, base: AcceleratorConfig,
               variable: tuple[str, ...]) -> tuple[int, ...]:
    at = f"params.{key}"
    fields = {f.name for f in dataclasses.fields(AcceleratorConfig)}
    if key not in variable:
        rule = "not a parameter a space may vary" if key in fields else "unknown parameter"
        raise SpaceError(f"{where}: {at}: {rule} (one of {', '.join(variable)})")
    if isinstance(raw, dict):
        values = _range(where, at, key, raw)
    elif isinstance(raw, list):
        if not raw:
            raise SpaceError(f"{where}: {at}: empty list; give at least one value")
        values = tuple(_value(where, at, key, v) for v in raw)
    else:
        values = (_value(where, at, key, raw),)
    if len(set(values)) != len(values):
        raise SpaceError(f"{where}: {at}: a value is listed twice in {list(values)}")
    for value in values:
        _check_alone(where, at, key, value, base)
    return values


def _range(where: str, at: str, key: str, raw: dict[str, Any]) -> tuple[int, ...]:
    if set(raw) != {"min", "max"}:
        raise SpaceError(f"{where}: {at}: a range has exactly the keys min and max, not {', '.join(raw)}")
    low, high = _value(where, at, key, raw["min"]), _value(where, at, key, raw["max"])
    for bound in (low, high):
        if bound <= 0 or bound & (bound - 1):
            raise SpaceError(f"{where}: {at}: range bounds must be powers of two, not {bound}")
    if low > high:
        raise SpaceError(f"{where}: {at}: range min {low} is above max {high}")
    return tuple(1 << e for e in range(low.bit_length() - 1, high.bit_length()))


def _value(where: str, at: str, key: str, raw: Any) -> int:
    if isinstance(raw, str) and key.endswith("_bytes"):
        return _size(where, at, raw)
    if isinstance(raw, bool) or not isinstance(raw, int):
        hint = ' or a size such as "32KiB"' if key.endswith("_bytes") else ""
        raise SpaceError(f"{where}: {at}: {raw!r} is not an integer{hint}")
    return raw


def _size(where: str, at: str, raw: str) -> int:
    match = _SIZE.match(raw)
    if not match:
        raise SpaceError(f'{where}: {at}: {raw!r} is not a size (an integer, or "512B", "32KiB", "1MiB")')
    return int(match.group(1)) * _UNITS[match.group(2) or ""]


def _check_alone(where: str, at: str, key: str, value: int, base: AcceleratorConfig) -> None:
    """Refuse a value that breaks a rule of its own parameter (AcceleratorConfig's message
    quoted); a value refused only with the base's other parameters may still combine with others
    of the space, so it is left to the census."""
    try:
        dataclasses.replace(base, **{key: value})  # type: ignore[arg-type]
    except ConfigError as exc:
        if str(exc).startswith(f"{key} must"):
            raise SpaceError(f"{where}: {at}: {value} is not valid: {exc}") from None


# -- constraints, workloads -------------------------------------------------------------------------
def _constraints(where: str, raw: Any) -> dict[str, Any]:
    table = _table(where, "constraints", raw)
    _known(where, "constraints.", table, CONSTRAINT_KEYS)
    out: dict[str, Any] = {}
    if "max_area_mm2" in table:
        area = table["max_area_mm2"]
        if isinstance(area, bool) or not isinstance(area, (int, float)) or not 0 < area < math.inf:
            raise SpaceError(f"{where}: constraints.max_area_mm2: must be a positive number, not {area!r}")
        out["max_area_mm2"] = float(area)
    for key in CONSTRAINT_KEYS[1:]:
        if key in table:
            value = _value(where, f"constraints.{key}", key, table[key])
            if value < 1:
                raise SpaceError(f"{where}: constraints.{key}: must be at least 1, not {value}")
            out[key] = value
    low, high = out.get("min_macs_per_cycle"), out.get("max_macs_per_cycle")
    if low is not None and high is not None and low > high:
        raise SpaceError(f"{where}: constraints: min_macs_per_cycle {low} is above max_macs_per_cycle {high}")
    return out


def _workloads(where: str, raw: Any, folder: Path) -> tuple[WorkloadSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpaceError(f"{where}: workloads: give at least one [[workloads]] table")
    specs = tuple(_workload(where, f"workloads[{i}]", item, folder) for i, item in enumerate(raw))
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise SpaceError(f"{where}: workloads: the name {name!r} is used twice")
    return specs


def _workload(where: str, at: str, raw: Any, folder: Path) -> WorkloadSpec:
    table = _table(where, at, raw)
    _known(where, f"{at}.", table, WORKLOAD_KEYS)
    if "model" not in table:
        raise SpaceError(f"{where}: {at}.model: missing; give a zoo model or an ONNX file")
    model = _model(where, f"{at}.model", _string(where, f"{at}.model", table["model"]), folder)
    name = _string(where, f"{at}.name", table.get("name", Path(table["model"]).stem))
    weight = table.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
        raise SpaceError(f"{where}: {at}.weight: must be a positive finite number, not {weight!r}")
    shapes = _table(where, f"{at}.input_shapes", table.get("input_shapes", {}))
    bound = []
    for key, dims in shapes.items():
        if (not isinstance(dims, list) or not dims
                or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims)):
            raise SpaceError(f"{where}: {at}.input_shapes.{key}: must be a list of positive integers, "
                             f"not {dims!r}")
        bound.append((key, tuple(dims)))
    return WorkloadSpec(name, model, float(weight), tuple(bound))


def _model(where: str, at: str, model: str, folder: Path) -> str:
    """A zoo name as it is; an ONNX file as its absolute path (relative to the space's folder)."""
    from codesign.zoo.registry import MODELS

    if model in MODELS:
        return model
    file = folder / model
    if file.is_file():
        return str(file.resolve())
    shown = str(file) if str(file).isprintable() else repr(str(file))  # the message stays one line
    raise SpaceError(f"{where}: {at}: {model!r} is neither a zoo model ({', '.join(sorted(MODELS))}) "
                     f"nor a file ({shown})")


# -- small checks ------------------------------------------------------------------------------------
def _known(where: str, prefix: str, table: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in table:
        if key not in keys:
            raise SpaceError(f"{where}: {prefix}{key}: unknown key (known: {', '.join(keys)})")


def _table(where: str, at: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise SpaceError(f"{where}: {at}: must be a table, not {raw!r}")
    return raw


def _list(where: str, at: str, raw: Any) -> list[Any]:
    if not isinstance(raw, list) or not raw:
        raise SpaceError(f"{where}: {at}: must be a non-empty list, not {raw!r}")
    return raw


def _string(where: str, at: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise SpaceError(f"{where}: {at}: must be a non-empty string, not {raw!r}")
    return raw


def _integer(where: str, at: str, raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise SpaceError(f"{where}: {at}: must be an integer, not {raw!r}")
    return raw


def _choice(where: str, at: str, raw: Any, choices: tuple[str, ...]) -> str:
    if raw not in choices:
        raise SpaceError(f"{where}: {at}: must be one of {', '.join(choices)}, not {raw!r}")
    return str(raw)
