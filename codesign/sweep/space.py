"""A design space: the hardware parameters a sweep varies, its constraints, workloads and
objectives, read from a TOML file (README.md, "Design spaces", documents the format).

The space is the product of its dimensions (one per varied parameter, in `VARIABLE` order, the
last varying fastest).  A combination that `AcceleratorConfig` refuses only jointly (a scratchpad
too small for the tile of a wider core) is *invalid* and skipped; a valid config that breaks a
constraint (SRAM, MACs per cycle, area) is *infeasible*; the rest are the space's points.  Both
are counted (`census`), never errors.  Anything wrong in the file itself is refused when it is
loaded, before anything runs, by one `SpaceError` line naming the key and the rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesign.sweep.records import WorkloadSpec
from codesign.sweep.spacefile import SpaceError, parse_space
from hw.config import AcceleratorConfig, ConfigError

# The parameters a space may vary, in the order a space enumerates them.
VARIABLE = ("batch", "block_in", "block_out", "uop_bytes", "inp_bytes", "wgt_bytes", "acc_bytes",
            "bus_bits", "max_burst_beats", "mem_inflight", "cmd_queue_depth")
# Each objective and the PointResult metric it minimises.
OBJECTIVES = {"latency": "latency_cycles", "area": "area_mm2", "energy": "energy_uj", "edp": "edp"}
LAYER_OBJECTIVES = ("cycles", "energy", "edp")
BATCH_POLICIES = ("pad", "raise")
AreaModel = Callable[[AcceleratorConfig], float]  # mm2 of a config


def point_id(cfg: AcceleratorConfig) -> str:
    """16 hex digits of sha256 over the canonical JSON of every parameter but the name (the
    simulation-only DRAM model and clock included): the same config has the same id in every run."""
    params = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name != "name"}
    params["clock_mhz"] = float(params["clock_mhz"])  # 100 and 100.0 are one clock
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Point:
    """One hardware point of a space: its config, and the config's stable `id`."""

    config: AcceleratorConfig
    id: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", point_id(self.config))

    def params(self, names: tuple[str, ...] = VARIABLE) -> dict[str, Any]:
        return {name: getattr(self.config, name) for name in names}


@dataclass(frozen=True)
class Dimension:
    """One varied parameter and its values, in the order the file gives them."""

    name: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Constraints:
    """Budgets a point must meet; None: no bound.  SRAM is the sum of the five scratchpads
    (uop, inp, wgt, acc and the out buffer derived from acc)."""

    max_area_mm2: float | None = None
    max_sram_bytes: int | None = None
    min_macs_per_cycle: int | None = None
    max_macs_per_cycle: int | None = None

    def violation(self, cfg: AcceleratorConfig, area_mm2: AreaModel | None) -> tuple[str, str] | None:
        """(kind, reason) of the first constraint `cfg` breaks, or None."""
        sram = sram_bytes(cfg)
        macs = cfg.macs_per_cycle
        if self.max_sram_bytes is not None and sram > self.max_sram_bytes:
            return "sram", f"{sram} bytes of SRAM is over max_sram_bytes {self.max_sram_bytes}"
        if self.min_macs_per_cycle is not None and macs < self.min_macs_per_cycle:
            return "macs", f"{macs} MACs per cycle is below min_macs_per_cycle {self.min_macs_per_cycle}"
        if self.max_macs_per_cycle is not None and macs > self.max_macs_per_cycle:
            return "macs", f"{macs} MACs per cycle is above max_macs_per_cycle {self.max_macs_per_cycle}"
        if self.max_area_mm2 is not None:
            if area_mm2 is None:
                raise SpaceError("the space has max_area_mm2 but no area model was given to check it")
            area = area_mm2(cfg)
            if area > self.max_area_mm2:
                return "area", f"{area:.4g} mm2 is over max_area_mm2 {self.max_area_mm2:g}"
        return None


def sram_bytes(cfg: AcceleratorConfig) -> int:
    return cfg.uop_bytes + cfg.inp_bytes + cfg.wgt_bytes + cfg.acc_bytes + cfg.out_bytes


