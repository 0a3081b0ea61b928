"""Hypervolume improvement of many candidate points over one front, vectorised.

`improvements(front, candidates, reference)` gives, for each candidate (a row), the hypervolume
its addition to `front` would add, exactly for up to 3 minimised objectives.  The region the
front does not dominate (below the reference) is cut into boxes, one per column of the grid the
front's x and y values make: in column (i, j) the front's points at or left of and below the
column's corner cap z, and the box runs from the bottom of the space up to that cap.  A
candidate's improvement is the volume of those boxes inside its dominated orthant: one
vectorised product over candidates x boxes (O(k^2) boxes for a front of k points).
"""

from __future__ import annotations

import numpy as np

CHUNK = 256  # candidates per vectorised block (memory: CHUNK x boxes x 3 floats)


def _boxes(front: np.ndarray, reference: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) corners (boxes x 3) covering the region in [floor, reference) that no
    point of `front` (k x 3) weakly dominates."""
    xs = np.unique(np.concatenate([[floor[0]], front[:, 0]]))
    ys = np.unique(np.concatenate([[floor[1]], front[:, 1]]))
    x_hi = np.append(xs[1:], reference[0])
    y_hi = np.append(ys[1:], reference[1])
    gx = np.repeat(np.arange(len(xs)), len(ys))
    gy = np.tile(np.arange(len(ys)), len(xs))
    # The front's points whose x and y are at most the column's lower corner cap its z.
    below = (front[None, :, 0] <= xs[gx][:, None]) & (front[None, :, 1] <= ys[gy][:, None])
    z_cap = np.where(below, front[None, :, 2], reference[2]).min(axis=1, initial=reference[2])
    lower = np.stack([xs[gx], ys[gy], np.full(len(gx), floor[2])], axis=1)
    upper = np.stack([x_hi[gx], y_hi[gy], z_cap], axis=1)
    keep = np.all(upper > lower, axis=1)
    return lower[keep], upper[keep]


def improvements(front: np.ndarray, candidates: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The hypervolume each row of `candidates` (n x m, m <= 3, minimised) adds to `front`
    (k x m) up to `reference` (0 for a candidate the front dominates or beyond the reference)."""
    candidates = np.asarray(candidates, dtype=float)
    front = np.asarray(front, dtype=float).reshape(-1, candidates.shape[1])
    reference = np.asarray(reference, dtype=float)
    m = candidates.shape[1]
    if m > 3:
        raise ValueError(f"improvements are exact for at most 3 objectives, not {m}")
    if m < 3:  # pad with objectives that every point shares
        pad = 3 - m
        candidates = np.hstack([candidates, np.zeros((len(candidates), pad))])
        front = np.hstack([front, np.zeros((len(front), pad))])
        reference = np.append(reference, np.ones(pad))
    front = front[np.all(front < reference, axis=1)]
    floor = np.minimum(candidates.min(axis=0, initial=0.0), front.min(axis=0, initial=0.0)) - 1.0
    lower, upper = _boxes(front, reference, floor)
    gains = np.zeros(len(candidates))
    for start in range(0, len(candidates), CHUNK):
        block = candidates[start:start + CHUNK]
        sides = upper[None, :, :] - np.maximum(lower[None, :, :], block[:, None, :])
        gains[start:start + CHUNK] = np.prod(np.clip(sides, 0.0, None), axis=2).sum(axis=1)
    return gains


__all__ = ["improvements"]
