"""Where a recorded value sits in the block, and which sum of earlier values it is.

The block's positions are those of its input x: (batch, tokens, emb) flattened. A value the student's code
handed a component may be the whole block (x's shape), a rearrangement of it (transposed, flattened, its
sequences or tokens in reverse order), or a piece (one sequence, one token, a chunk). Its *placement* gives, for
every element, the block position it belongs to. Given a placement, the value is named as a least-squares sum of
earlier values at those positions: x and the outputs of earlier calls, each zero outside the positions it covers
(a call on one sequence says nothing about the others). Attention's input is never read with its tokens reversed:
its output at a token is then no output at that token of attention on the block.

With random weights every component's output is linearly independent of the values before it, so a value
the student built by additions, scalings and rearrangements has exactly one such name, and one placement
that gives it. Placements are tried from the likeliest: ones earlier values of the same shape had, then the
block's own axes permuted or flattened, then reversed along one axis, then axis-aligned slices.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from autograder.engine.tolerance import close


def _fraction(c: float) -> float:
    """The fraction of denominator at most 64 nearest to `c`. Within 1/128 of a whole number n that is n itself
    (any other such fraction is at least 1/64 from n), found without Fraction's arithmetic."""
    if math.isfinite(c) and abs(c - round(c)) < 1 / 128:
        return float(round(c))
    return float(Fraction(c).limit_denominator(64))


def tidy(c: float) -> float:
    """A least-squares coefficient (estimated from float32 values, so good to about 1e-8) as the short number
    it almost certainly is (1, 1/3, 1.0001), or unchanged when it is none (see `exact`)."""
    for nice in (_fraction(c), *(float(f"{c:.{digits}g}") for digits in range(1, 7))):
        if abs(nice - c) <= 5e-8 * max(1.0, abs(c)):
            return nice
    return float(c)


def express(value: np.ndarray, vectors: dict, tol: float) -> dict | None:
    """`value` as an exact sum of `vectors` ({name: flat array}), coefficients tidied; None when it is none."""
    names = [k for k, vec in vectors.items() if vec is not None and np.any(vec)]
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if not names or not np.all(np.isfinite(v)):
        return None
    matrix = np.stack([vectors[k] for k in names], axis=1)
    coefficients, *_ = np.linalg.lstsq(matrix, v, rcond=None)
    if not close(matrix @ coefficients, v, tol):
        return None
    return {k: tidy(float(c)) for k, c in zip(names, coefficients)}


def unconfirmed(c: float) -> bool:
    """Is a fitted coefficient one a reading states only where another input gives it too (not 1 or -1)?"""
    return abs(abs(c) - 1) > 1e-9


def confirms(again: float, c: float) -> bool:
    """Does `again`, the same coefficient fitted on another input, confirm `c`?"""
    return abs(again - c) <= 1e-3 * max(abs(c), 1.0)


def snap(c: float, within: float = 1e-3) -> float:
    """The shortest number near `c` (within a relative `within`): a candidate the caller must still check."""
    for nice in (_fraction(c), *(float(f"{c:.{digits}g}") for digits in range(1, 7))):
        if abs(nice - c) <= within * abs(c):
            return nice
    return float(c)


def exact(c: float) -> bool:
    """Is `c` a short number (so a float64 replay with it computes what the student's code computes)?"""
    return tidy(c) == c


def _squeezed(shape) -> tuple:
    return tuple(n for n in shape if n != 1)


def reachable(source: tuple, target: tuple) -> bool:
    """Is `target` what `source` becomes by merging neighbouring axes and adding or dropping axes of size 1?"""
    src, dst = list(_squeezed(source)), list(_squeezed(target))
    i = 0
    for n in dst:
        product = 1
        while product < n and i < len(src):
            product *= src[i]
            i += 1
        if product != n:
            return False
    return i == len(src)