@dataclass(frozen=True)
class Space:
    """A parsed design space (see the module docstring); `area_mm2` checks max_area_mm2."""

    name: str
    path: str
    text: str
    base: AcceleratorConfig
    dimensions: tuple[Dimension, ...]
    constraints: Constraints
    workloads: tuple[WorkloadSpec, ...]
    objectives: tuple[str, ...]
    layer_objective: str
    batch_policy: str
    area_mm2: AreaModel | None = field(default=None, compare=False, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_area(self, area_mm2: AreaModel) -> Space:
        return dataclasses.replace(self, area_mm2=area_mm2, _cache={})

    # -- identity ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Everything that decides the points and their results (not the file's comments)."""
        return {"name": self.name, "base": self.base.to_dict(),
                "dimensions": {d.name: list(d.values) for d in self.dimensions},
                "constraints": dataclasses.asdict(self.constraints),
                "workloads": [w.to_json() for w in self.workloads], "objectives": list(self.objectives),
                "layer_objective": self.layer_objective, "batch_policy": self.batch_policy}

    @property
    def digest(self) -> str:
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def metrics(self) -> tuple[str, ...]:
        """The PointResult metric each objective minimises."""
        return tuple(OBJECTIVES[o] for o in self.objectives)

    # -- combinations --------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The number of combinations (valid or not)."""
        n = 1
        for d in self.dimensions:
            n *= len(d.values)
        return n

    def choice(self, index: int) -> dict[str, int]:
        """The parameter values of combination `index` (0 <= index < size; the last dimension
        varies fastest)."""
        if not 0 <= index < self.size:
            raise IndexError(f"combination {index} is outside the space's {self.size}")
        values: dict[str, int] = {}
        for d in reversed(self.dimensions):
            index, digit = divmod(index, len(d.values))
            values[d.name] = d.values[digit]
        return {d.name: values[d.name] for d in self.dimensions}

    def point_at(self, index: int) -> Point | None:
        """Combination `index` as a point, or None when AcceleratorConfig refuses it (invalid)."""
        try:
            return Point(dataclasses.replace(self.base, **self.choice(index)))  # type: ignore[arg-type]
        except ConfigError:
            return None

    def coordinates(self, point: Point) -> tuple[int, ...]:
        """The index of `point`'s value in each dimension (a search's genome)."""
        return tuple(d.values.index(getattr(point.config, d.name)) for d in self.dimensions)

    def point_with(self, coordinates: tuple[int, ...]) -> Point | None:
        """The point at these coordinates, or None when AcceleratorConfig refuses it."""
        index = 0
        for d, i in zip(self.dimensions, coordinates, strict=True):
            index = index * len(d.values) + i
        return self.point_at(index)

    def violation(self, point: Point) -> str | None:
        """Why `point` is infeasible (the constraint it breaks), or None."""
        found = self.constraints.violation(point.config, self.area_mm2)
        return found[1] if found else None

    # -- the feasible points -------------------------------------------------------------------
    def census(self) -> dict[str, int]:
        """Combinations, invalid ones, infeasible ones by constraint, and feasible points."""
        self._scan()
        return dict(self._cache["census"])

    def __len__(self) -> int:
        return len(self._scan())

    def __iter__(self) -> Iterator[Point]:
        """The feasible points in enumeration order."""
        for index in self._scan():
            point = self.point_at(index)
            assert point is not None
            yield point

    def feasible_indices(self) -> tuple[int, ...]:
        return self._scan()

    def sample(self, n: int, seed: int) -> list[Point]:
        """`n` distinct feasible points drawn at random (all of them when n >= len)."""
        indices = random.Random(seed).sample(self._scan(), min(n, len(self)))
        return [p for p in map(self.point_at, indices) if p is not None]

    def _scan(self) -> tuple[int, ...]:
        if "feasible" not in self._cache:
            census = {"combinations": self.size, "invalid": 0, "sram": 0, "macs": 0, "area": 0}
            feasible = []
            for index in range(self.size):
                point = self.point_at(index)
                if point is None:
                    census["invalid"] += 1
                    continue
                found = self.constraints.violation(point.config, self.area_mm2)
                if found:
                    census[found[0]] += 1
                else:
                    feasible.append(index)
            census["feasible"] = len(feasible)
            self._cache["feasible"], self._cache["census"] = tuple(feasible), census
        return self._cache["feasible"]  # type: ignore[no-any-return]


def load_space(path: str | Path, *, area_mm2: AreaModel | None = None) -> Space:
    """The space of the TOML file at `path`; SpaceError names any key that breaks a rule."""
    path = Path(path)
    try:
        text = path.read_bytes().decode()
    except OSError as exc:
        raise SpaceError(f"{path}: cannot read the space ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise SpaceError(f"{path}: not a space file (not UTF-8 text: {exc.reason} at byte {exc.start})") \
            from None
    return space_from_text(text, path=path, area_mm2=area_mm2)


def space_from_text(text: str, *, path: str | Path, area_mm2: AreaModel | None = None) -> Space:
    """The space written in `text` (models' paths are relative to `path`'s folder)."""
    parsed = parse_space(text, Path(path), VARIABLE, tuple(OBJECTIVES), LAYER_OBJECTIVES, BATCH_POLICIES)
    dims = tuple(Dimension(name, values) for name, values in parsed.dimensions)
    return Space(name=parsed.name, path=str(path), text=text, base=parsed.base, dimensions=dims,
                 constraints=Constraints(**parsed.constraints), workloads=parsed.workloads,
                 objectives=parsed.objectives, layer_objective=parsed.layer_objective,
                 batch_policy=parsed.batch_policy, area_mm2=area_mm2)


PACKAGED = Path(__file__).resolve().parent / "spaces"


def packaged_spaces() -> list[str]:
    return sorted(p.stem for p in PACKAGED.glob("*.toml"))


def resolve_space_path(spec: str) -> Path:
    """A space file: `spec` itself, or the packaged space of that name (`small`, `realistic`)."""
    if Path(spec).is_file():
        return Path(spec)
    if spec in packaged_spaces():
        return PACKAGED / f"{spec}.toml"
    raise SpaceError(f"space {spec!r} is neither a file nor a packaged space "
                     f"({', '.join(packaged_spaces())})")


__all__ = ["BATCH_POLICIES", "LAYER_OBJECTIVES", "OBJECTIVES", "VARIABLE", "Constraints", "Dimension",
           "Point", "Space", "SpaceError", "load_space", "packaged_spaces", "point_id", "resolve_space_path",
           "space_from_text", "sram_bytes"]
