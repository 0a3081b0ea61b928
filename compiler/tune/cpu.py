"""The CPU target's schedule spaces, and a tuner that measures their points on this host.

A convolution's "channels" schedule (compiler.ops.cpu.convbase) has two knobs: `pixels`, the
register tile's output pixels (each divisor of the output width up to the target's vector
registers less two), and `order`, which loop is outermost ("channels": a block's weights stay in
cache over the image; "rows": a row's inputs stay in cache over every block).  The space is
derived from the target (compiler.target.cpu.CpuTarget: vector width and registers; the default
order from its L2 size), so every point of it is a legal schedule; a knob outside it is a
ScheduleError naming the reason.

`tune_conv` measures the default schedule first and then every point, keeping the default unless
a point is faster as measured, twice (the winner and the default measured again, alternately:
so a tuned model is never slower than the default, up to the noise of the host), and
`tune_model` does that for each distinct convolution of a CpuModel's plan, within a time budget:
its result is the `tuned` table CpuModel.compile takes.  `write_log` keeps a search as a JSON
tuning log (the host's CPU, the model, every convolution's default and best), `read_log` gives
its table back (`codesign tune model M --target cpu --log F`, then `--tuning-log F` on
`codesign compile|run|compare`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.ops.cpu import compile_host_op, host_op
from compiler.ops.cpu.convbase import ConvOp, max_pixels, register_tile
from compiler.target.cpu import CpuTarget, host_target
from hw.errors import InputError

CONV_OPS = ("conv2d", "qconv2d")
KNOBS = ("pixels", "order")
Knobs = dict[str, Any]


def conv_space(name: str, params: Mapping[str, Any], target: CpuTarget | None = None) -> list[Knobs]:
    """Every register tile of convolution `name` with `params` on `target`: pixels (divisors of
    the output width, at most max_pixels) x order; empty where the op takes another schedule."""
    target = host_target() if target is None else target
    op = _op(name, params)
    if op.chosen_strategy != "channels" or not register_tile(op.out_hw[1], op.weight_shape[0],
                                                               op.acc_dtype, target)[1]:
        return []
    width = op.out_hw[1]
    pixels = [p for p in range(1, max_pixels(target) + 1) if width % p == 0]
    return [{"pixels": p, "order": o} for o in ("channels", "rows") for p in pixels]


def spec_key(name: str, params: Mapping[str, Any]) -> str:
    """A convolution's identity without its tile knobs: the tuned table's key."""
    rest = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items() if k not in KNOBS}
    return json.dumps([name, rest], sort_keys=True, default=str)


@dataclass(frozen=True)
class ConvTuning:
    """One convolution's search: the `best` knobs ({} : the default), the seconds of the
    default and of the best, and how many points were measured."""

    name: str
    params: dict[str, Any]
    best: Knobs
    default_s: float
    best_s: float
    trials: int

    def to_json(self) -> dict[str, Any]:
        return {"op": self.name, "key": spec_key(self.name, self.params), "best": self.best,
                "default_s": self.default_s, "best_s": self.best_s, "trials": self.trials}


def measure(name: str, params: Mapping[str, Any], repeat: int = 5) -> float:
    """The fastest of `repeat` runs of the op's kernel on seeded inputs, in seconds (the
    fastest, not the median: on a shared host the other runs measure the neighbours)."""
    op = _op(name, params)
    kernel = compile_host_op(name, **params)
    inputs = op.random_inputs(0)
    if getattr(op, "packed", False) and inputs[1].shape != op.packed_weight_shape:
        inputs[1] = op.pack_weight(inputs[1])
    out = np.empty(op.out_shape, np.float32 if op.acc_dtype == "float32" else np.int8)
    call = kernel.bind(*inputs, out)
    call()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def tune_conv(name: str, params: Mapping[str, Any], repeat: int = 5,
              target: CpuTarget | None = None) -> ConvTuning:
    """Measure the default, then every point of `conv_space`; the fastest ({} if the default)."""
    base = {k: v for k, v in params.items() if k not in KNOBS}
    default_s = measure(name, base, repeat)
    best, best_s, trials = {}, default_s, 1
    for knobs in conv_space(name, base, target):
        seconds = measure(name, {**base, **knobs}, repeat)
        trials += 1
        if seconds < best_s:
            best, best_s = knobs, seconds
    if best:  # confirm: the default and the winner again, alternately, the winner must still win
        again_default = min(default_s, measure(name, base, repeat))
        again_best = measure(name, {**base, **best}, repeat)
        default_s, best_s = again_default, min(best_s, again_best)
        if again_best >= again_default:
            best, best_s = {}, again_default
    return ConvTuning(name, dict(base), best, default_s, best_s, trials)


def tune_model(specs: list[tuple[str, dict[str, Any]]], repeat: int = 5,
               progress: Callable[[int, int], None] | None = None,
               budget_s: float | None = None) -> list[ConvTuning]:
    """`tune_conv` for each distinct convolution among `specs` (a CpuModel's steps' host ops),
    the most frequent and largest first; none started once `budget_s` seconds have passed (the
    rest keep their defaults)."""
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    work: dict[str, int] = {}  # multiply-adds of every step that runs the convolution
    for name, params in specs:
        if name in CONV_OPS:
            key = spec_key(name, params)
            seen.setdefault(key, (name, params))
            work[key] = work.get(key, 0) + conv_macs(_op(name, params))
    order = sorted(seen, key=lambda k: -work[k])
    start, out = time.perf_counter(), []
    for n, (name, params) in enumerate(seen[k] for k in order):
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
        out.append(tune_conv(name, params, repeat))
        if progress is not None:
            progress(n + 1, len(seen))
    return out


LOG_FORMAT = "codesign-cpu-tuning/1"


def write_log(path: str | Path, results: list[ConvTuning], *, model: str, precision: str,
              target: CpuTarget | None = None) -> None:
    """A tuning log: the host's CPU (`target`'s), the model, and every convolution's search."""
    target = host_target() if target is None else target
    record = {"format": LOG_FORMAT, "cpu": target.cpu, "target": target.to_json(), "model": model,
              "precision": precision, "convolutions": [r.to_json() for r in results]}
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


