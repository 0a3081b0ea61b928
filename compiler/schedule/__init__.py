"""Schedules: the how of an operator, as an ordered list of frozen primitive records."""

from compiler.schedule.records import (
    Bind,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    Fuse,
    Pragma,
    Record,
    Reorder,
    SetScope,
    Split,
    Tensorize,
    Unroll,
    Vectorize,
    VirtualThread,
)
from compiler.schedule.schedule import Schedule, Stage, load_records

__all__ = [
    "Bind", "CacheRead", "CacheWrite", "ComputeAt", "ComputeInline", "Fuse", "Pragma", "Record", "Reorder",
    "Schedule", "SetScope", "Split", "Stage", "Tensorize", "Unroll", "Vectorize", "VirtualThread",
    "load_records",
]
