"""The canonical text form."""

from __future__ import annotations

import numpy as np

from compiler.graph import Graph, print_graph
from compiler.graph.builder import append


def sample() -> Graph:
    g = Graph("net")
    g.add_input("image", (1, 2, 4, 4), "float32")
    g.add_const("w", np.zeros((3, 2, 1, 1), np.float32))
    g.add_const("bias", np.array([0.5, -1.25, 1 / 3], np.float32))
    g.add_const("two", np.array(2, np.int64))
    g.add_const("flag", np.array([True, False]))
    append(
        g,
        "Conv",
        ["image", "w", "bias"],
        ["conv"],
        {"strides": (1, 1), "pads": (0,) * 4, "dilations": (1, 1)},
    )
    append(g, "Clip", ["conv"], ["clip"], {"min": 0.0})
    append(g, "Pad", ["clip"], ["out"], {"pads": (0, 0, 1, 1, 0, 0, 1, 1), "mode": "edge"})
    append(g, "Shape", ["out"], ["shape"], {"end": 4})
    append(g, "Gather", ["shape", "two"], ["dim"])
    append(g, "Cast", ["flag"], ["flagf"], {"to": "float32"})
    g.outputs = ["out", "dim", "flagf"]
    return g


def test_print_graph() -> None:
    assert (
        print_graph(sample())
        == """\
graph net(image: float32[1,2,4,4]) -> (out, dim, flagf)
  const w: float32[3,2,1,1]
  const bias: float32[3] = [0.5, -1.25, 0.33333334]
  const two: int64[] = 2
  const flag: bool[2] = [true, false]
  conv: float32[1,3,4,4] = Conv(image, w, bias) dilations=[1,1] group=1 pads=[0,0,0,0] strides=[1,1]
  clip: float32[1,3,4,4] = Clip(conv) max=inf min=0.0
  out: float32[1,3,6,6] = Pad(clip) mode='edge' pads=[0,0,1,1,0,0,1,1] value=0.0
  shape: int64[4] = Shape(out) end=4 start=0
  dim: int64[] = Gather(shape, two) axis=0
  flagf: float32[2] = Cast(flag) to='float32'"""
    )


def test_print_graph_renamed() -> None:
    assert print_graph(sample(), rename=True).splitlines()[1:5] == [
        "  const c0: float32[3,2,1,1]",
        "  const c1: float32[3] = [0.5, -1.25, 0.33333334]",
        "  const c2: int64[] = 2",
        "  const c3: bool[2] = [true, false]",
    ]
    assert print_graph(sample(), rename=True).splitlines()[5:8] == [
        "  v0: float32[1,3,4,4] = Conv(image, c0, c1) dilations=[1,1] group=1 pads=[0,0,0,0] strides=[1,1]",
        "  v1: float32[1,3,4,4] = Clip(v0) max=inf min=0.0",
        "  out: float32[1,3,6,6] = Pad(v1) mode='edge' pads=[0,0,1,1,0,0,1,1] value=0.0",
    ]


def test_node_names_do_not_print() -> None:
    a, b = sample(), sample()
    b.nodes = [n.__class__(n.op, n.inputs, n.outputs, n.attrs, "renamed_" + n.name) for n in b.nodes]
    assert print_graph(a) == print_graph(b)
