"""`codesign bench gpu`: the GPU target on a real GPU, in one run that prints JSON.

For each model (ResNet-18, MobileNetV2, bert-tiny by default): compiled by our GPU target and run
through the CUDA driver, compared with onnxruntime fp32 (max error, cosine, top-1) and timed
(median latency, inputs uploaded and outputs downloaded included), next to PyTorch's eager and
CUDA-graph latency where torch is installed (the zoo's ONNX converted by onnx2torch, else
torchvision's / transformers' definition of the same architecture with random weights: the
same shapes and operators, so the same work).  Then the largest ResNet-18 convolution (by
FLOPs) alone: the default schedule and the best of the first `tune_points` points of its
schedule space, timed with CUDA events, in GFLOP/s against the device's fp32 peak (and cuDNN's
time for the same convolution where torch is installed).

`offline=True` needs no GPU: every kernel of the models is compiled to PTX and assembled by
ptxas for `arch` (registers, spills), which checks this script's compile path anywhere.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from codesign import zoo

MODELS = ("resnet18", "mobilenetv2", "bert-tiny")
TORCH_NAMES = {"resnet18": "resnet18", "mobilenetv2": "mobilenet_v2"}


def gpu_check(models: tuple[str, ...] = MODELS, repeat: int = 20, warmup: int = 3, tune_points: int = 24,
              offline: bool = False, arch: str = "sm_80") -> dict[str, Any]:
    """The JSON report (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: _save(name, Path(tmp)) for name in models}
        if offline:
            compiled = {n: _offline(p, arch) for n, p in paths.items()}
            return {"mode": "offline", "arch": arch, "models": compiled}
        from codesign.run.gpu import require_gpu
        from compiler.runtime.gpu_driver import device_target

        require_gpu("codesign bench gpu")
        target = device_target()
        report: dict[str, Any] = {"mode": "device", "device": target.to_json(), "models": {}}
        for name, path in paths.items():
            report["models"][name] = _guarded(_model, name, path, repeat, warmup)
        if "resnet18" in paths:
            report["largest_resnet18_conv"] = _guarded(_largest_conv, paths["resnet18"], target, tune_points,
                                                       repeat)
        return report


def _guarded(part: Any, *args: Any) -> dict[str, Any]:
    """One part of the report; an exception is recorded in it (the rest still runs: a device
    session may have one try)."""
    import traceback

    try:
        return part(*args)  # type: ignore[no-any-return]
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500],
                "traceback": traceback.format_exc().splitlines()[-6:]}


def _save(name: str, folder: Path) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(zoo.build(name), path)
    return path


def _offline(path: Path, arch: str) -> dict[str, Any]:
    from compiler.codegen.gpu import assemble
    from compiler.frontend import import_onnx
    from compiler.graph.passes import simplify
    from compiler.runtime.gpu_model import plan_gpu_steps
    from compiler.target.gpu import gpu_preset

    start = time.perf_counter()
    steps = plan_gpu_steps(simplify(import_onnx(str(path))), gpu_preset(arch))
    compile_s = time.perf_counter() - start
    kernels = {s.kernel.ptx: s.kernel for s in steps if s.kernel is not None}
    infos = [assemble(k.ptx, arch)[1][0] for k in kernels.values()]
    return {"steps": len(steps), "gpu_steps": sum(s.where == "gpu" for s in steps),
            "fallbacks": sorted({s.op for s in steps if s.where == "host-numpy"}),
            "distinct_kernels": len(kernels), "compile_s": round(compile_s, 2),
            "max_registers": max(i.registers for i in infos),
            "spill_bytes": sum(i.spill_store_bytes + i.spill_load_bytes for i in infos)}


def _model(name: str, path: Path, repeat: int, warmup: int) -> dict[str, Any]:
    from codesign.run.device import OnnxRuntimeDevice
    from codesign.run.gpu import GpuDevice, load_gpu

    model, graph, data, compile_s = load_gpu(str(path))
    device = GpuDevice(model)
    feeds = zoo.sample_inputs(name, 1, seed=0)[0]
    reference = OnnxRuntimeDevice(data, name="onnxruntime fp32")
    want = reference.infer(feeds).outputs[reference.output_names[0]]
    got = device.infer(feeds).outputs[graph.outputs[0]]
    out: dict[str, Any] = {"compile_s": round(compile_s, 2), "fallbacks": model.fallbacks(),
                           "kernels": len(model.kernels()), **_agreement(want, got)}
    out["gpu_ms"] = _median_ms(lambda: device.infer(feeds), repeat, warmup)
    out["kernels_ms"] = _guarded(_kernel_times, model, repeat)
    out["onnxruntime_cpu_ms"] = _median_ms(lambda: reference.infer(feeds), repeat, warmup)
    out["pytorch"] = _torch_latency(name, path, feeds, repeat, warmup)
    return out


def _kernel_times(model: Any, repeat: int) -> dict[str, Any]:
    """Each kernel timed alone with CUDA events on the last run's tensors: their sum (the model's
    time without copies, host steps and launch gaps) and the five slowest."""
    executor = model.executor
    times = [(step.name, step.op, executor.time_kernel(step.kernel, args, repeat))
             for step, args in model.kernel_args()]
    slowest = sorted(times, key=lambda t: -t[2])[:5]
    return {"sum": round(sum(t[2] for t in times) * 1e3, 4),
            "slowest": [{"step": n, "op": op, "ms": round(sec * 1e3, 4)} for n, op, sec in slowest]}


