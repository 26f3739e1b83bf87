"""Pre-LN's own values on a run's input, and what a recorded value is in their terms.

The grader runs Pre-LN with its own components on the student's x (`steps` names the values: x, n1, a, h, n2, f; in
train mode after attention under the run's own first dropout, where the ledger found it). A value the student's run
recorded is then one of them (`node`), a sum of them (`fewest`), a normalization of one (`normalizes`), or what a
dropout of the run made of one (`dropped`). Pure numpy over recorded values, but for the grader's components.
"""

from __future__ import annotations

from functools import cached_property
from itertools import combinations

import numpy as np
import torch

from autograder.engine.ledger import boundaries, outcomes
from autograder.engine.reading.placement import express
from autograder.engine.steps import EQUATIONS, HALVES
from autograder.engine.tolerance import close
from .location import locate_padded

NODES = ("x", "n1", "a", "d1", "h", "n2", "f")  # Pre-LN's values, in its order (d1: attention's branch as dropped)
ORDER = tuple(sorted(EQUATIONS))  # Pre-LN's equations in the order its values are computed
ATT, FF = HALVES["att"], HALVES["ff"]
NORM = {"att": "norm1", "ff": "norm2"}
INPUT = {"att": "n1", "ff": "n2"}  # what Pre-LN hands each branch
OWN = {"att": "a", "ff": "f"}  # what each branch's component gives


