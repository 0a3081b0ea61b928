"""Dependency tokens of a loop IR executed in program order, for the token passes' tests."""

from __future__ import annotations

from collections import Counter

from compiler.tir import stmt as S

NEIGHBOURS = {("load", "compute"), ("compute", "load"), ("compute", "store"), ("store", "compute")}


def outstanding(body: S.Stmt) -> Counter[tuple[str, str]]:
    """The most tokens outstanding per queue pair when `body` runs in program order (every loop
    iteration, every virtual thread one after the other).  Fails on a pop with no token pushed
    before it, on a pair that is not two neighbouring queues, and on tokens left at the end."""
    now: Counter[tuple[str, str]] = Counter()
    peak: Counter[tuple[str, str]] = Counter()
    _run(body, now, peak)
    left = {pair: n for pair, n in now.items() if n}
    assert not left, f"tokens left at the end: {left}"
    return peak


def _run(node: S.Stmt, now: Counter[tuple[str, str]], peak: Counter[tuple[str, str]]) -> None:
    if isinstance(node, S.Seq):
        for s in node.stmts:
            _run(s, now, peak)
    elif isinstance(node, S.For):
        for _ in range(node.extent):
            _run(node.body, now, peak)
    elif isinstance(node, S.Attr):
        _run(node.body, now, peak)
    elif isinstance(node, S.Sync):
        pair = (node.src, node.dst)
        assert pair in NEIGHBOURS, f"a token between {node.src} and {node.dst}, which are not neighbours"
        now[pair] += 1 if node.action == "push" else -1
        assert now[pair] >= 0, f"pop {node.src}->{node.dst} before any push"
        peak[pair] = max(peak[pair], now[pair])
