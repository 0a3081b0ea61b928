"""Graph -> graph passes (each returns a new graph; run `verify` after any of them) and the
`simplify` pipeline that cleans an imported graph."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler.graph.ir import Graph
from compiler.graph.passes.canonicalize_clips import canonicalize_clips
from compiler.graph.passes.canonicalize_reshapes import canonicalize_reshapes
from compiler.graph.passes.fold_batchnorm import fold_batchnorm
from compiler.graph.passes.fold_constants import fold_constants
from compiler.graph.passes.fold_pads import fold_pads
from compiler.graph.passes.fuse_activations import fuse_activations
from compiler.graph.passes.fuse_gelu import fuse_gelu
from compiler.graph.passes.normalize_gemm import normalize_gemm
from compiler.graph.passes.remove_identities import remove_identities
from compiler.graph.printer import print_graph
from compiler.graph.verify import verify

Pass = Callable[[Graph], Graph]

# Pattern fusions run before batch-norm folding: folding would absorb the "+ 3" of a hard
# activation (or a Gelu's scalings) into the preceding layer's bias and hide the pattern.
SIMPLIFY: Sequence[Pass] = (
    fold_constants,
    remove_identities,
    fold_pads,
    canonicalize_clips,
    fuse_activations,
    fuse_gelu,
    normalize_gemm,
    canonicalize_reshapes,
    fold_batchnorm,
)
MAX_ROUNDS = 10


def simplify(graph: Graph, passes: Sequence[Pass] = SIMPLIFY, check: bool = False) -> Graph:
    """Run `passes` in order until a round changes nothing (at most MAX_ROUNDS rounds).

    With `check`, the verifier runs after every pass (tests do this).
    """
    g = graph
    for _ in range(MAX_ROUNDS):
        before = _fingerprint(g)
        for p in passes:
            g = p(g)
            if check:
                verify(g)
        if _fingerprint(g) == before:
            break
    return g


def _fingerprint(graph: Graph) -> tuple[str, tuple[int, ...]]:
    """The printed graph plus the identity of each constant's data (a pass may replace a
    weight's data under the same name without changing the printed text)."""
    return print_graph(graph), tuple(id(v.data) for v in graph.values.values() if v.data is not None)


__all__ = [
    "SIMPLIFY",
    "canonicalize_clips",
    "canonicalize_reshapes",
    "fold_batchnorm",
    "fold_constants",
    "fold_pads",
    "fuse_activations",
    "fuse_gelu",
    "normalize_gemm",
    "remove_identities",
    "simplify",
]
