"""Naming values: which sum of earlier values is this tensor?

A trace records the value each component received. With generic random weights every intermediate value
of a block is linearly independent of the others, so a value the student's code built from earlier ones
with additions and scalings decomposes uniquely over them. `Basis.explain` finds that decomposition by
least squares; `describe` prints it as an expression ("x + drop_shortcut(att(norm1(x)))").
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

H_NAME = "h"
H_LEGEND = "h = x + drop_shortcut(att(norm1(x))), the first half's result"


class Basis:
    def __init__(self, tolerance: float = 1e-7):
        self.names: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.tolerance = tolerance

    def explain(self, value) -> dict[str, float] | None:
        """Coefficients over the basis if `value` is (numerically) such a sum, else None."""
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(v)):
            return None
        scale = max(np.linalg.norm(v), 1e-12)
        if not self.vectors:
            return {} if np.linalg.norm(v) <= self.tolerance else None
        if v.shape != self.vectors[0].shape:
            return None
        matrix = np.stack(self.vectors, axis=1)
        coefficients, *_ = np.linalg.lstsq(matrix, v, rcond=None)
        if np.linalg.norm(matrix @ coefficients - v) > self.tolerance * max(scale, 1.0):
            return None
        return {name: _tidy(c) for name, c in zip(self.names, coefficients) if abs(c) > 1e-6}

    def add(self, name: str, value) -> str:
        """Add a value; if it is already a sum of basis values, return that sum's description instead."""
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        known = self.explain(v)
        if known is not None:
            return describe(known)
        self.names.append(name)
        self.vectors.append(v)
        return name


def _tidy(c: float) -> float:
    nice = Fraction(c).limit_denominator(8)
    return float(nice) if abs(float(nice) - c) <= 1e-6 * max(1.0, abs(c)) else float(c)


def _term(name: str, c: float) -> str:
    if c == 1:
        return name
    if c == -1:
        return "-" + name
    return f"{c:.4g}*{name}"


def describe(combination: dict[str, float] | None) -> str:
    """`{x: 1, d: 1}` -> "x + d"; x + drop_shortcut(att(norm1(x))) together reads as "h"."""
    if combination is None:
        return "a value that is not a sum of earlier values"
    terms = dict(combination)
    first_half = "drop_shortcut(att(norm1(x)))"
    if terms.get("x") == 1 and terms.get(first_half) == 1 and len(terms) > 2:
        del terms["x"], terms[first_half]
        terms = {H_NAME: 1.0, **terms}
    if not terms:
        return "zero"
    text = " + ".join(_term(name, c) for name, c in terms.items())
    return text.replace("+ -", "- ")
