"""The table of supported ONNX operators: op type -> converter, the graph IR ops it becomes, and
notes on the opset forms it normalises. It is the single source of the README's list
(`supported_ops_markdown`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compiler.frontend.context import ImportContext

Converter = Callable[[ImportContext], None]


@dataclass(frozen=True)
class OnnxOp:
    op_type: str
    convert: Converter
    becomes: str
    note: str


SUPPORTED: dict[str, OnnxOp] = {}


def converter(*op_types: str, becomes: str | None = None, note: str = "") -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of `op_types` (ai.onnx domain)."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            if op_type in SUPPORTED:
                raise ValueError(f"ONNX op {op_type} registered twice")
            SUPPORTED[op_type] = OnnxOp(op_type, fn, becomes or op_type, note)
        return fn

    return register


def supported_ops_markdown() -> str:
    """The supported-operator table for the README, generated from `SUPPORTED`."""
    rows = ["| ONNX operator | graph IR | notes |", "|---|---|---|"]
    for op in sorted(SUPPORTED.values(), key=lambda o: o.op_type):
        rows.append(f"| {op.op_type} | {op.becomes} | {op.note} |")
    return "\n".join(rows)
