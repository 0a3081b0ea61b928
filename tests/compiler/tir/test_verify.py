"""The loop-IR verifier: each broken invariant is reported with the stage, the problem and the
statement; the IR of real compiled operators passes at every stage."""

from __future__ import annotations

import random

import pytest

import compiler.build as B
from compiler.build import build
from compiler.errors import IRError, ScheduleError
from compiler.ops.accel import Conv2d, Dense
from compiler.ops.accel.conv2d import Conv2dSpec
from compiler.ops.accel.dense import DenseSpec
from compiler.target import AcceleratorTarget
from compiler.te import expr as E
from compiler.te.affine import Affine
from compiler.te.tensor import placeholder
from compiler.tir import stmt as S
from compiler.tir.verify import STAGES, VERIFY_ENV, verify, verifying
from hw import isa
from hw.config import PRESETS
from tests.compiler.passes.cases import TINY, conv, matmul

VI, VJ, VT = E.Var("i"), E.Var("j"), E.Var("t")
A = placeholder((4, 1, 4), "int32", "a")
BUF = S.Buffer("c", (4, 1, 4), "int32", None, "acc", Affine({VT: 4}))


def _store(*index: E.Expr, tensor=A) -> S.Store:  # type: ignore[no-untyped-def]
    return S.Store(tensor, (*index, E.Const(0), E.Const(0)), E.Const(0))


def _dma(**kw) -> S.Dma:  # type: ignore[no-untyped-def]
    fields = dict(queue="load", load=True, memory_type=isa.MemType.INP, tensor="a", dram=Affine({VI: 1}),
                  sram=Affine(), y_size=1, x_size=1, y_stride=1)
    return S.Dma(**{**fields, **kw})  # type: ignore[arg-type]


def _uop(**kw) -> S.Uop:  # type: ignore[no-untyped-def]
    return S.Uop(**{"kind": "alu", "dst": Affine({VI: 1}), "use_imm": True, **kw})  # type: ignore[arg-type]


def _loop(body: S.Stmt, extent: object = 4, var: E.Var = VI, kind: str = "serial") -> S.For:
    return S.For(var, extent, body, kind)  # type: ignore[arg-type]