class Chain:
    """One recorded run (`dataflow.Flow`) of `mode`, its ledger (`found`, `values`) and Pre-LN's values beside it."""

    def __init__(self, flow, parts: dict, mode: str, tol: float, drop_p):
        self.flow, self.parts, self.mode, self.tol, self.drop_p = flow, parts, mode, tol, drop_p
        self.found = outcomes({mode: flow}, mode, tol, drop_p)
        self.values = boundaries(flow, drop_p)
        self.chain = self._chain()

    def run(self, name: str, value: np.ndarray) -> np.ndarray:
        """The grader's own component `name` on a value of the block's shape (flat in, flat out)."""
        with torch.no_grad():
            out = self.parts[name](torch.as_tensor(value.reshape(self.flow.x.shape), dtype=torch.float32))
        return out.numpy().astype(np.float64).reshape(-1)

    def _chain(self) -> dict:
        x = self.flow.x.reshape(-1).astype(np.float64)
        n1 = self.run("norm1", x)
        a = self.run("att", n1)
        chain = {"x": x, "n1": n1, "a": a}
        d1 = a if self.mode == "eval" else self.values.get("drop1.out", self._first_dropout(x, a))
        if d1 is None and self.mode == "train" and "norm2.in" in self.values and self.dropout_of(self.values["norm2.in"] - x, a):
            d1 = self.values["norm2.in"] - x  # a dropout the recording could not read (one in place), as norm2 received it
        if d1 is not None:
            h = x + d1
            n2 = self.run("norm2", h)
            chain.update(d1=d1, h=h, n2=n2, f=self.run("ff", n2))
        return chain

    def _first_dropout(self, x, a):
        """In train mode, where the ledger named no dropout of attention's output (more than one received it, or the
        one that did gives nothing the block returns): the output of the one whose output norm2's input holds beside
        x, else the first (Pre-LN draws in order)."""
        took = [s for s in self.dropouts() if self.close(s.input, a)]
        h = self.values.get("norm2.in")
        if not took or (len(took) == 1 and h is not None):
            return None
        if h is None:
            return self.flow.vectors[took[0].key]
        return next((self.flow.vectors[s.key] for s in took if self.close(x + self.flow.vectors[s.key], h)), None)

    # --- the run's calls ---------------------------------------------------------------------------------
    def calls(self, name: str, variants: bool = False) -> list:
        """The calls of `name` (`variants`: a LayerNorm's near miss recorded under its name too)."""
        return [s for s in self.flow.steps if s.name == name and (variants or getattr(s, "variant", None) is None)]

    def live(self, name: str, variants: bool = False) -> list:
        """The calls of `name` whose value reaches what the block returned."""
        decoys = {s.key for s in self.flow.decoys}
        return [s for s in self.calls(name, variants) if s.key not in decoys]

    def dropouts(self) -> list:
        return [s for s in self.flow.steps if s.is_dropout and s.whole and s.key in self.flow.vectors]

    def ran(self, name: str) -> bool:
        """Did the run call `name` at all: a recorded call, one of its own layers, or one the child counted?"""
        recorded = any(c.name == name for c in self.flow.calls) or any(c.get("name") == name for c in self.flow.layers)
        return recorded or bool(self.flow.counts.get(name))

    # --- what a value is --------------------------------------------------------------------------------
    def close(self, a, b) -> bool:
        return a is not None and b is not None and np.size(a) == np.size(b) and close(a, b, self.tol, flat=True)

    def node(self, value, among=("x", "n1", "a", "h", "n2", "f")) -> str | None:
        """The value of Pre-LN's `value` is, if one of `among`."""
        return next((n for n in among if n in self.chain and self.close(value, self.chain[n])), None)

    def normalizes(self, value, of=None) -> bool:
        """Is `value`, less a LayerNorm's shift and over its scale (or as it is), normalized token by token: each token
        vector of root mean square 1, or (`of`) each token vector of `of`, or of `of` less its mean, times a positive
        number?"""
        features = self.flow.x.shape[-1]
        v = np.asarray(value, np.float64).reshape(-1, features)
        for norm in ("norm1", "norm2"):
            scale, shift = (getattr(self.parts[norm], k).detach().double().numpy() for k in ("scale", "shift"))
            for z in ((v - shift) / np.where(scale == 0, 1.0, scale), v):
                if of is None:
                    rms = np.sqrt(np.mean(z * z, axis=-1))
                    if np.all(np.isfinite(rms)) and np.all(np.abs(rms - 1) < 1e-2):
                        return True
                    continue
                o = np.asarray(of, np.float64).reshape(-1, features)
                for base in (o, o - o.mean(axis=-1, keepdims=True)):
                    c = (z * base).sum(-1, keepdims=True) / np.maximum((base * base).sum(-1, keepdims=True), 1e-30)
                    if (c > 0).all() and np.abs(z - c * base).max() <= 1e-3 * max(np.abs(z).max(), 1.0):
                        return True
        return False

    def dropped(self, value) -> str | None:
        """What a dropout of the run (not attention's own, whose output is the branch) turned into `value`: Pre-LN's
        value by its name ("x"), or one scaled ("2 f"); None where no dropout gave `value`."""
        own = self.values.get("drop1.out")
        for step in self.dropouts():
            given = self.flow.vectors[step.key]
            if self.close(given, value) and not (own is not None and self.close(given, own)):
                if (took := self.taken(step)) is not None:
                    return took[1] if took[0] == 1 else f"{took[0]:g} {took[1]}"
        return None

    def taken(self, step) -> tuple | None:
        """What a dropout call received, as (a number, Pre-LN's value by its name) where it is that value times it."""
        if (node := self.node(step.input, NODES)) is not None:
            return 1.0, node
        for n in (n for n in NODES if n in self.chain):
            if (terms := express(step.input, {n: self.chain[n]}, self.tol)) is not None:
                return terms[n], n
        return None

    def placed(self, half: str, calls: list) -> bool | None:
        """Does every piece `calls` received sit in what Pre-LN hands `half`'s branch (whole token vectors, zero padding
        allowed)? None where they received nothing or Pre-LN's value is unknown."""
        expected, pieces = self.chain.get(INPUT[half]), [piece.input for call in calls for piece in call.calls]
        if expected is None or not pieces:
            return None
        return all(locate_padded(p, expected, 10 * self.tol, self.flow.x.shape[-1]) is not None for p in pieces)

    @cached_property
    def curved(self) -> bool:
        """Is what the block returned one curved function (tanh, say) of the second sum as the run made it?"""
        h, branch = self.values.get("norm2.in", self.chain.get("h")), added(self, "ff", own_in_eval=True)
        return h is not None and branch is not None and _function_of(h + branch, self.values.get("y"))

    def made(self, value) -> bool:
        """Did some call of the run give `value` whole?"""
        return value is not None and any(self.close(given, value) for given in self.flow.vectors.values())

    def dropped_as_pre_ln(self, half: str) -> bool:
        """In train mode, did the branch reach its sum dropped as drop_shortcut drops it, though the recording could
        not read the dropout (one in place): attention's as norm2 received it less x, the feed-forward network's as
        the block returned it less what norm2 received?"""
        if half == "att":
            return "d1" in self.chain
        h, out = self.values.get("norm2.in"), self.values.get("ff.out")
        return h is not None and out is not None and self.dropout_of(self.values["y"] - h, out)

    def into_dropout_scaled(self, node: str) -> bool:
        """Did a dropout of the run receive Pre-LN's value `node` times a number other than 1 (negated, halved)?"""
        return any(
            (took := self.taken(step)) is not None and took[1] == node and took[0] not in (0.0, 1.0) for step in self.dropouts()
        )

    def returned_as_pre_ln(self) -> bool:
        """Did the block return Pre-LN's h plus its feed-forward branch: as it is in eval mode, in train mode as one of
        the run's own dropouts gave it, each branch dropped as drop_shortcut drops?"""
        h, f, y = self.chain.get("h"), self.chain.get("f"), self.values["y"]
        if h is None or f is None:
            return False
        if self.mode == "eval":
            return self.close(y, h + f)
        took = self.values.get("drop1.in", self.chain["a"])
        if not self.close(took, self.chain["a"]) or not self.dropout_of(self.chain["d1"], took):
            return False  # attention's output, dropped as drop_shortcut drops
        given = [(self.flow.vectors[s.key], s.input) for s in self.dropouts() if self.close(s.input, f)]
        return any(self.dropout_of(d2, took) and self.close(y, h + d2) for d2, took in given)

    def joined(self, calls: list):
        """What `calls` received over the block's positions, where together they cover each position once."""
        got, covered = np.zeros(self.chain["x"].size), np.zeros(self.chain["x"].size, dtype=int)
        for call in calls:
            got[call.covers] = call.input[call.covers]
            covered += call.covers
        return got if (covered == 1).all() else None

    def seen(self, value) -> bool:
        """Did some call receive `value`, alone or added to x, or the block return it added to what norm2 received?"""
        x, h = self.chain["x"], self.values.get("norm2.in")
        if any(s.whole and (self.close(s.input, value) or self.close(s.input - x, value)) for s in self.flow.steps):
            return True
        return h is not None and self.close(self.values["y"] - h, value)

    def fewest(self, value, vectors: dict, first: tuple) -> dict | None:
        """`value` as an exact sum of as few of `vectors` as will do (three at most); of sums as short, the one with
        the most terms added as they are, the sum's own terms (`first`) tried first."""
        names = [n for n in first if n in vectors] + [n for n in vectors if n not in first]
        names = [n for n in names if np.any(vectors[n])]
        for size in range(1, 4):
            found = [
                terms
                for chosen in combinations(names, size)
                if (terms := express(value, {n: vectors[n] for n in chosen}, self.tol)) is not None and all(terms.values())
            ]
            if found:
                return min(found, key=lambda terms: sum(c != 1 for c in terms.values()))
        return None

    def dropout_of(self, value, of, kept: bool = False) -> bool:
        """Is `value` drop_shortcut's work on `of`: some elements zeroed, the others times 1/(1 - p) (`kept`: some of
        them, too)?"""
        if self.drop_p is None or not 0 < self.drop_p < 1:
            return False
        scale, size = 1.0 / (1.0 - self.drop_p), 10 * self.tol * max(float(np.max(np.abs(of))), 1.0)
        zeroed = (np.abs(value) <= self.tol) & (np.abs(of) > size)
        if kept and not ((np.abs(value) > size) & (np.abs(of) > size)).any():
            return False
        return bool(zeroed.any()) and self._masked(value, of, scale)

    def _masked(self, value, of, scale: float) -> bool:
        """Is each element of `value` either zero or `scale` times that of `of`?"""
        size = max(float(np.max(np.abs(of))), 1.0) * self.tol
        return bool(np.all((np.abs(value) <= size) | (np.abs(value - scale * of) <= size * max(scale, 1.0))))


