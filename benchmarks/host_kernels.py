"""Host kernels (LLVM JIT) against their numpy references on ResNet-18-sized shapes (and
MobileNetV2's depthwise convolutions, and bert-tiny's float operators); prints JSON.

Per operator: the compile time (TE -> loop IR -> LLVM IR -> optimised native code, once per
process, after one warm-up compile that pays LLVM's own start-up), and the run time of the
kernel (argument checks included, output preallocated) and of the numpy reference, as the
minimum and the median of `--repeat` runs.  numpy and BLAS run on one thread.  The numpy
references are written for clarity, not speed (GELU's calls math.erf per element); the ratio is
what replacing them by a host kernel gains.  Operators that stand for a graph op are also timed
as the runtime's fallback evaluates that op (`interp_ms`: the graph interpreter's numpy, float32
BLAS for MatMul and Gemm), the time a `host-numpy` step took.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import llvmlite
import llvmlite.binding as llvm
import numpy as np
from threadpoolctl import threadpool_limits

from compiler.graph.opdefs import OPS, make_attrs
from compiler.ops.cpu import HostOp, host_op
from compiler.target.cpu import host_target

CASES: list[tuple[str, dict[str, Any]]] = [
    ("max_pool2d", dict(shape=(1, 64, 112, 112), kernel=3, stride=2, pad=1)),
    ("max_pool2d", dict(shape=(1, 64, 112, 112), kernel=3, stride=2, pad=1, dtype="int8")),
    ("avg_pool2d", dict(shape=(1, 64, 112, 112), kernel=3, stride=2, pad=1)),
    ("global_avg_pool2d", dict(shape=(1, 512, 7, 7))),
    ("softmax", dict(shape=(1, 1000))),
    ("layer_norm", dict(shape=(128, 128))),
    ("gelu", dict(shape=(128, 512))),
    ("quantize", dict(shape=(1, 64, 56, 56), scale=0.05, zero_point=0)),
    ("dequantize", dict(shape=(1, 64, 56, 56), scale=0.05, zero_point=0)),
    ("requantize", dict(shape=(1, 64, 56, 56), multiplier=1 << 14, shift=20)),
    ("pack", dict(shape=(1, 64, 56, 56), batch_block=1, channel_block=16)),
    ("unpack", dict(shape=(1, 64, 56, 56), batch_block=1, channel_block=16)),
    ("add", dict(a_shape=(1, 64, 56, 56), b_shape=(1, 64, 56, 56))),
    ("conv2d_int8", dict(shape=(1, 3, 224, 224), out_channels=64, kernel=7, stride=2, pad=3)),
    # the quantizer's int8 operators (shifts that keep typical outputs inside int8)
    ("qconv2d", dict(shape=(1, 3, 224, 224), weight_shape=(64, 3, 7, 7), strides=2, pads=3, shift=22)),
    *(
        ("qconv2d", dict(shape=(1, c, h, h), weight_shape=(c, 1, 3, 3), strides=s, pads=1, group=c, shift=19))
        for c, h, s in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (960, 7, 1))
    ),  # MobileNetV2
    ("qgemm", dict(shape=(1, 512), weight_shape=(1000, 512), shift=24)),
    ("qadd", dict(shape=(1, 64, 56, 56), mult_a=300, mult_b=-170, shift=8)),
    ("qglobal_avg_pool", dict(shape=(1, 512, 7, 7), mult=1337, shift=16)),
    # the float parts of bert-tiny (sequence 128, hidden 128, 2 heads of 64) and the classifiers
    ("transpose", dict(shape=(1, 128, 2, 64), perm=(0, 2, 1, 3))),
    ("transpose", dict(shape=(1, 128, 2, 64), perm=(0, 2, 3, 1))),
    ("transpose", dict(shape=(1024, 1024), perm=(1, 0))),  # tiled
    ("gather", dict(shape=(30522, 128), indices_shape=(1, 128))),
    ("gather", dict(shape=(1, 128, 128), indices_shape=(1,), axis=1)),
    ("cast", dict(shape=(1, 1, 1, 128), dtype="int64", to="float32")),
    ("cast", dict(shape=(128, 512), dtype="float32", to="int32")),
    ("matmul", dict(a_shape=(1, 2, 128, 64), b_shape=(1, 2, 64, 128))),
    ("matmul", dict(a_shape=(1, 2, 128, 128), b_shape=(1, 2, 128, 64))),
    ("gemm", dict(shape=(1, 128), weight_shape=(2, 128))),
    ("gemm", dict(shape=(1, 512), weight_shape=(1000, 512))),
    ("gemm", dict(shape=(128, 128), weight_shape=(512, 128))),  # tiled
    ("sub", dict(a_shape=(1,), b_shape=(1, 1, 1, 128))),
    ("div", dict(a_shape=(1, 2, 128, 128), b_shape=(1,))),
    ("tanh", dict(shape=(1, 128))),
    ("tanh", dict(shape=(128, 512))),
]


# Host operators that replace a graph op: also timed as the runtime's fallback runs that op (the
# graph interpreter's numpy evaluator, float32 BLAS for the products), "interp_ms".
GRAPH_OPS: dict[str, tuple[str, Any]] = {
    "transpose": ("Transpose", lambda p: {"perm": p["perm"]}),
    "gather": ("Gather", lambda p: {"axis": p.get("axis", 0)}),
    "cast": ("Cast", lambda p: {"to": p["to"]}),
    "matmul": ("MatMul", lambda p: {}),
    "gemm": ("Gemm", lambda p: {"transB": 1}),
    "add": ("Add", lambda p: {}),
    "sub": ("Sub", lambda p: {}),
    "mul": ("Mul", lambda p: {}),
    "div": ("Div", lambda p: {}),
    "tanh": ("Tanh", lambda p: {}),
}


def _times(fn: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def _error(op: HostOp, got: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    if got.dtype.kind in "iub":
        return {"exact": bool(np.array_equal(got, ref))}
    return {"max_abs_err": float(np.max(np.abs(got.astype(np.float64) - ref)))}


def bench(name: str, params: dict[str, Any], repeat: int) -> dict[str, Any]:
    op = host_op(name, **params)
    start = time.perf_counter()
    kernel = op.build()
    compile_s = time.perf_counter() - start
    inputs = op.random_inputs(0)
    out = np.empty(kernel.outputs[0].shape, kernel.outputs[0].dtype)
    kernel(*inputs, out=out)
    host = _times(lambda: kernel(*inputs, out=out), repeat)
    ref_repeat = max(3, repeat // 10)
    reference = _times(lambda: op.reference(*inputs), ref_repeat)
    row = {"op": name, "params": {k: v for k, v in params.items()}, "compile_s": round(compile_s, 4),
           "run_ms_min": round(min(host) * 1e3, 4), "run_ms_median": round(statistics.median(host) * 1e3, 4),
           "numpy_ms_min": round(min(reference) * 1e3, 4),
           "numpy_ms_median": round(statistics.median(reference) * 1e3, 4)}
    row["speedup_vs_numpy"] = round(row["numpy_ms_min"] / row["run_ms_min"], 2)
    if name in GRAPH_OPS:
        graph_op, attrs = GRAPH_OPS[name]
        full = make_attrs(graph_op, attrs(params))
        interp = _times(lambda: OPS[graph_op].evaluate(inputs, full), repeat)
        row["interp_ms_min"] = round(min(interp) * 1e3, 4)
        row["speedup_vs_interp"] = round(row["interp_ms_min"] / row["run_ms_min"], 2)
    if hasattr(op, "chosen_strategy"):  # qconv2d: the schedule "auto" picked
        row["schedule"] = op.chosen_strategy
    return row | _error(op, out, op.reference(*inputs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per kernel")
    parser.add_argument("--ops", nargs="*", metavar="OP", help="only these operators (e.g. matmul gemm)")
    args = parser.parse_args()
    target = host_target()
    start = time.perf_counter()
    host_op("add", a_shape=(4,), b_shape=(4,)).build()  # LLVM start-up, timed apart
    warm_s = time.perf_counter() - start
    with threadpool_limits(1):
        cases = [(name, params) for name, params in CASES if not args.ops or name in args.ops]
        rows = [bench(name, params, args.repeat) for name, params in cases]
    print(json.dumps({
        "host": {"cpu": target.cpu, "avx512f": "+avx512f" in target.features.split(","),
                 "llvmlite": llvmlite.__version__, "llvm": ".".join(map(str, llvm.llvm_version_info))},
        "first_compile_s": round(warm_s, 4),
        "ops": rows,
    }, indent=1))


if __name__ == "__main__":
    main()