def read_log(path: str | Path, target: CpuTarget | None = None) -> dict[str, Knobs]:
    """The `tuned` table of a tuning log (`write_log`): InputError for a file that is missing,
    not such a log, or measured on another CPU than `target` (the host by default)."""
    target = host_target() if target is None else target
    try:
        record = json.loads(Path(path).read_bytes())
    except OSError as e:
        raise InputError(f"tuning log {path}: {e.strerror or e}") from None
    except ValueError:
        raise InputError(f"tuning log {path} is not JSON") from None
    if not isinstance(record, dict) or record.get("format") != LOG_FORMAT:
        raise InputError(f"{path} is no CPU tuning log (codesign tune model MODEL --target cpu --log FILE)")
    if record.get("cpu") != target.cpu:
        cpu = record.get("cpu")
        shown = cpu if isinstance(cpu, str) and cpu.isprintable() else repr(cpu)  # one line
        raise InputError(f"tuning log {path} was measured on a {shown} CPU; this host is a "
                         f"{target.cpu}: tune again here")
    convolutions = record.get("convolutions", [])
    if not isinstance(convolutions, list):
        raise InputError(f"tuning log {path}: convolutions is not a list")
    for i, c in enumerate(convolutions):
        if not (isinstance(c, dict) and isinstance(c.get("key"), str) and _are_knobs(c.get("best") or {})):
            raise InputError(f"tuning log {path}: convolution {i} is not an object with a key (a string) "
                             "and best knobs (an object of integers and strings)")
    return {c["key"]: c["best"] for c in convolutions if c.get("best")}


def _are_knobs(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, (int, str)) and not isinstance(v, bool) for v in value.values())


def tuned_table(results: list[ConvTuning]) -> dict[str, Knobs]:
    """The table CpuModel.compile takes: spec_key -> knobs, for the convolutions tuning sped up."""
    return {spec_key(r.name, r.params): r.best for r in results if r.best}


def conv_macs(op: ConvOp) -> int:
    """A convolution's multiply-adds."""
    _, cg, r, s = op.weight_shape
    return int(np.prod(op.out_shape)) * cg * r * s


def _op(name: str, params: Mapping[str, Any]) -> ConvOp:
    op = host_op(name, **params)
    assert isinstance(op, ConvOp), f"{name} is not a convolution"
    return op