def added(r: Chain, half: str, own_in_eval: bool = False):
    """The half's branch as the run `r` added it, where the ledger read it: its dropout's output, in eval mode its
    component's output where no dropout was read (`own_in_eval`: else Pre-LN's own branch, which eval mode adds as
    it is)."""
    dropout = f"{'drop1' if half == 'att' else 'drop2'}.out"
    given = r.values.get(dropout, r.values.get(f"{half}.out") if r.mode == "eval" else None)
    return r.chain.get(OWN[half]) if given is None and own_in_eval and r.mode == "eval" else given


def _function_of(total, value) -> bool:
    """Is `value` one curved function of `total`, element by element (tanh of it, say): nine in ten elements the
    straight line between their two neighbours in `total`'s order, to within a tenth of the change between those two
    (over the elements where they differ, at least 16: a function of the sum is off by at most 2.4e-2 of it, from
    float32's rounding and the curve's bend, a value that is not one by 2 or more), and no line through them all?"""
    if value is None:
        return False
    t, v = np.ravel(total).astype(np.float64), np.ravel(value).astype(np.float64)
    if t.size != v.size or t.size < 16 or not np.all(np.isfinite(v)) or not np.any(v - v.mean()):
        return False
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    gaps, change = t[2:] - t[:-2], np.abs(v[2:] - v[:-2])
    seen = (gaps > 0) & (change > 1e-6 * v.std())
    if seen.sum() < 16:
        return False
    weight = (t[1:-1] - t[:-2])[seen] / gaps[seen]
    between = v[:-2][seen] + weight * (v[2:] - v[:-2])[seen]
    line = np.polyval(np.polyfit(t, v, 1), t)
    bent = float(np.abs(line - v).max()) > 1e-2 * float(v.std())
    return bent and float(np.quantile(np.abs(between - v[1:-1][seen]) / change[seen], 0.9)) <= 0.1
