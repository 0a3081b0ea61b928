"""Text form of the loop IR, one statement per line, used by tests and `--print-ir`."""

from __future__ import annotations

from compiler.tir import stmt as S


def print_ir(node: S.Stmt) -> str:
    lines: list[str] = []
    _print(node, 0, lines)
    return "\n".join(lines)


def _print(node: S.Stmt, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(node, S.Seq):
        for s in node.stmts:
            _print(s, depth, out)
    elif isinstance(node, S.For):
        kind = "" if node.kind == "serial" else f" {node.kind}"
        out.append(f"{pad}for{kind} {node.var} in 0..{node.extent}:")
        _print(node.body, depth + 1, out)
    elif isinstance(node, S.Attr):
        out.append(f"{pad}// {node.key} {node.value} ({node.stage})")
        _print(node.body, depth + 1, out)
    elif isinstance(node, S.Store):
        idx = ", ".join(str(i) for i in node.indices)
        out.append(f"{pad}{node.tensor.name}[{idx}] = {node.value}")
    else:
        out.append(pad + describe(node))


def describe(node: S.Stmt) -> str:
    """One line for a leaf statement."""
    if isinstance(node, S.Dma):
        op = "load" if node.load else "store"
        pads = "".join(f" pad_{d}({p.start} in [{p.low},{p.high}))"
                       for d, p in (("y", node.pad_y), ("x", node.pad_x)) if p)
        return (f"dma_{op} {node.memory_type.name} {node.tensor}[{node.dram}] <-> sram[{node.sram}]"
                f" y={node.y_size} x={node.x_size} stride={node.y_stride}{pads}  // {node.queue}")
    if isinstance(node, S.Uop):
        return _uop(node)
    if isinstance(node, S.Kernel):
        folded = " ".join(f"{v}<{n}" for v, n in node.folded)
        explicit = " ".join(f"{v}<{n}" for v, n in node.explicit)
        return f"kernel[{folded}][{explicit}] {_uop(node.uop)}"
    if isinstance(node, S.Sync):
        return f"{node.action} {node.src}->{node.dst}"
    raise TypeError(f"not a leaf statement: {node!r}")


def _uop(u: S.Uop) -> str:
    if u.kind == "gemm":
        if u.reset:
            return f"gemm_reset acc[{u.dst}]"
        return f"gemm acc[{u.dst}] += inp[{u.src}] * wgt[{u.wgt}]"
    operand = f"imm {u.imm}" if u.use_imm else f"acc[{u.src}]"
    return f"alu {u.alu_op.name} acc[{u.dst}], {operand}"
