"""Where the elements of one recorded value sit in another: whole, in pieces, rearranged or padded with zeros.

A value sits in a reference when each of its elements equals, within tolerance, a distinct element of the
reference. The same arithmetic done in another order (another processor's kernels, a LayerNorm called
functionally) moves elements by a few units in their last place, and among thousands of elements two of the
reference are often closer than that. So a location is a matching, not a lookup: the nearest element first, and
where two elements claim the same one, a matching that keeps every element within tolerance, found whenever one
exists. Where a component acts on token vectors (a LayerNorm, attention, the feed-forward network), `features`
asks for whole rows: each token vector of the value is matched to a token vector of the reference as a whole,
so that two near-equal numbers are never swapped between tokens. Pure numpy.
"""

from __future__ import annotations

import numpy as np


def locate(value, reference, tol: float, features: int | None = None) -> np.ndarray | None:
    """Where in `reference` (flat) each element of `value` sits, when `value` is a piece or a rearrangement of it
    (every element within `tol` times the reference's largest magnitude, at least 1, of a distinct element);
    None when it is not. With `features`: only whole token vectors of that many features, each in its order."""
    v, r = np.asarray(value, dtype=np.float64).reshape(-1), np.asarray(reference, dtype=np.float64).reshape(-1)
    if v.size == 0 or v.size > r.size or not np.all(np.isfinite(v)) or not np.all(np.isfinite(r)):
        return None
    bound = tol * max(float(np.max(np.abs(r))), 1.0)
    positions = _rows(v, r, bound, features) if features else _elements(v, r, bound)
    return None if positions is None else positions.reshape(np.shape(value))


def locate_padded(value, reference, tol: float, features: int | None = None) -> np.ndarray | None:
    """`locate`, allowing zeros that are no element of `reference` (padding; with `features`, whole token vectors
    of zeros): their positions are -1."""
    found = locate(value, reference, tol, features)
    if found is not None:
        return found
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if features:
        if v.size % features:
            return None
        pads = np.repeat(np.all(v.reshape(-1, features) == 0, axis=1), features)
    else:
        pads = v == 0
    if not pads.any() or pads.all():
        return None
    inner = locate(v[~pads], reference, tol, features)
    if inner is None:
        return None
    positions = np.full(v.shape, -1, dtype=np.int64)
    positions[~pads] = inner
    return positions.reshape(np.shape(value))


def whole_tokens(positions: np.ndarray, features: int) -> bool:
    """Do `positions` (flat block positions, -1 for padding) move whole token vectors, each in its own order? A
    LayerNorm, attention and the feed-forward network act on token vectors: a rearrangement of a value that keeps
    them whole (tokens reordered, chunked, transposed, padded) hands a component the same vectors, one that moves
    elements within or across them (sorted, flipped features) does not."""
    flat = np.asarray(positions).reshape(-1)
    if flat.size % features:
        return False
    rows = flat.reshape(-1, features)
    pads = (rows < 0).all(axis=1)
    kept = rows[~pads]
    if np.any(kept < 0):
        return False
    return bool(np.all(kept[:, 0] % features == 0) and np.all(np.diff(kept, axis=1) == 1))


def _elements(v: np.ndarray, r: np.ndarray, bound: float) -> np.ndarray | None:
    """Each element of `v` to a distinct element of `r` within `bound`: the nearest where no two claim the same;
    else the claimed ones matched again among what is left; else a matching of all (None: none exists)."""
    order = np.argsort(r, kind="stable")
    ordered = r[order]
    right = np.clip(np.searchsorted(ordered, v), 0, r.size - 1)
    left = np.clip(right - 1, 0, r.size - 1)
    positions = order[np.where(np.abs(ordered[left] - v) <= np.abs(ordered[right] - v), left, right)]
    if np.any(np.abs(r[positions] - v) > bound):
        return None
    taken, counts = np.unique(positions, return_counts=True)
    if np.all(counts == 1):
        return positions
    claimed = np.isin(positions, taken[counts > 1])  # elements that share their nearest one with another
    free = np.setdiff1d(np.arange(r.size), positions[~claimed])
    again = _matching(v[claimed], r[free], bound)
    if again is not None:
        positions = positions.copy()
        positions[claimed] = free[again]
        return positions
    return _matching(v, r, bound)


def _matching(v: np.ndarray, r: np.ndarray, bound: float) -> np.ndarray | None:
    """A matching of every element of `v` to a distinct element of `r` within `bound`, or None where none exists.
    Every element's window [v - bound, v + bound] has the same width, so taking the windows in order and giving
    each the smallest element of `r` left in it never blocks a later one: it finds a matching whenever one exists."""
    by_v, by_r = np.argsort(v, kind="stable"), np.argsort(r, kind="stable")
    sv, sr = v[by_v], r[by_r]
    positions, j = np.empty(v.size, dtype=np.int64), 0
    for k, x in enumerate(sv):
        while j < sr.size and sr[j] < x - bound:  # too small for this window, and for every later one
            j += 1
        if j == sr.size or sr[j] > x + bound:
            return None
        positions[by_v[k]] = by_r[j]
        j += 1
    return positions


def _rows(v: np.ndarray, r: np.ndarray, bound: float, features: int) -> np.ndarray | None:
    """Each token vector of `v` to a distinct token vector of `r` equal to it within `bound` element by element
    (a bipartite matching, found whenever one exists); positions of the elements, or None."""
    if v.size % features or r.size % features:
        return None
    rows, reference = v.reshape(-1, features), r.reshape(-1, features)
    order = np.argsort(reference[:, 0], kind="stable")
    firsts = reference[order, 0]
    low = np.searchsorted(firsts, rows[:, 0] - bound, side="left")
    high = np.searchsorted(firsts, rows[:, 0] + bound, side="right")
    candidates = []
    for i, row in enumerate(rows):
        near = order[low[i] : high[i]]
        near = near[np.all(np.abs(reference[near] - row) <= bound, axis=1)]
        if near.size == 0:
            return None
        candidates.append(near)
    matched = _bipartite(candidates)
    if matched is None:
        return None
    return (matched[:, None] * features + np.arange(features)).reshape(-1)


def _bipartite(candidates: list) -> np.ndarray | None:
    """A distinct choice from each list of candidates (augmenting paths, breadth first), or None where there is
    none."""
    owner: dict = {}  # candidate -> the row holding it
    held: dict = {}  # row -> the candidate it holds
    for start in range(len(candidates)):
        reached: dict = {}  # candidate -> the row it was reached from
        frontier, free = [start], None
        while frontier and free is None:
            further = []
            for row in frontier:
                for c in candidates[row].tolist():
                    if c in reached:
                        continue
                    reached[c] = row
                    if c not in owner:
                        free = c
                        break
                    further.append(owner[c])
                if free is not None:
                    break
            frontier = further
        if free is None:
            return None
        c = free
        while True:  # every row on the path takes the candidate it was reached with, and lets its own go
            row = reached[c]
            let_go = held.get(row)
            owner[c], held[row] = row, c
            if row == start:
                break
            c = let_go
    return np.array([held[row] for row in range(len(candidates))], dtype=np.int64)
