"""Pareto fronts and hypervolume of minimisation objectives.

`non_dominated` marks the points no other point dominates (at most as large in every objective
and smaller in one; equal points keep each other).  `hypervolume` is exact in 1, 2 and 3
dimensions: the measure of the region between the points and a reference point worse than all
of them.  Objectives of different units and wide ranges (cycles, mm2, uJ) are compared after
`normalise`: log scale, mapped by a fixed reference box to [0, 1], so hypervolumes of different
runs over one box compare (reference/sweep.md §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def non_dominated(values: np.ndarray) -> np.ndarray:
    """A boolean mask over the rows of `values` (n x m, minimised): True where no row dominates."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be an n x m array, not of shape {values.shape}")
    keep = np.ones(len(values), dtype=bool)
    order = np.lexsort(values.T[::-1])  # by the first objective, then the next: dominators first
    for i in order:
        if not keep[i]:
            continue
        below = np.all(values <= values[i], axis=1) & np.any(values < values[i], axis=1)
        if below.any():
            keep[i] = False
            continue
        dominated = np.all(values[i] <= values, axis=1) & np.any(values[i] < values, axis=1)
        keep &= ~dominated
    return keep


def hypervolume(values: np.ndarray, reference: np.ndarray | list[float]) -> float:
    """The exact hypervolume of `values` (n x m, m <= 3, minimised) up to `reference`; points not
    strictly better than the reference in every objective add nothing."""
    values = np.asarray(values, dtype=float)
    ref = np.asarray(reference, dtype=float)
    if values.ndim != 2 or values.shape[1] != ref.shape[0]:
        raise ValueError(f"values of shape {values.shape} do not match a reference of "
                         f"{ref.shape[0]} objectives")
    inside = values[np.all(values < ref, axis=1)]
    if len(inside) == 0:
        return 0.0
    m = values.shape[1]
    if m == 1:
        return float(ref[0] - inside[:, 0].min())
    if m == 2:
        return _hv2(inside, ref)
    if m == 3:
        return _hv3(inside[non_dominated(inside)], ref)
    raise ValueError(f"hypervolume is exact for at most 3 objectives, not {m}")


def _hv2(points: np.ndarray, ref: np.ndarray) -> float:
    """Sorted by x, each point adds the strip from its x to the next point's x, as high as the
    lowest y so far."""
    points = points[np.lexsort((points[:, 1], points[:, 0]))]
    lowest = np.minimum.accumulate(points[:, 1])
    next_x = np.append(points[1:, 0], ref[0])
    return float(np.sum((next_x - points[:, 0]) * (ref[1] - lowest)))


def _hv3(points: np.ndarray, ref: np.ndarray) -> float:
    """Sweep along z: between one point's z and the next, the slab's area is the 2-D hypervolume
    of the points at or below it (O(n^2 log n): fronts of a few thousand points)."""
    points = points[np.argsort(points[:, 2], kind="stable")]
    next_z = np.append(points[1:, 2], ref[2])
    total = 0.0
    for i in range(len(points)):
        depth = next_z[i] - points[i, 2]
        if depth > 0:
            total += _hv2(points[: i + 1, :2], ref[:2]) * depth
    return total


@dataclass(frozen=True)
class Box:
    """A fixed reference box per objective (`lower` < `upper`, both positive): `normalise` maps
    log(lower) to 0 and log(upper) to 1; the reference point is 1 in every objective."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.lower) != len(self.upper):
            raise ValueError(f"lower has {len(self.lower)} objectives, upper {len(self.upper)}")
        for low, high in zip(self.lower, self.upper, strict=True):
            if not 0 < low < high:
                raise ValueError(f"each bound must satisfy 0 < lower < upper, not {low} and {high}")

    @classmethod
    def around(cls, values: np.ndarray, margin: float = 2.0) -> Box:
        """A box from the smallest values / `margin` to the largest x `margin` of each objective."""
        values = np.asarray(values, dtype=float)
        return cls(tuple(float(v) / margin for v in values.min(axis=0)),
                   tuple(float(v) * margin for v in values.max(axis=0)))

    def normalise(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        low, high = np.log(np.asarray(self.lower)), np.log(np.asarray(self.upper))
        return (np.log(values) - low) / (high - low)

    def hypervolume(self, values: np.ndarray) -> float:
        """The hypervolume of `values` normalised into this box (1.0: the whole box)."""
        values = np.asarray(values, dtype=float)
        if len(values) == 0:
            return 0.0
        return hypervolume(self.normalise(values), np.ones(len(self.lower)))


__all__ = ["Box", "hypervolume", "non_dominated"]
