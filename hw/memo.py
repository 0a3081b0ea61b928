"""`Memo`: a process-wide table of results kept for later callers, bounded: emptied when full.

The simulator's hot paths remember what depends only on an instruction word and the micro-ops it
reads (decoded instructions, prepared steps, check verdicts); a model repeats a few hundred or
thousand such keys, so a table that fills up is emptied rather than evicted entry by entry,
which keeps a long sweep's memory bounded at no cost to a model's runs."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(dict[K, V]):
    """A dict of at most `limit` entries: `keep` empties it when full, then stores."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def keep(self, key: K, value: V) -> V:
        """Store `value` under `key` (emptying the table first when it is full); `value`."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
