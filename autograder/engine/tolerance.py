"""When two arrays of values are the same: the grader's one tolerance table and its one rule, `close`.

The rule, in words. Two arrays are close when they have the same shape, every value of both is finite, and the
length of their difference is at most `tol * scale` times the length of the longer of the two, or of 1 where both
are shorter than that:

    |a - b| <= tol * scale * max(|a|, |b|, 1)        (|.| the Euclidean length of the whole array)

* Relative, because rounding is: a float32 sum or product is off by about 1e-7 of its size, so the same forward
  written another way (token by token, its additions in another order, on another device) differs from the
  reference by an amount proportional to the values, never by a fixed amount.
* It scales with the size of the whole array, not of each value: the rounding of one value comes from the terms
  that made it (a matrix product sums a row of them; x + branch - x keeps the rounding of x), which are of the
  array's size even where that one value is near 0. So a value near 0 may differ by the array's size times tol,
  and one changed value among many is seen once the change passes that.
* The floor of 1 is the size the grader's inputs and read-outs are drawn at (unit normal): a difference that
  cancels to almost nothing (h - x, a do-nothing branch) keeps the rounding of terms of that size.
* Symmetric: which array is the reference does not matter.
* `scale` widens the rule where more rounding comes between the two: a value the grader recomputes in its own
  order (`REPLAYED`), and gradients (`GRADIENTS`), which run back through every operation of the forward, sum over
  every position of the batch and multiply per-layer factors, each step adding its own rounding.

`TOLERANCE` holds `tol` per device and number type: float32 on CPU rounds at about 1e-7, so 1e-5 leaves a hundred
times that; CUDA kernels reorder and split sums (TF32 is off in every probe), and CUDA keeps the wider tier the
grade has always had there; float64 rounds at about 1e-16, and 1e-9 still sets apart a value that went through
float32 on the way.
"""

from __future__ import annotations

import math

import numpy as np

TOLERANCE = {"cpu": {"float32": 1e-5, "float64": 1e-9}, "cuda": {"float32": 2e-3, "float64": 1e-9}}
REPLAYED = 10.0  # the grader's replay of a forward (or its reading of one) adds and normalizes in its own order
GRADIENTS = 10.0  # a gradient against the reference's


def tolerance(device: str = "cpu", dtype: str = "float32") -> float:
    """`tol` for values computed on `device` ("cpu", "cuda", "cuda:1", ...) in `dtype` ("float32", "float64")."""
    table = TOLERANCE["cuda" if str(device).startswith("cuda") else "cpu"]
    return table["float64" if str(dtype).endswith("float64") else "float32"]


def close(a, b, tol: float, scale: float = 1.0, *, flat: bool = False) -> bool:
    """Are `a` and `b` the same values within `tol * scale` (see the module docstring for the rule and why)?
    `flat`: compare them as vectors over the block's positions, whatever their layout (the reading holds values so);
    otherwise their shapes must agree."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if flat:
        a, b = a.reshape(-1), b.reshape(-1)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return False
    size = max(_norm(a), _norm(b), 1.0)
    return bool(_norm(a - b) <= tol * scale * size)


def _norm(x: np.ndarray) -> float:
    """`np.linalg.norm(x)` of a float64 array, as it computes it (the square root of the raveled array's dot
    product with itself), without its checks: `close` runs on every value the grader reads."""
    x = x.ravel(order="K")
    return math.sqrt(float(x.dot(x)))


__all__ = ["GRADIENTS", "REPLAYED", "TOLERANCE", "close", "tolerance"]