def _agreement(want: np.ndarray, got: np.ndarray) -> dict[str, Any]:
    w, g = want.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    cosine = float(w @ g / (np.linalg.norm(w) * np.linalg.norm(g) + 1e-30))
    out = {"max_abs_error": float(np.abs(w - g).max()), "max_abs_reference": float(np.abs(w).max()),
           "cosine": cosine, "within_1e-3_relative": bool(np.abs(w - g).max() <= 1e-3 * np.abs(w).max())}
    if want.ndim == 2 and want.shape[0] == 1:
        out["top1_agrees"] = bool(int(want.argmax()) == int(got.argmax()))
    return out


def _median_ms(run: Any, repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return round(float(np.median(times)) * 1e3, 4)


def _largest_conv(path: Path, target: Any, tune_points: int, repeat: int) -> dict[str, Any]:
    from compiler.frontend import import_onnx
    from compiler.graph.passes import simplify
    from compiler.ops.gpu import Conv2d
    from compiler.runtime.gpu import CudaExecutor, compile_kernel
    from compiler.runtime.gpu_model import gpu_op_for
    from compiler.tune.gpu import tune_op

    graph = simplify(import_onnx(str(path)))
    convs = [found[0] for node in graph.nodes if node.op == "Conv"
             if (found := gpu_op_for(graph, node, set())) is not None]
    op = max((c for c in convs if isinstance(c, Conv2d)), key=lambda c: c.flops())
    executor = CudaExecutor()
    args = [executor.upload(x) for x in op.random_inputs(0)] + [executor.empty(op.out_shape)]
    peak = target.peak_fp32_flops

    def measure(knobs: Any) -> float:
        return executor.time_kernel(compile_kernel(op, target, knobs), args, repeat)

    tuned = tune_op(op, target, measure, tune_points)
    default, default_s, best, best_s = tuned.default, tuned.default_s, tuned.best, tuned.best_s
    gflop = op.flops() / 1e9

    def point(knobs: Any, seconds: float) -> dict[str, Any]:
        return {"knobs": knobs.to_json(), "ms": round(seconds * 1e3, 4), "gflops": round(gflop / seconds, 1),
                "peak_fraction": round(gflop * 1e9 / seconds / peak, 4)}

    return {"shape": list(op.shape), "weight_shape": list(op.weight_shape), "stride": list(op.stride),
            "gflop": round(gflop, 4), "peak_gflops": round(peak / 1e9, 1),
            "default": point(default, default_s),
            "best": {**point(best, best_s), "points_measured": tuned.measured,
                     "points_skipped": tuned.skipped},
            "cudnn": _torch_conv(op, repeat)}


def _torch_module(name: str, path: Path) -> tuple[Any, str] | None:
    """A torch module computing `name` and where it came from, or None."""
    try:
        import onnx2torch

        return onnx2torch.convert(str(path)), "onnx2torch (the zoo's model and weights)"
    except Exception:  # not installed, or an operator it does not convert
        pass
    if name in TORCH_NAMES:
        try:
            import torchvision

            make = getattr(torchvision.models, TORCH_NAMES[name])
            return make(weights=None), "torchvision (random weights)"
        except Exception:
            return None
    if name == "bert-tiny":
        try:
            import transformers

            config = transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                              intermediate_size=512)
            return transformers.BertModel(config), "transformers BertModel (random weights)"
        except Exception:
            return None
    return None


def _torch_latency(name: str, path: Path, feeds: dict[str, np.ndarray], repeat: int,
                   warmup: int) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"skipped": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"skipped": "torch sees no CUDA device"}
    found = _torch_module(name, path)
    if found is None:
        return {"skipped": "no torch definition of this model (onnx2torch, torchvision, transformers)"}
    module, source = found
    module = module.eval().cuda()
    args = [torch.from_numpy(np.ascontiguousarray(v)).cuda() for v in feeds.values()]
    out: dict[str, Any] = {"source": source}
    with torch.inference_mode():
        def eager() -> None:
            module(*args)
            torch.cuda.synchronize()

        out["eager_ms"] = _median_ms(eager, repeat, warmup)
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    module(*args)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                module(*args)

            def replay() -> None:
                graph.replay()
                torch.cuda.synchronize()

            out["cuda_graph_ms"] = _median_ms(replay, repeat, warmup)
        except Exception as exc:  # a module that cannot be captured
            out["cuda_graph_skipped"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def _torch_conv(op: Any, repeat: int) -> dict[str, Any]:
    try:
        import torch
    except ImportError:
        return {"skipped": "torch is not installed"}
    if not torch.cuda.is_available():
        return {"skipped": "torch sees no CUDA device"}
    torch.backends.cudnn.benchmark = True
    x = torch.randn(*op.shape, device="cuda")
    w = torch.randn(*op.weight_shape, device="cuda")
    pt, pl, pb, pr = op.pad
    if (pt, pl) != (pb, pr):
        return {"skipped": "asymmetric padding"}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False  # fp32 as ours: no TF32 tensor cores
    with torch.inference_mode():
        def run() -> None:
            torch.nn.functional.conv2d(x, w, stride=op.stride, padding=(pt, pl), groups=op.group)
            torch.cuda.synchronize()

        ms = _median_ms(run, repeat, 5)
    gflop = op.flops() / 1e9
    return {"ms": ms, "gflops": round(gflop / (ms / 1e3), 1), "tf32": False}


def main_report(offline: bool = False) -> dict[str, Any]:
    """The default run (the thin caller benchmarks/gpu_check.py prints it)."""
    start = time.perf_counter()
    report = gpu_check(offline=offline)
    report["wall_s"] = round(time.perf_counter() - start, 1)
    return report


__all__ = ["MODELS", "gpu_check", "main_report"]
