"""How every command prints a result: JSON on stdout (`--json`), or one `key: value` line per
field; and the one progress bar on stderr (codesign.exec.progress.Bar), so stdout stays clean."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from codesign.exec.progress import Bar


def emit(result: Mapping[str, Any] | list[Any], as_json: bool, *, indent: int | None = None,
         keys: Iterable[str] | None = None, aligned: bool = False) -> None:
    """`result` as JSON (with `indent`), or as `key: value` lines (only `keys`, in their order,
    when given; `aligned`: the values in one column)."""
    if as_json:
        print(json.dumps(result, indent=indent))
        return
    assert isinstance(result, Mapping), "a list prints as JSON only"
    shown = list(keys if keys is not None else result)
    width = max(map(len, shown), default=0)
    for key in shown:
        print(f"{key:<{width}}  {result[key]}" if aligned else f"{key}: {result[key]}")


def progress(stage: str) -> Callable[[int, int], None]:
    """A `progress(done, total)` callback drawing one bar named `stage` on stderr."""
    bar = Bar()
    return lambda done, total: bar.update(stage, done, total)
