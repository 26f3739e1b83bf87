"""Values at Pre-LN's component boundaries (where one value sits in another is `location`'s): sums of known values
with as few terms as will do, masks a dropout drew, and what a component's recorded calls show at one boundary
(`Seen`) or where a run first differs (`Found`). Pure numpy over recorded values."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from autograder.engine import tolerance
from autograder.engine.facts import Partial, what_of
from autograder.engine.steps import HANDED_TO, OUTPUT, RECEIVER
from autograder.engine.reading.placement import express

DROPS = ("drop_shortcut", "dropout")
NORMS = ("norm1", "norm2", "layer_norm")
VALUE = {"x": "x", "n1": "norm1(x)", "a": "att(norm1(x))", "h": "h", "n2": "norm2(h)", "f": "ff(norm2(h))"}
SUMS = {  # what each half's sum is made of; the steps its values break are the half's in `steps.HALVES`
    "att": {"shortcut": "x", "inner": "att(norm1(x))"},
    "ff": {"shortcut": "h", "inner": "ff(norm2(h))"},
}


close = functools.partial(tolerance.close, flat=True)  # close(a, b, tol): values over the block's positions


def fewest(value: np.ndarray, vectors: dict, tol: float, most: int = 3) -> dict | None:
    """`value` as an exact sum of as few of `vectors` as will do (at most `most`), coefficients tidied; None."""
    from itertools import combinations

    names = [k for k, v in vectors.items() if v is not None and np.any(v)]
    for size in range(1, most + 1):
        for chosen in combinations(names, size):
            terms = express(value, {k: vectors[k] for k in chosen}, tol)
            if terms is not None and all(terms.values()):
                return terms
    return None


def normalized(value: np.ndarray, features: int, norm) -> bool:
    """Was `value` normalized token by token: does every token vector, less `norm`'s shift and over its scale (or as it
    is), have root mean square 1, as a LayerNorm's output (mean 0, variance 1) and an RMS norm's have?"""
    v = np.asarray(value, dtype=np.float64).reshape(-1, features)
    scale = norm.scale.detach().double().numpy()
    shift = norm.shift.detach().double().numpy()
    for z in ((v - shift) / np.where(scale == 0, 1.0, scale), v):
        rms = np.sqrt(np.mean(z * z, axis=-1))
        if np.all(np.isfinite(rms)) and np.all(np.abs(rms - 1) < 1e-2):
            return True
    return False


def masked(value: np.ndarray, of: np.ndarray, scale: float, tol: float) -> bool:
    """Is `value` a dropout of `of`: each element either zero or `scale` times the other, some of them zero?"""
    value, of = np.asarray(value, dtype=np.float64).reshape(-1), np.asarray(of, dtype=np.float64).reshape(-1)
    if value.shape != of.shape:
        return False
    size = max(float(np.max(np.abs(of))), 1.0) * tol
    zero, kept = np.abs(value) <= size, np.abs(value - scale * of) <= size * max(scale, 1.0)
    return bool(np.all(zero | kept)) and bool(np.any(zero & (np.abs(of) > size)))


@dataclass
class Seen:
    """What one component's recorded calls show at a boundary of Pre-LN."""

    calls: list  # the component's recorded calls
    positions: list  # per call, where its input sits in Pre-LN's value (None: it is no piece of it)
    covers: bool  # the calls that sit there cover the whole value
    outputs: np.ndarray | None  # their outputs in block positions, when they cover it
    total: int = 0  # the value's size

    def off(self, used=None, besides=None):
        """The call that does not sit on Pre-LN's value (None: every one does): with `used` (a test of whether a
        call's output goes anywhere), the first such call whose output does, else the last one (a call whose result
        is thrown away is no account of the block's work). `besides`: a test of calls that are no account of it."""
        off = [c for c, p in zip(self.calls, self.positions) if p is None and not (besides and besides(c))]
        if not off:
            return None
        if used is not None:
            return next((c for c in off if used(c)), off[-1])
        return off[0]

    @property
    def on(self) -> list:
        return [c for c, p in zip(self.calls, self.positions) if p is not None]

    def partial(self, mode: str, component: str, value: str) -> Partial | None:
        """Every call sits on pieces of the value, and together they miss some of it."""
        if not self.calls or self.off() is not None:
            return None
        covered = len({int(i) for p in self.positions for i in p.reshape(-1) if i >= 0})
        return Partial(mode, component, value, covered, self.total)


@dataclass
class Found:
    """A boundary where the student's values differ: its place in Pre-LN's order, the step (None: the values
    cannot tell which), and the facts that show it."""

    boundary: int
    step: int | None
    facts: list = field(default_factory=list)
    expected: str = ""  # Pre-LN's value there, in the lesson's notation
    gloss: str = ""  # what the facts mean for the lesson's step (no fact of its own)

    def lesson(self) -> str:
        """What Pre-LN does there, in words: "Pre-LN hands norm2 h", "Pre-LN returns ..."; "" where no value is named."""
        if not self.expected:
            return ""
        if self.boundary >= OUTPUT:
            return f"Pre-LN returns {self.expected}"
        return f"Pre-LN hands {what_of(HANDED_TO.get(self.expected, RECEIVER[self.boundary]))} {self.expected}"


def scale_of(outputs: np.ndarray, branch: np.ndarray) -> float | None:
    """What a dropout multiplied its kept values by (None: it kept none, or they disagree)."""
    kept = (np.abs(outputs) > 1e-12) & (np.abs(branch) > 1e-12)
    if not kept.any():
        return None
    ratios = outputs[kept] / branch[kept]
    return float(np.median(ratios))
