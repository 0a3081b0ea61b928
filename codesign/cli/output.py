"""How every command prints a result: JSON on stdout (`--json`), or one `key: value` line per
field; and the one progress bar on stderr (codesign.exec.progress.Bar), so stdout stays clean."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from codesign.exec.progress import Bar


def emit(result: Mapping[str, Any] | list[Any], as_json: bool, *, indent: int | None = None,
         keys: Iterable[str] | None = None, aligned: bool = False) -> None:
    """`result` as JSON (with `indent`), or as `key: value` lines (only `keys`, in their order,
    when given; `aligned`: the values in one column)."""
    if as_json:  # strict JSON: a NaN or infinity (a cosine of nothing) prints as null
        print(json.dumps(finite(result), indent=indent, allow_nan=False))
        return
    assert isinstance(result, Mapping), "a list prints as JSON only"
    shown = list(keys if keys is not None else result)
    width = max(map(len, shown), default=0)
    for key in shown:
        print(f"{key:<{width}}  {result[key]}" if aligned else f"{key}: {result[key]}")


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float (in nested dicts, lists and tuples) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def progress(stage: str) -> Callable[[int, int], None]:
    """A `progress(done, total)` callback drawing one bar named `stage` on stderr."""
    bar = Bar()
    return lambda done, total: bar.update(stage, done, total)
