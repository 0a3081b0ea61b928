"""The loop-IR walker: children, rebuilding with new children, walks and the two rewriters."""

from __future__ import annotations

import random

from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.tir import stmt as S
from compiler.tir.printer import print_ir
from compiler.tir.visit import (
    children,
    leaves,
    map_children,
    perfect_nest,
    post_order,
    pre_order,
    walk,
    walk_loops,
    with_body,
    wrap_loops,
)

VI, VJ = E.Var("i"), E.Var("j")


def _sync(n: int) -> S.Sync:
    return S.Sync("push", "load", f"q{n}")


def _uop(var: E.Var) -> S.Uop:
    return S.Uop("alu", Affine({var: 1}), use_imm=True, imm=1)


def test_children_of_each_container_and_of_a_leaf():
    a, b = _sync(0), _sync(1)
    assert children(S.Seq((a, b))) == (a, b)
    assert children(S.For(VI, 2, a)) == (a,)
    assert children(S.Attr("pragma", "alu", "s", a)) == (a,)
    assert children(a) == ()
    assert children(S.Seq(())) == ()


def test_map_children_keeps_what_is_not_a_child():
    loop = S.For(VI, 3, _sync(0), "vthread")
    out = map_children(loop, lambda _: _sync(1))
    assert out == S.For(VI, 3, _sync(1), "vthread")
    mark = S.Attr("tensorize", "gemm", "c", _sync(0))
    assert map_children(mark, lambda _: _sync(2)) == S.Attr("tensorize", "gemm", "c", _sync(2))
    leaf = _sync(0)
    assert map_children(leaf, lambda _: _sync(9)) is leaf


def test_map_children_of_a_sequence_splices_and_collapses():
    seq = S.Seq((_sync(0), _sync(1)))
    spliced = map_children(seq, lambda s: S.Seq((s, s)))
    assert spliced == S.Seq((_sync(0), _sync(0), _sync(1), _sync(1)))
    # children that become empty sequences vanish; one survivor is the result itself
    only = map_children(seq, lambda s: s if s == _sync(1) else S.Seq(()))
    assert only == _sync(1)


def test_with_body_and_wrap_loops_invert_perfect_nest():
    assert with_body(S.For(VI, 2, _sync(0), "vthread"), _sync(1)) == S.For(VI, 2, _sync(1), "vthread")
    nest = wrap_loops([(VI, 2), (VJ, 3)], _uop(VJ))
    assert nest == S.For(VI, 2, S.For(VJ, 3, _uop(VJ)))
    assert perfect_nest(nest) == ([(VI, 2), (VJ, 3)], _uop(VJ))
    assert wrap_loops([], _uop(VI)) == _uop(VI)


def test_walk_is_pre_order_and_walk_loops_gives_the_enclosing_loops():
    inner = S.For(VJ, 3, S.Seq((_sync(1), _sync(2))))
    mark = S.Attr("pragma", "alu", "s", inner)
    tree = S.Seq((_sync(0), S.For(VI, 2, mark)))
    order = list(walk(tree))
    assert order == [tree, _sync(0), tree.stmts[1], mark, inner, inner.body, _sync(1), _sync(2)]
    depth = {s: tuple(lp.var for lp in loops) for s, loops in walk_loops(tree)
             if isinstance(s, S.Sync)}
    assert depth == {_sync(0): (), _sync(1): (VI, VJ), _sync(2): (VI, VJ)}
    assert leaves(tree) == [_sync(0), _sync(1), _sync(2)]


def test_post_order_sees_rewritten_children():
    tree = S.For(VI, 2, S.Seq((_uop(VI), _sync(0))))
    seen: list[str] = []

    def fn(node: S.Stmt) -> S.Stmt:
        seen.append(type(node).__name__)
        if isinstance(node, S.Uop):
            return _sync(7)
        if isinstance(node, S.Seq):  # its Uop is already a Sync
            assert node.stmts[0] == _sync(7)
        return node

    out = post_order(tree, fn)
    assert seen == ["Uop", "Sync", "Seq", "For"]
    assert out == S.For(VI, 2, S.Seq((_sync(7), _sync(0))))


def test_pre_order_stops_where_it_replaces():
    tree = S.Seq((S.For(VI, 2, S.For(VJ, 2, _uop(VJ))), _uop(VI)))
    visited: list[S.Stmt] = []

    def fn(node: S.Stmt) -> S.Stmt | None:
        visited.append(node)
        if isinstance(node, S.For):  # the outermost loop takes the nest: the inner is not seen
            return _sync(len(perfect_nest(node)[0]))
        return None

    assert pre_order(tree, fn) == S.Seq((_sync(2), _uop(VI)))
    assert visited == [tree, tree.stmts[0], tree.stmts[1]]


def _random_tree(rng: random.Random, depth: int) -> S.Stmt:
    kind = rng.choice(["seq", "for", "attr", "leaf"] if depth else ["leaf"])
    if kind == "seq":
        return S.seq(*(_random_tree(rng, depth - 1) for _ in range(rng.randint(2, 4))))
    if kind == "for":
        return S.For(E.Var(f"v{depth}"), rng.randint(1, 4), _random_tree(rng, depth - 1))
    if kind == "attr":
        return S.Attr("pragma", "alu", f"s{depth}", _random_tree(rng, depth - 1))
    return _sync(rng.randint(0, 9))


def test_identity_rewrites_rebuild_equal_trees():
    rng = random.Random(0)
    for _ in range(50):
        tree = _random_tree(rng, 5)
        assert post_order(tree, lambda n: n) == tree
        assert pre_order(tree, lambda n: None) == tree
        assert print_ir(map_children(tree, lambda n: n)) == print_ir(tree)
        # every statement once; the leaves are those with no children
        assert sum(1 for _ in walk(tree)) == sum(1 for _ in walk_loops(tree))
        assert leaves(tree) == [s for s in walk(tree) if not isinstance(s, S.Seq | S.For | S.Attr)]
