"""The first step where a student's forward went wrong, found the way the lesson teaches.

Walk the ten Pre-LN steps in order; at each, ask whether the value there is the one Pre-LN computes; stop
at the first that disagrees and say what the student's code computed instead.

Input: the student's trace and the reference trace (probe `trace`: train mode, marking dropout, float64).
Values are compared by what they *are* (sums of earlier values, see `algebra`), not by how the code was
written, so equivalent code in any style has no divergence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .algebra import H_LEGEND, H_NAME, Basis, describe

STEPS = {
    1: "save the block input as the first shortcut",
    2: "normalize with norm1",
    3: "run attention on norm1's output",
    4: "apply drop_shortcut to attention's output",
    5: "add the first shortcut back",
    6: "save that sum as the second shortcut",
    7: "normalize with norm2",
    8: "run the feed-forward network on norm2's output",
    9: "apply drop_shortcut to the feed-forward output",
    10: "add the second shortcut back and return the sum",
}
N1, A, D1 = "norm1(x)", "att(norm1(x))", "drop_shortcut(att(norm1(x)))"
N2, F, D2 = "norm2(h)", "ff(norm2(h))", "drop_shortcut(ff(norm2(h)))"
CANONICAL = ("x", N1, A, D1, N2, F, D2)


@dataclass(frozen=True)
class Divergence:
    step: int
    message: str

    def text(self) -> str:
        body = f"Step {self.step} of 10 ({STEPS[self.step]}): {self.message}"
        return body + (f" [{H_LEGEND}]" if re.search(rf"\b{H_NAME}\b", body) else "")


@dataclass
class _Call:
    name: str
    takes: dict | None      # the input as a sum of earlier values (None: not such a sum)
    gives: str              # the output's name in the basis
    raw_input: np.ndarray


def _standardized(v: np.ndarray, scale=None, shift=None) -> bool:
    z = v if scale is None else (v - shift) / scale
    return bool(np.all(np.abs(z.mean(-1)) < 1e-3) and np.all(np.abs(z.var(-1) - 1) < 1e-2))


class _Walk:
    def __init__(self, student: dict, reference: dict):
        self.basis = Basis()
        ref_calls = reference["calls"]
        self.basis.add("x", reference["x"])
        for call, name in zip(ref_calls, CANONICAL[1:]):
            self.basis.add(name, call["output"])
        self.calls = []
        for call in student["calls"]:
            takes = self.basis.explain(call["input"])
            label = f"{call['name']}({describe(takes) if takes is not None else '...'})"
            self.calls.append(_Call(call["name"], takes, self.basis.add(label, call["output"]), call["input"]))
        self.output = self.basis.explain(student["y"])
        self.i = 0

    def next(self) -> _Call | None:
        return self.calls[self.i] if self.i < len(self.calls) else None

    def is_(self, combination, *expected_terms) -> bool:
        return combination == {t: 1.0 for t in expected_terms}


def _what(call: _Call) -> str:
    return f"{call.name} received {describe(call.takes)}"


def _first_half(w: _Walk) -> Divergence | None:
    c = w.next()
    # steps 2-3: norm1 then attention (a functional norm with norm1's parameters gives the same value)
    if c is None:
        return Divergence(2, "your forward called none of the five components (norm1, att, drop_shortcut, norm2, ff)")
    if c.name == "norm1" and c.takes == {"x": 1.0}:
        w.i += 1
        c = w.next()
    elif not (c.name == "att" and c.takes == {N1: 1.0}):
        return _wrong_start(c, w.calls[w.i + 1] if w.i + 1 < len(w.calls) else None)
    if c is None or c.name != "att":
        if c is not None and c.name == "drop_shortcut" and c.takes == {N1: 1.0}:
            return Divergence(3, "drop_shortcut was applied to norm1's output before attention; dropout belongs "
                                 "on attention's output (step 4), not on its input")
        return Divergence(3, "attention did not run on norm1's output" + (f": next, {_what(c)}" if c else ""))
    if c.takes != {N1: 1.0}:
        return Divergence(3, f"attention received {describe(c.takes)} instead of norm1(x)")
    w.i += 1
    # step 4: dropout on attention's output alone
    c = w.next()
    if c is not None and c.name == "drop_shortcut":
        if c.takes == {A: 1.0}:
            w.i += 1
            return None
        if c.takes is not None and c.takes.get(A) == 1.0 and len(c.takes) > 1:
            return Divergence(4, f"drop_shortcut received {describe(c.takes)}: the shortcut was added before "
                                 "dropout. Apply dropout to attention's output alone, then add the shortcut")
        return Divergence(4, f"drop_shortcut received {describe(c.takes)} instead of att(norm1(x))")
    return Divergence(4, "attention's output was not passed through drop_shortcut before the addition")


def _wrong_start(c: _Call, following: _Call | None) -> Divergence:
    if c.name in ("norm2", "ff") and (c.name == "ff" or (following is not None and following.name == "ff")):
        return Divergence(2, "the feed-forward half ran first: the attention half (norm1, att) comes first and "
                             "the feed-forward half (norm2, ff) second. Are the two halves swapped?")
    if c.name == "att":
        what = "the block input x" if c.takes == {"x": 1.0} else describe(c.takes)
        if c.takes is not None or not _standardized(c.raw_input):
            return Divergence(2, f"attention ran on {what} before any normalization: Pre-LN normalizes first, "
                                 "so attention must receive norm1(x)")
        return Divergence(2, "attention received a normalized x that does not use norm1's scale and shift "
                             "(a functional layer_norm without norm1's parameters?): call self.norm1(x)")
    if c.name == "norm2":
        return Divergence(2, "norm2 normalized the block input: the attention half uses norm1, norm2 belongs to "
                             "the feed-forward half (are the two norms swapped or is norm2 reused?)")
    if c.name == "drop_shortcut":
        return Divergence(2, f"dropout ran first ({_what(c)}); the block starts by normalizing x with norm1")
    return Divergence(2, f"norm1 received {describe(c.takes)} instead of the block input x")


def _second_half_input(w: _Walk) -> Divergence | None:
    """Steps 1 and 5 are seen in the value that enters the second half."""
    c = w.next()
    if c is None:
        return Divergence(7, "the forward stopped after the attention half: norm2, ff and the second shortcut never ran")
    if c.name == "ff" and c.takes == {N2: 1.0}:
        return None
    v = c.takes
    if c.name == "ff" and v == {"x": 1.0, D1: 1.0}:
        return Divergence(7, "the feed-forward network received x + drop_shortcut(att(norm1(x))) without "
                             "normalization: Pre-LN applies norm2 first")
    if v == {"x": 1.0, D1: 1.0}:
        if c.name == "norm2":
            return None
        if c.name == "norm1":
            return Divergence(7, "norm1 ran again where norm2 belongs: each half has its own LayerNorm "
                                 "(norm1 reused for both halves)")
        return Divergence(7, f"after the first addition, {_what(c)}; Pre-LN continues with norm2")
    if v is None:
        return Divergence(5, f"the value entering the second half ({c.name}'s input) is not the block input "
                             "plus the attention branch")
    branch = v.get(D1, 0.0)
    rest = {k: c_ for k, c_ in v.items() if k != D1}
    if branch == 0.0 and v.get(A) == 1.0:
        return Divergence(5, "the addition used attention's output before dropout: drop_shortcut's result "
                             "was discarded")
    if branch == 0.0:
        return Divergence(5, f"the attention branch was never added: the second half received {describe(v)}")
    if branch != 1.0:
        return Divergence(5, f"the attention branch was scaled by {branch:g} before the addition")
    if not rest:
        return Divergence(5, "the first shortcut is missing: the second half received drop_shortcut(att(norm1(x))) "
                             "alone. Add the block input x back")
    if rest == {N1: 1.0}:
        return Divergence(1, "the shortcut was saved after norm1: norm1(x) was added back instead of the block input x")
    if set(rest) == {"x"}:
        return Divergence(5, f"the shortcut was scaled by {rest['x']:g}: add the block input x back unchanged")
    return Divergence(1, f"the first addition added {describe(rest)} instead of the block input x")


def _second_half(w: _Walk) -> Divergence | None:
    problem = _second_half_input(w)
    if problem:
        return problem
    c = w.next()
    if c.name == "norm2":
        w.i += 1
        c = w.next()
    if c is None:
        return Divergence(8, "the feed-forward network never ran")
    if c.name == "drop_shortcut" and c.takes == {N2: 1.0}:
        return Divergence(8, "drop_shortcut was applied to norm2's output before the feed-forward network; "
                             "dropout belongs on the network's output (step 9)")
    if c.name != "ff" or c.takes != {N2: 1.0}:
        return Divergence(8, f"expected ff on norm2(h), but {_what(c)}")
    w.i += 1
    c = w.next()
    if c is not None and c.name == "drop_shortcut":
        if c.takes == {F: 1.0}:
            w.i += 1
            return None
        if c.takes is not None and c.takes.get(F) == 1.0 and len(c.takes) > 1:
            return Divergence(9, f"drop_shortcut received {describe(c.takes)}: the shortcut was added before "
                                 "dropout. Apply dropout to the feed-forward output alone, then add the shortcut")
        return Divergence(9, f"drop_shortcut received {describe(c.takes)} instead of ff(norm2(h))")
    return Divergence(9, "the feed-forward output was not passed through drop_shortcut before the addition")


def _output(w: _Walk) -> Divergence | None:
    extra = w.next()
    if extra is not None:
        kind = "an extra normalization after the addition" if extra.name.startswith("norm") else "an extra call"
        return Divergence(10, f"after the second dropout your forward still ran {extra.name} on "
                              f"{describe(extra.takes)} ({kind}); the block must return the second sum itself")
    y = w.output
    if y == {"x": 1.0, D1: 1.0, D2: 1.0}:
        return None
    if y is None:
        return Divergence(10, "the returned value is not a sum of the block's earlier values")
    branch = y.get(D2, 0.0)
    rest = {k: c for k, c in y.items() if k != D2}
    if branch == 0.0 and y.get(F) == 1.0:
        return Divergence(10, "the addition used the feed-forward output before dropout: drop_shortcut's result "
                              "was discarded")
    if branch == 0.0:
        return Divergence(10, f"the feed-forward branch is not in the returned value ({describe(y)})")
    if branch != 1.0:
        return Divergence(10, f"the feed-forward branch was scaled by {branch:g} before the addition")
    if not rest:
        return Divergence(10, "the second shortcut is missing: the block returned the feed-forward branch alone. "
                              "Add back the value the second half started from")
    if rest == {"x": 1.0}:
        return Divergence(6, "the second shortcut saved the block input x, not the first half's result "
                             "x + drop_shortcut(att(norm1(x))): the attention half's contribution is lost")
    if rest == {N2: 1.0}:
        return Divergence(6, "the second shortcut was saved after norm2: norm2(h) was added back instead of h")
    if rest == {"x": rest.get("x"), D1: rest.get(D1)} and rest.get("x") == rest.get(D1):
        return Divergence(10, f"the second shortcut was scaled by {rest['x']:g}: add h back unchanged")
    return Divergence(6, f"the second addition added {describe(rest)} instead of h")


def first_divergence(student_trace: dict, reference_trace: dict) -> Divergence | None:
    """The first of the ten steps whose value differs from Pre-LN, or None when every step agrees."""
    walk = _Walk(student_trace, reference_trace)
    return _first_half(walk) or _second_half(walk) or _output(walk)


def gradient_hint(events: list[dict], reference_trace: dict) -> str | None:
    """Explain a gradient-only mistake from the operations the student's code performed."""
    basis = Basis()
    basis.add("x", reference_trace["x"])
    for call, name in zip(reference_trace["calls"], CANONICAL[1:]):
        basis.add(name, call["output"])
    steps = {"x": 1, describe({"x": 1.0, D1: 1.0}): 6, A: 3, D1: 4, F: 8, D2: 9, N1: 2, N2: 7}
    for event in events:
        if event.get("op") in ("detach", ".data") and event.get("value") is not None:
            what = describe(basis.explain(event["value"]))
            step = steps.get(what)
            where = f"step {step} of 10 ({STEPS[step]}): " if step else ""
            return (f"{where}your forward detached {what} with {event['op']}, so no gradient flows back "
                    "through it. Keep every path of the block in the autograd graph")
    return None
