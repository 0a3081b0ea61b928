"""A seeded, structure-aware fuzzer of Programs, run on fsim, the timing model and the RTL.

A case is a valid random program (`sim.random_programs`) and a short list of mutations, each
plain data so that a case replays anywhere (`FuzzCase.to_json`, the corpus of tests/sim):

* `bits`: one instruction field (or the opcode, or a reserved bit) set to an interesting value:
  0, 1, the field's maximum, a buffer's depth and its neighbours, a DRAM address past the image
  or past 4 GiB, maximal loop extents;
* `uop`: one field of one micro-op of the table, likewise;
* `flip`: one raw bit of the instruction stream or the micro-op table;
* `truncate` and `swap`: instructions dropped from the end, two instructions exchanged.

The oracle (`judge`): nothing but a WorkbenchError may escape a backend; a program refused before
it runs (`sim.validate`) is refused by all three with the same message; the timing model and
the RTL agree on the outcome and every functional counter (their cycle counts are compared
as the fidelity corpus compares them: `FuzzReport.max_cycle_error`); fsim and the RTL agree on
the outcome and, when both finish, on every output byte and functional counter.  A program
whose result depends on the interleaving of the modules (a race that mutated windows or
indices create between double-buffered halves) is told by running fsim under random legal
schedules: its fsim-vs-RTL difference is counted as `schedule_dependent`, not as a
disagreement.  `minimize` drops mutations while the case still fails.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hw import isa
from hw.config import AcceleratorConfig
from hw.errors import WorkbenchError
from hw.program import Program, Region
from sim.backend import Backend, InvalidProgramError, RunResult, SimulationError, Stats
from sim.differential import first_difference
from sim.limits import Limits
from sim.random_programs import RandomProgram, random_program

KINDS = ("bits", "uop", "flip", "truncate", "swap")
# Small enough that the largest program a mutation can make runs in well under a second.
FUZZ_LIMITS = Limits(insn_uops=1 << 14, program_uops=1 << 16)
FUZZ_MAX_CYCLES = 2_000_000
_SCHEDULE_SEEDS = (1, 2, 3, 4)


@dataclass(frozen=True)
class FuzzCase:
    """A random program (`base_seed`) of config `config`, and the mutations applied to it."""

    config: str
    base_seed: int
    mutations: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "base_seed": self.base_seed, "mutations": list(self.mutations)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FuzzCase:
        return cls(str(data["config"]), int(data["base_seed"]),
                   tuple(dict(m) for m in data["mutations"]))


@dataclass(frozen=True)
class Outcome:
    """How one backend ended: `ok`, `refused` (by `sim.validate`, before running; at `where`),
    `failed` (a SimulationError while running, at `where`), `deadlock` (no FINISH, or the
    modules stuck), `finish_early`, `error` (another WorkbenchError) or `crash` (anything else:
    a bug)."""

    kind: str
    message: str = ""
    where: int | None = None
    outputs: dict[str, np.ndarray] | None = None
    dram: np.ndarray | None = None
    stats: Stats | None = None


@dataclass
class FuzzReport:
    cases: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    schedule_dependent: int = 0
    max_cycle_error: float = 0.0  # |timing - rtl| / rtl cycles, over the programs both ran
    failures: list[tuple[FuzzCase, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"cases": self.cases, "mutations_by_kind": dict(self.by_kind),
                "outcomes": dict(self.outcomes), "schedule_dependent": self.schedule_dependent,
                "max_cycle_error": round(self.max_cycle_error, 4),
                "failures": [{"case": c.to_json(), "why": why} for c, why in self.failures]}


# -- mutations -------------------------------------------------------------------------------------


def _layout_of(word: int, cfg: AcceleratorConfig) -> isa.Layout:
    key = {int(isa.Opcode.LOAD): "mem", int(isa.Opcode.STORE): "mem",
           int(isa.Opcode.ALU): "alu"}.get(word & 0b111, "gemm")
    return isa.layouts(cfg)[key]


def _interesting(name: str, width: int, cfg: AcceleratorConfig, rng: random.Random,
                 current: int = 0) -> int:
    high = (1 << width) - 1
    if rng.random() < 0.4:  # a neighbour of the valid value: edge cases that still run
        return min(max(current + rng.choice((-2, -1, 1, 2)), 0), high)
    values = [0, 1, 2, 3, high, high - 1, 1 << (width - 1), rng.randint(0, high)]
    depths = [cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth]
    if name in ("sram_base", "uop_bgn", "uop_end", "dst", "src", "wgt") or name.endswith("factor_out") \
            or name.endswith("factor_in"):
        values += [d + k for d in depths for k in (-2, -1, 0, 1)]
    if name == "dram_base":
        values += [(1 << 32) // e + k for e in (1, 4, 16, 64) for k in (-1, 0, 1)]
    if name in ("iter_out", "iter_in", "y_size", "x_size", "x_stride"):
        values += [0, 64, 255, 4096]
    return min(max(rng.choice(values), 0), high)


def random_mutation(program: Program, cfg: AcceleratorConfig, rng: random.Random) -> dict[str, Any]:
    kind = rng.choices(KINDS, weights=(12, 4, 4, 1, 1))[0]
    n = len(program.insns)
    uops = program.constants.get("__uops")
    if n == 0:  # truncated to nothing already
        return {"kind": "truncate", "count": 0}
    if kind == "uop" and (uops is None or not len(uops)):
        kind = "bits"
    if kind == "bits":
        i = rng.randrange(n)
        word = int(program.insns[i, 0]) | (int(program.insns[i, 1]) << isa.WORD_BITS)
        layout = _layout_of(word, cfg)
        choice = rng.randrange(len(layout.fields) + 2)
        if choice < len(layout.fields):
            f = layout.fields[choice]
            current = (word >> f.offset) & ((1 << f.width) - 1)
            return {"kind": "bits", "insn": i, "field": f.name, "offset": f.offset,
                    "width": f.width, "value": _interesting(f.name, f.width, cfg, rng, current)}
        if choice == len(layout.fields):  # a reserved bit
            reserved = isa.reserved_mask(cfg, word & 0b111) if word & 0b111 <= 4 else 0
            bits = [b for b in range(isa.INSN_BITS) if reserved >> b & 1] or [127]
            return {"kind": "bits", "insn": i, "field": "reserved", "offset": rng.choice(bits),
                    "width": 1, "value": 1}
        return {"kind": "bits", "insn": i, "field": "opcode", "offset": 0, "width": 3,
                "value": rng.randrange(8)}
    if kind == "uop":
        assert uops is not None
        f = rng.choice(isa.layouts(cfg)["uop"].fields)
        k = rng.randrange(len(uops))
        current = (int(uops[k]) >> f.offset) & ((1 << f.width) - 1)
        return {"kind": "uop", "index": k, "field": f.name, "offset": f.offset, "width": f.width,
                "value": _interesting(f.name, f.width, cfg, rng, current)}
    if kind == "flip":
        target = "uops" if uops is not None and len(uops) and rng.random() < 0.3 else "insns"
        size = n * isa.INSN_BITS if target == "insns" else len(uops) * cfg.uop_elem_bits  # type: ignore[arg-type]
        return {"kind": "flip", "target": target, "bit": rng.randrange(size)}
    if kind == "truncate":
        return {"kind": "truncate", "count": rng.randrange(n)}
    a, b = rng.randrange(n), rng.randrange(n)
    return {"kind": "swap", "a": a, "b": b}


def apply(program: Program, cfg: AcceleratorConfig, mutations: tuple[dict[str, Any], ...]) -> Program:
    """`program` with `mutations` applied in order (mutations that no longer apply are skipped)."""
    words = [int(lo) | (int(hi) << isa.WORD_BITS) for lo, hi in program.insns.tolist()]
    constants = dict(program.constants)
    uops = [int(u) for u in constants.get("__uops", np.zeros(0, np.uint64)).tolist()]
    for m in mutations:
        kind = m["kind"]
        if kind == "bits" and m["insn"] < len(words):
            words[m["insn"]] = _set(words[m["insn"]], m["offset"], m["width"], m["value"])
        elif kind == "uop" and m["index"] < len(uops):
            uops[m["index"]] = _set(uops[m["index"]], m["offset"], m["width"], m["value"])
        elif kind == "flip" and m["target"] == "insns" and m["bit"] < len(words) * isa.INSN_BITS:
            words[m["bit"] // isa.INSN_BITS] ^= 1 << (m["bit"] % isa.INSN_BITS)
        elif kind == "flip" and m["target"] == "uops" and m["bit"] < len(uops) * cfg.uop_elem_bits:
            uops[m["bit"] // cfg.uop_elem_bits] ^= 1 << (m["bit"] % cfg.uop_elem_bits)
        elif kind == "truncate":
            words = words[: m["count"]]
        elif kind == "swap" and max(m["a"], m["b"]) < len(words):
            words[m["a"]], words[m["b"]] = words[m["b"]], words[m["a"]]
    mask = (1 << isa.WORD_BITS) - 1
    insns = np.array([[w & mask, w >> isa.WORD_BITS] for w in words], dtype=np.uint64).reshape(-1, 2)
    if "__uops" in constants:
        constants["__uops"] = np.array(uops, dtype=isa.uop_dtype(cfg))
    regions = tuple(Region(r.name, r.offset, insns.shape, r.dtype, r.role) if r.role == "insns" else r
                    for r in program.regions)
    return Program(program.fingerprint, insns, regions, constants, program.dram_bytes,
                   program.config_name)


def _set(word: int, offset: int, width: int, value: int) -> int:
    mask = ((1 << width) - 1) << offset
    return (word & ~mask) | ((value << offset) & mask)


def make_case(cfg: AcceleratorConfig, seed: int, *, max_mutations: int = 3) -> FuzzCase:
    """The case of fuzz seed `seed`: a random program and 1..max_mutations random mutations."""
    rng = random.Random(f"fuzz-{seed}")
    base = rng.randrange(1 << 30)
    program = random_program(cfg, base).program
    mutations = []
    for _ in range(rng.randint(1, max_mutations)):
        mutation = random_mutation(program, cfg, rng)
        mutations.append(mutation)
        program = apply(program, cfg, (mutation,))
    return FuzzCase(cfg.name, base, tuple(mutations))


def build(case: FuzzCase, cfg: AcceleratorConfig) -> RandomProgram:
    base = random_program(cfg, case.base_seed)
    return RandomProgram(base.seed, apply(base.program, cfg, case.mutations), base.inputs)


# -- running and judging ------------------------------------------------------------------------

_WHERE = re.compile(r"^instruction #(\d+)")


def outcome(backend: Backend, rp: RandomProgram) -> Outcome:
    """Run `rp` on `backend` and classify how it ended (never raises)."""
    try:
        result = backend.run(rp.program, rp.inputs)
    except InvalidProgramError as exc:
        found = _WHERE.match(str(exc))
        return Outcome("refused", str(exc), int(found[1]) if found else None)
    except SimulationError as exc:
        text = str(exc)
        found = _WHERE.match(text)
        if "executed before other instructions" in text:
            return Outcome("finish_early", text)
        if re.search(r"deadlock|without FINISH|no FINISH within", text):
            return Outcome("deadlock", text)
        return Outcome("failed", text, int(found[1]) if found else None)
    except WorkbenchError as exc:
        return Outcome("error", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the oracle's point: anything else is a bug
        return Outcome("crash", f"{type(exc).__name__}: {exc}")
    return Outcome("ok", outputs=result.outputs, dram=result.dram, stats=result.stats)


def judge(rp: RandomProgram, cfg: AcceleratorConfig, runs: dict[str, Outcome],
          fsim_seeded: list[Backend]) -> tuple[str | None, bool]:
    """(why the three disagree or None, whether fsim's result depends on the schedule)."""
    for name, out in runs.items():
        if out.kind in ("crash", "error"):
            return f"{name} {out.kind}: {out.message}", False
    f, t, r = runs["fsim"], runs["timing"], runs["rtl"]
    if "refused" in (f.kind, t.kind, r.kind):
        texts = {n: o.message if o.kind == "refused" else o.kind for n, o in runs.items()}
        return (None if len(set(texts.values())) == 1 else f"refusals differ: {texts}"), False
    if t.kind != r.kind:
        return f"timing {t.kind} but rtl {r.kind}: {t.message or r.message}", False
    if t.kind == "ok" and r.kind == "ok" and t.stats.functional() != r.stats.functional():  # type: ignore[union-attr]
        return f"timing and rtl counters differ: {_stats_diff(t.stats, r.stats)}", False
    if t.kind == "ok" and f.kind == "ok":
        assert t.stats is not None and f.stats is not None
        if t.stats.functional() != f.stats.functional():
            return f"timing and fsim counters differ: {_stats_diff(t.stats, f.stats)}", False
    why = _fsim_vs_rtl(rp, cfg, f, r)
    if why is None:
        return None, False
    if any(_differs(rp, cfg, f, outcome(sim, rp)) for sim in fsim_seeded):
        return None, True
    return why, False


def _fsim_vs_rtl(rp: RandomProgram, cfg: AcceleratorConfig, f: Outcome, r: Outcome) -> str | None:
    if f.kind != r.kind:
        return f"fsim {f.kind} but rtl {r.kind}: {f.message or r.message}"
    if f.kind == "failed" and f.where != r.where:
        return f"fsim failed at #{f.where} but rtl at #{r.where}: {f.message}"
    if f.kind != "ok":
        return None
    return _differs(rp, cfg, f, r)


def _differs(rp: RandomProgram, cfg: AcceleratorConfig, a: Outcome, b: Outcome) -> str | None:
    if a.kind != b.kind:
        return f"{a.kind} vs {b.kind}"
    if a.kind != "ok":
        return None
    return first_difference(rp.program, cfg, RunResult(a.outputs or {}, a.stats or Stats(), a.dram),  # type: ignore[arg-type]
                            RunResult(b.outputs or {}, b.stats or Stats(), b.dram))  # type: ignore[arg-type]


def _stats_diff(a: Stats | None, b: Stats | None) -> str:
    da, db = (a or Stats()).to_dict(), (b or Stats()).to_dict()
    return ", ".join(f"{k}: {da[k]} != {db[k]}" for k in da if da[k] != db[k])


class Fuzzer:
    """The three backends of `cfg`, built once, under the fuzzing limits."""

    def __init__(self, cfg: AcceleratorConfig, *, rtl: bool = True) -> None:
        from sim.backends import make_backend

        self.cfg = cfg
        self.backends: dict[str, Backend] = {
            "fsim": make_backend("fsim", cfg, limits=FUZZ_LIMITS),
            "timing": make_backend("timing", cfg, limits=FUZZ_LIMITS, max_cycles=FUZZ_MAX_CYCLES),
        }
        if rtl:
            self.backends["rtl"] = make_backend("rtl", cfg, limits=FUZZ_LIMITS,
                                                max_cycles=FUZZ_MAX_CYCLES, idle_limit=20_000)
        self.seeded = [make_backend("fsim", cfg, seed=s, limits=FUZZ_LIMITS) for s in _SCHEDULE_SEEDS]

    def check(self, case: FuzzCase) -> tuple[str | None, dict[str, Outcome], bool]:
        rp = build(case, self.cfg)
        runs = {name: outcome(b, rp) for name, b in self.backends.items()}
        if "rtl" not in runs:
            runs["rtl"] = runs["timing"] if runs["timing"].kind != "ok" else _as_rtl(runs)
        why, racy = judge(rp, self.cfg, runs, self.seeded)
        return why, runs, racy

    def minimize(self, case: FuzzCase) -> FuzzCase:
        """`case` with every mutation dropped that is not needed for it to fail."""
        current = case
        for m in case.mutations:
            smaller = FuzzCase(current.config, current.base_seed,
                               tuple(x for x in current.mutations if x is not m))
            if smaller.mutations and self.check(smaller)[0] is not None:
                current = smaller
        return current

    def run(self, seeds: range, report: FuzzReport | None = None) -> FuzzReport:
        report = report or FuzzReport()
        for seed in seeds:
            case = make_case(self.cfg, seed)
            report.cases += 1
            report.by_kind.update(m["kind"] for m in case.mutations)
            why, runs, racy = self.check(case)
            report.outcomes[runs["fsim"].kind] += 1
            report.schedule_dependent += racy
            t, r = runs["timing"].stats, runs["rtl"].stats
            if t is not None and r is not None and r.cycles:
                error = abs((t.cycles or 0) - r.cycles) / r.cycles
                report.max_cycle_error = max(report.max_cycle_error, error)
            if why is not None:
                small = self.minimize(case)
                report.failures.append((small, self.check(small)[0] or why))
        return report


def _as_rtl(runs: dict[str, Outcome]) -> Outcome:
    """Without the RTL, fsim's values with the timing model's stats stand in for it."""
    f, t = runs["fsim"], runs["timing"]
    if f.kind != "ok":
        return t
    return Outcome("ok", outputs=f.outputs, dram=f.dram, stats=t.stats)


def save(case: FuzzCase, directory: Path, why: str) -> Path:
    """Write `case` into the corpus `directory` (named by its content), with why it failed."""
    text = json.dumps({**case.to_json(), "why": why.splitlines()[0][:300]}, indent=1, sort_keys=True)
    digest = hashlib.sha256(json.dumps(case.to_json(), sort_keys=True).encode()).hexdigest()[:8]
    path = directory / f"{case.config}-{case.base_seed}-{digest}.json"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path