# name: (IR, stage, message pattern); every pattern names the stage and the printed statement
BROKEN: dict[str, tuple[S.Stmt, str, str]] = {
    "unbound-variable": (
        _loop(_store(VJ)), "lower",
        r"^loop IR after lower: variable j not bound by an enclosing loop, in `a\[j, 0, 0\] = 0`$"),
    "doubly-bound": (
        _loop(_loop(_store(VI))), "lower",
        r"after lower: variable i is bound again inside a loop over it, in `for i in 0..4: \.\.\.`"),
    "zero-extent": (
        _loop(_store(VI), extent=0), "lower",
        r"loop i has extent 0, not an int >= 1, in `for i in 0\.\.0"),
    "float-extent": (_loop(_store(VI), extent=2.0), "lower", r"loop i has extent 2\.0, not an int"),
    "bool-extent": (_loop(_store(VI), extent=True), "lower", r"loop i has extent True, not an int"),
    "loop-kind": (
        _loop(_store(VI), kind="parallel"), "lower",
        r"loop kind 'parallel' is not one of serial, vthread, in `for parallel i in 0\.\.4:"),
    "vthread-after-injection": (
        _loop(S.Sync("push", "load", "compute"), kind="vthread"), "inject_virtual_threads",
        r"after inject_virtual_threads: a virtual-thread loop after .*`for vthread i"),
    "nested-seq": (
        S.Seq((S.Seq((_store(E.Const(0)),)), _store(E.Const(1)))), "lower",
        r"a sequence directly inside a sequence, in `a\[0, 0, 0\] = 0 \.\.\.`"),
    "index-count": (
        S.Store(A, (E.Const(0),), E.Const(0)), "lower",
        r"a has 3 dimensions, indexed by 1, in `a\[0\] = 0`"),
    "unbound-buffer-base": (
        _loop(_store(VI, tensor=BUF)), "lower",
        r"variable t not bound .* in `c\[i, 0, 0\] = 0`"),
    "unbound-load": (
        _loop(S.Store(A, (VI, E.Const(0), E.Const(0)), E.Load(A, (VJ, E.Const(0), E.Const(0))))), "lower",
        r"variable j not bound .* in `a\[i, 0, 0\] = a\[j, 0, 0\]`"),
    "unknown-pragma": (
        S.Attr("pragma", "unroll", "s", _store(E.Const(0))), "lower",
        r"unknown pragma 'unroll', in `// pragma unroll \(s\) \.\.\.`"),
    "unknown-mark": (
        S.Attr("frobnicate", "x", "s", _store(E.Const(0))), "lower",
        r"unknown mark 'frobnicate'"),
    "dma-mark-left": (
        S.Attr("pragma", "dma_copy", "s", _store(E.Const(0))), "inject_dma",
        r"after inject_dma: a pragma dma_copy mark after inject_dma.*`// pragma dma_copy \(s\)"),
    "tensorize-mark-left": (
        S.Attr("tensorize", "gemm", "c", _store(E.Const(0))), "fold_kernels",
        r"a tensorize gemm mark after tensorize, the pass that replaces them"),
    "alu-mark-left": (
        S.Attr("pragma", "alu", "e", _store(E.Const(0))), "lower_alu",
        r"a pragma alu mark after lower_alu"),
    "dma-too-early": (
        _loop(_dma()), "lower",
        r"a DMA before inject_dma, the pass that makes them, in `dma_load INP a\[i\] <-> sram\[0\]"),
    "uop-too-early": (
        _loop(_uop()), "inject_dma",
        r"a micro-op before tensorize, .* in `alu ADD acc\[i\], imm 0`"),
    "uop-too-late": (
        _loop(_uop()), "fold_kernels",
        r"after fold_kernels: a micro-op outside a kernel after fold_kernels"),
    "kernel-too-early": (S.Kernel(_uop(dst=Affine()), (), ()), "lower_alu", r"a kernel before fold_kernels"),
    "sync-too-early": (
        S.Sync("push", "load", "compute"), "fold_kernels",
        r"a token before insert_tokens, .* in `push load->compute`"),
    "dma-queue": (
        _loop(_dma(queue="compute")), "inject_dma",
        r"a DMA load of INP on the compute queue, in `dma_load"),
    "dma-store-type": (
        _loop(_dma(queue="store", load=False)), "inject_dma",
        r"a DMA store of INP on the store queue"),
    "dma-size": (_loop(_dma(x_size=0)), "inject_dma", r"DMA sizes y=1 x=0 stride=1, in `dma_load"),
    "dma-stride": (_loop(_dma(y_stride=-2)), "inject_dma", r"DMA sizes y=1 x=1 stride=-2"),
    "dma-pad": (
        _loop(_dma(pad_y=S.DmaPad(Affine({VI: 1}), -1, 3))), "inject_dma",
        r"DMA pad starts its valid range at -1 < 0, in `dma_load .* pad_y\(i in \[-1,3\)\)"),
    "dma-unbound": (
        _dma(), "inject_dma",
        r"variable i not bound by an enclosing loop, in `dma_load INP a\[i\]"),
    "uop-unbound": (_uop(), "tensorize", r"variable i not bound .* in `alu ADD acc\[i\], imm 0`"),
    "uop-kind": (_loop(_uop(kind="conv")), "tensorize", r"micro-op kind 'conv'"),
    "gemm-imm": (_loop(_uop(kind="gemm", use_imm=True)), "tensorize", r"a GEMM micro-op with an immediate"),
    "alu-reset": (_loop(_uop(reset=True)), "tensorize", r"an ALU micro-op with a reset"),
    "kernel-three-folds": (
        S.Kernel(_uop(), ((VI, 2), (VJ, 2), (VT, 2)), ()), "fold_kernels",
        r"a kernel folding 3 loops, more than the instruction's 2, in `kernel\[i<2 j<2 t<2\]"),
    "kernel-rebinds": (
        _loop(S.Kernel(_uop(), ((VI, 2),), ())), "fold_kernels",
        r"variable i is bound again by the kernel's loops, in `kernel\[i<2\]\[\] alu"),
    "kernel-twice": (
        S.Kernel(_uop(), ((VI, 2),), ((VI, 2),)), "fold_kernels",
        r"variable i is bound again by the kernel"),
    "kernel-extent": (
        S.Kernel(_uop(), ((VI, 0),), ()), "fold_kernels",
        r"kernel loop i has extent 0, not an int >= 1"),
    "kernel-unbound": (
        S.Kernel(_uop(dst=Affine({VJ: 1})), ((VI, 2),), ()), "fold_kernels",
        r"variable j not bound by an enclosing loop, in `kernel\[i<2\]\[\] alu ADD acc\[j\]"),
    "sync-neighbours": (
        S.Sync("push", "load", "store"), "insert_tokens",
        r"a token from load to store, which are not neighbouring queues, in `push load->store`"),
    "sync-action": (
        S.Sync("wait", "load", "compute"), "insert_tokens",
        r"token action 'wait', in `wait load->compute`"),
    "sync-queue": (
        S.Sync("pop", "load", "host"), "insert_tokens",
        r"a token between unknown queues load and host"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_ir_is_rejected_with_the_stage_and_the_statement(name: str):
    stmt, stage, pattern = BROKEN[name]
    with pytest.raises(IRError, match=pattern):
        verify(stmt, stage)


def test_ir_error_is_a_bug_not_a_schedule_error():
    # schedule search catches ScheduleError as an infeasible point; a broken pass must be loud
    assert not issubclass(IRError, ScheduleError)
    with pytest.raises(IRError, match="after lower"):
        verify(_loop(_store(VJ)), "lower")


def test_buffers_must_be_the_lowerings():
    stmt = _loop(_loop(_store(VI, tensor=BUF), var=VT, kind="vthread"))
    assert verify(stmt, "lower", {"c": BUF}) is stmt
    other = S.Buffer("c", BUF.shape, BUF.dtype, None, BUF.scope, BUF.base)  # equal fields, not the one
    with pytest.raises(IRError, match=r"buffer c is not one the lowering allocated, in `c\[i, 0, 0\] = 0`"):
        verify(stmt, "lower", {"c": other})
    with pytest.raises(IRError, match="buffer c is not one"):
        verify(stmt, "lower", {})


def test_unknown_stage():
    with pytest.raises(IRError, match=r"loop IR after parse: unknown stage; the stages are lower, "):
        verify(_store(E.Const(0)), "parse")


def test_long_statements_are_abbreviated():
    name = "x" * 200
    stmt = S.Store(placeholder((1, 1, 1), "int32", name), (VJ, E.Const(0), E.Const(0)), E.Const(0))
    with pytest.raises(IRError) as info:
        verify(stmt, "lower")
    shown = str(info.value).split("`")[1]
    assert len(shown) == 100 and shown.endswith("...") and shown.startswith("xxx")


def test_a_store_left_under_a_removed_thread_loop_is_left_to_emission():
    # inject_virtual_threads binds thread variables in DMAs and kernels only; emission refuses
    # the store with its own message
    stmt = _loop(_store(VT, tensor=BUF))
    assert verify(stmt, "inject_virtual_threads") is stmt
    with pytest.raises(IRError, match="variable t not bound"):
        verify(stmt, "insert_tokens")


def _real_builds() -> list[B.Built]:
    rng = random.Random(0)
    builds = [build(matmul(), TINY), build(matmul(threads=2, epilogue=True), TINY),
              build(matmul(m=2, k=4, n=4, tile_k=2, tile_n=2, loads_per_tile=True), TINY),
              build(conv(), TINY), build(conv(tile_h=1, threads=2), TINY)]
    for preset in ("vta", "tiny"):
        target = AcceleratorTarget(PRESETS[preset])
        for op in (Conv2d(Conv2dSpec(1, 32, 8, 8, 32, 3, 1, 1), target), Dense(DenseSpec(1, 64, 64), target)):
            points = [op.default_knobs(), *rng.sample(op.points(), 3)]
            for knobs in points:
                try:
                    builds.append(build(op.schedule(knobs), target, op.op))
                except ScheduleError as exc:
                    assert not isinstance(exc, IRError), exc
    return builds


def test_real_operators_pass_at_every_stage(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(VERIFY_ENV, raising=False)  # verified here, stage by stage
    builds = _real_builds()
    assert len(builds) >= 7
    for built in builds:
        assert list(built.ir) == list(STAGES)
        for stage, stmt in built.ir.items():
            assert verify(stmt, stage, built.func.buffers) is stmt


def test_the_pipeline_verifies_after_every_pass_when_asked(monkeypatch: pytest.MonkeyPatch):
    # a fold_kernels that does nothing leaves micro-ops: with verification the pass is named,
    # without it emission refuses them
    broken = tuple((name, (lambda body, target: body) if name == "fold_kernels" else fn)
                   for name, fn in B.PASSES)
    monkeypatch.setattr(B, "PASSES", broken)
    monkeypatch.setenv(VERIFY_ENV, "1")
    with pytest.raises(IRError, match=r"^loop IR after fold_kernels: a micro-op outside a kernel after "
                                      r"fold_kernels, in `gemm_reset acc\[\(c\.m \+ c\.n\)\]`$"):
        build(matmul(), TINY)
    monkeypatch.setenv(VERIFY_ENV, "0")
    with pytest.raises(ScheduleError, match="cannot emit Uop") as info:
        build(matmul(), TINY)
    assert not isinstance(info.value, IRError)


def test_the_test_suite_verifies():
    assert verifying()


@pytest.mark.parametrize(("stmt", "pattern"), [
    (_loop(_store(VI), kind="vthread"),
     r"^loop IR after cpu lowering: loop kind 'vthread' is not one of serial, vectorize, in `"),
    (_loop(_store(VJ)), r"^loop IR after cpu lowering: variable j not bound by an enclosing loop, in `a\[j"),
    (_loop(_store(VI), extent=0), r"after cpu lowering: loop i has extent 0, not an int >= 1"),
    (_loop(_dma()), r"after cpu lowering: Dma has no place in the CPU target's loop IR, in `"),
])
def test_cpu_ir_is_checked_after_its_lowering(stmt, pattern):
    with pytest.raises(IRError, match=pattern):
        verify(stmt, "cpu")


def test_cpu_lowering_is_verified_when_asked(monkeypatch: pytest.MonkeyPatch):
    from compiler import te
    from compiler.lower.cpu import lower_host
    from compiler.schedule import Schedule

    x = te.placeholder((3, 8), "float32", "x")
    out = te.compute((3, 8), lambda i, j: x[i, j] * 2.0, "out")
    s = Schedule(out)
    s.vectorize("out", "j")
    calls: list[str] = []
    real = verify

    def spy(stmt, where="lower", buffers=None):  # type: ignore[no-untyped-def]
        calls.append(where)
        return real(stmt, where, buffers)

    monkeypatch.setattr("compiler.lower.cpu.verify", spy)
    monkeypatch.setenv(VERIFY_ENV, "1")
    lower_host(s, "double")
    monkeypatch.setenv(VERIFY_ENV, "0")
    lower_host(s, "double")
    assert calls == ["cpu"]
