"""Hashes of everything a refactor must leave unchanged: the zoo models' ONNX files, their
.cmodel contents and every accelerator Program they compile to (on `vta` and `tiny`), and the
`--json` output of every command with its timings and cache counters removed.

    python benchmarks/artifact_hashes.py [--quick] > hashes.json

Run it on two commits and compare the files: any key whose hash differs names what changed.
`--quick` leaves out MobileNetV2, bert-tiny and the RTL runs. It drives the command line (the
stable interface) in subprocesses and reads Programs through the Python API.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("mlp", "digits", "resnet18", "mobilenetv2", "bert-tiny")
CONFIGS = ("vta", "tiny")
# keys whose values are wall-clock times or depend on what a cache held before the run
VOLATILE = re.compile(r"(^seconds|_s|_ms|_seconds|per_s|_per_second|speedup|_rate|ratio|from_disk_cache|"
                      r"kernels_from_disk|records_from_disk|cached|wall|elapsed)$")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def scrub(value: Any) -> Any:
    """`value` without volatile keys (at any depth) and with paths reduced to their names."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, str) and os.sep in value:
        return re.sub(r"\S*/", "", value)  # paths (of temporary folders too) reduced to names
    return value


def cli(*args: str) -> Any:
    """Run `codesign ARGS --json` and return its output, scrubbed; a failure is recorded too."""
    done = subprocess.run([sys.executable, "-m", "codesign", *args, "--json"], capture_output=True,
                          text=True, env={**os.environ, "CODESIGN_KERNEL_CACHE": "off"})
    if done.returncode != 0:
        return {"exit": done.returncode, "stderr": scrub(done.stderr.strip().splitlines()[-1:])}
    return scrub(json.loads(done.stdout))


def array_digest(h: Any, a: np.ndarray) -> None:
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).tobytes())


def cmodel_digest(path: Path) -> str:
    """The .cmodel's contents (metadata with paths reduced to names, every constant), not its
    zip container, which records the time it was written."""
    h = hashlib.sha256()
    with np.load(path, allow_pickle=False) as archive:
        for name in sorted(archive.files):
            a = archive[name]
            if name == "meta":
                h.update(json.dumps(scrub(json.loads(str(a))), sort_keys=True).encode())
            else:
                array_digest(h, a)
    return h.hexdigest()[:16]


def _load_cmodel(path: Path) -> Any:
    for module in ("compiler.driver", "compiler.runtime.serialize"):  # after / before the refactor
        try:
            return importlib.import_module(module).load(str(path))
        except (ImportError, AttributeError):
            continue
    raise RuntimeError("no .cmodel loader found")


def program_digests(path: Path) -> dict[str, str]:
    """Every accelerator step's Program of a .cmodel: instructions, regions, constants."""
    loaded = _load_cmodel(path)
    model = loaded[0] if isinstance(loaded, tuple) else loaded
    out = {}
    for i, step in enumerate(model.steps):
        if step.accel is None:
            continue
        program = step.accel.compiled.built.program
        h = hashlib.sha256()
        h.update(program.fingerprint.encode())
        array_digest(h, program.insns)
        h.update(repr(program.regions).encode())
        for name in sorted(program.constants):
            h.update(name.encode())
            array_digest(h, program.constants[name])
        out[f"{i}:{step.node.name}"] = h.hexdigest()[:16]
    return out


def model_artifacts(work: Path, models: tuple[str, ...], rtl: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"models list": cli("models", "list")}
    for name in models:
        onnx_path = work / f"{name}.onnx"
        out[f"export {name}"] = cli("models", "export", name, "-o", str(onnx_path))
        out[f"onnx {name}"] = digest(onnx_path.read_bytes())
        for cfg in CONFIGS:
            cmodel = work / f"{name}-{cfg}.cmodel"
            out[f"compile {name} {cfg}"] = cli("compile", str(onnx_path), "--config", cfg, "-o", str(cmodel))
            out[f"cmodel {name} {cfg}"] = cmodel_digest(cmodel)
            out[f"programs {name} {cfg}"] = program_digests(cmodel)
            out[f"run {name} {cfg} fsim"] = cli("run", str(cmodel), "--backend", "fsim", "--inputs", "2")
            out[f"run {name} {cfg} timing"] = cli("run", str(cmodel), "--backend", "timing", "--inputs", "1")
        if rtl:
            out[f"run {name} tiny rtl"] = cli("run", str(work / f"{name}-tiny.cmodel"), "--backend", "rtl",
                                              "--inputs", "1")
    mlp = str(work / "mlp.onnx")
    out["sensitivity mlp"] = cli("sensitivity", mlp, "--inputs", "4")
    out["run mlp onnx float-layers"] = cli("run", mlp, "--inputs", "2", "--float-layers", "*")
    out["compile mlp bad shape"] = cli("compile", mlp, "-o", str(work / "x.cmodel"), "--input-shape", "x=1")
    return out


def command_artifacts(work: Path, rtl: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cfg in ("vta", "tiny", "rect"):
        out[f"config show {cfg}"] = cli("config", "show", cfg)
    out["sim selftest fsim tiny"] = cli("sim", "selftest", "--backend", "fsim", "--config", "tiny")
    out["sim selftest timing tiny"] = cli("sim", "selftest", "--backend", "timing", "--config", "tiny")
    backends = ("fsim", "timing", "rtl") if rtl else ("fsim", "timing")
    ops = {"conv2d": ("--in", "1,16,14,14", "--out-channels", "32", "--pad", "1"),
           "dense": ("--m", "4", "--k", "64", "--n", "48"),
           "add": ("--shape", "1,16,8,8", "--requant-shift", "1"),
           "clip": ("--shape", "1,16,8,8", "--low", "0")}
    for cfg in CONFIGS:
        for op, shape in ops.items():
            for backend in backends:
                if backend == "rtl" and cfg != "tiny":
                    continue
                out[f"op {op} {cfg} {backend}"] = cli("op", op, *shape, "--config", cfg, "--backend", backend)
    out["op conv2d bad"] = cli("op", "conv2d", "--in", "1,16,14,14", "--out-channels", "32", "--kernel", "0")
    log = work / "tune.jsonl"
    out["tune op dense tiny"] = cli("tune", "op", "dense", "--m", "16", "--k", "64", "--n", "64", "--config",
                                    "tiny", "--trials", "6", "--method", "random", "--workers", "0",
                                    "--log", str(log))
    out["op dense tiny tuned"] = cli("op", "dense", "--m", "16", "--k", "64", "--n", "64", "--config", "tiny",
                                     "--tuning-log", str(log))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="leave out MobileNetV2, bert-tiny and RTL runs")
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    models = MODELS[:3] if args.quick else MODELS
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = {**command_artifacts(work, not args.quick), **model_artifacts(work, models, not args.quick)}
    print(json.dumps({k: out[k] if isinstance(out[k], str) else {"hash": digest(json.dumps(
        out[k], sort_keys=True).encode()), "value": out[k]} for k in out}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