class Nodes:
    """Values with names, in block positions: x and every earlier call's output."""

    def __init__(self, shape: tuple, tol: float):
        self.shape, self.size, self.tol = tuple(shape), math.prod(shape), tol
        self.grid = np.arange(self.size).reshape(self.shape)
        self.keys: list[str] = []
        self.vectors: dict[str, np.ndarray] = {}
        self.covers: dict[str, np.ndarray] = {}
        self.seen: dict[tuple, list] = {}  # shape -> placements already used, most recent last
        self._stacked: tuple | None = None  # every value's covers and values, stacked (`_columns`)

    def add(self, key: str, flat: np.ndarray, covers: np.ndarray) -> None:
        self.keys.append(key)
        self.vectors[key] = flat
        self.covers[key] = covers
        self._stacked = None

    def _columns(self, index: np.ndarray) -> tuple[list[str], np.ndarray]:
        """The known values that cover any of the positions `index`, and their values there (one column each):
        read from every value at once, stacked once per value added."""
        if not self.keys:
            return [], np.zeros((index.size, 0))
        if self._stacked is None:
            self._stacked = (np.stack([self.covers[k] for k in self.keys]), np.stack([self.vectors[k] for k in self.keys]))
        covers, vectors = self._stacked
        used = np.flatnonzero(covers[:, index].any(axis=1))
        return [self.keys[i] for i in used], np.ascontiguousarray(vectors[np.ix_(used, index)].T)

    def remember(self, place: np.ndarray) -> None:
        known = self.seen.setdefault(place.shape, [])
        if not any(np.array_equal(place, p) for p in known):
            known.append(place)

    # --- naming a value at a placement ------------------------------------------------------------
    def explain(self, value: np.ndarray, place: np.ndarray) -> dict | None:
        """`value` (of `place`'s shape) as a sum of known values at those positions, or None."""
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(v)):
            return None
        keys, matrix = self._columns(place.reshape(-1))
        if not keys:
            return {} if close(v, np.zeros_like(v), self.tol) else None
        coefficients, *_ = np.linalg.lstsq(matrix, v, rcond=None)
        if not close(matrix @ coefficients, v, self.tol):
            return None
        # A coefficient of a small column is known only roughly (1.000001 for 1): the short number near it is the
        # coefficient when the sum with it still gives the value within the same tolerance.
        short = np.array([snap(float(c)) for c in coefficients])
        if close(matrix @ short, v, self.tol):
            coefficients = short
        return {k: tidy(float(c)) for k, c in zip(keys, coefficients) if abs(c) > 1e-6}

    def value(self, takes: dict) -> np.ndarray:
        total = np.zeros(self.size)
        for key, c in takes.items():
            total = total + c * self.vectors[key]
        return total

    # --- finding a placement ----------------------------------------------------------------------
    def locate(self, value: np.ndarray, extra=(), tokens_reversed: bool = True) -> tuple[np.ndarray | None, dict | None]:
        """The placement and the name of `value`; (None, None) when no placement names it. A value of the
        block's own shape that is no sum is still placed as the block (its name is then None). Without
        `tokens_reversed`, the tokens are never read in reverse order (for attention, whose output at a token is no
        output of the same call at that token once its input's tokens are reversed)."""
        shape = tuple(value.shape)
        for place in itertools.chain(extra, self.candidates(shape, tokens_reversed)):
            takes = self.explain(value, place)
            if takes is not None:
                self.remember(place)
                return place, takes
        if shape == self.shape:
            return self.grid, None
        return None, None

    def candidates(self, shape: tuple, tokens_reversed: bool = True):
        size = math.prod(shape)
        tried: set = set()

        def fresh(place):
            token = place.tobytes()
            if place.shape != shape or token in tried:
                return False
            tried.add(token)
            return True

        for place in reversed(self.seen.get(shape, [])):
            if fresh(place):
                yield place
        if size == self.size:
            for perm in itertools.permutations(range(len(self.shape))):
                grid = self.grid.transpose(perm)
                if reachable(grid.shape, shape):
                    place = grid.reshape(shape)
                    if fresh(place):
                        yield place
            for axis in range(len(self.shape) - 1 if tokens_reversed else 1):  # sequences or tokens in reverse order
                place = np.flip(self.grid, axis)
                if place.shape == shape and fresh(place):
                    yield place
            return
        if size > self.size or size == 0:
            return
        for place in self._slices(shape, size):
            if fresh(place):
                yield place

    def _slices(self, shape: tuple, size: int):
        """Axis-aligned blocks of whole token vectors (every feature of some tokens of some sequences) with
        `size` elements that a tensor of `shape` can be (after permuting, merging or squeezing axes); the ones
        right after the last piece of this shape first."""
        found = _slices(self.shape, shape, size)
        last = self.seen.get(shape)
        after = int(last[-1].min()) if last else -1
        return [place for _, place in sorted(found, key=lambda pair: (pair[0] - after - 1) % self.size)]


@functools.lru_cache(maxsize=64)  # a few shapes of pieces per block shape; each entry tens of KB here
def _slices(block: tuple, shape: tuple, size: int) -> tuple:
    """`Nodes._slices`' placements in a block of shape `block`, unordered, each with its first position; made once
    per pair of shapes (read-only: every block of that shape has the same ones)."""
    *outer, features = block
    if size % features:
        return ()
    grid = np.arange(math.prod(block)).reshape(block)
    count = size // features
    found = []
    for combo in itertools.product(*[range(1, d + 1) for d in outer]):
        if math.prod(combo) != count:
            continue
        for starts in itertools.product(*[range(d - n + 1) for d, n in zip(outer, combo)]):
            part = grid[tuple(slice(s, s + n) for s, n in zip(starts, combo))]
            for perm in itertools.permutations(range(part.ndim)):
                moved = part.transpose(perm)
                if reachable(moved.shape, shape):
                    place = moved.reshape(shape)
                    place.flags.writeable = False
                    found.append((int(place.min()), place))
    return tuple(found)
