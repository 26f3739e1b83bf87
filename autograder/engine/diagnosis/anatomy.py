"""What each half of a student's block does, read from its own values and set against Pre-LN's.

Each finder looks at one part of one half in a named run (`dataflow.Flow`) and returns a `Finding` (the
step, and what the grader saw there) or None. Findings state facts only: which value a component received,
as a sum of the block's earlier values, what was added to what, which dropouts acted. Causes ("the halves
are swapped", "Post-LN") are hypotheses, named only by `diagnosis` once a replay confirms them. The checks
take their messages from these findings, so a part is explained in one place, the same way, wherever it
costs points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.engine.reading.dataflow import H_LEGEND, H_NAME, Flow, Step, coefficient_text, standardized
from .edits import describe_variant
from .script import STEPS

PRE_LN_H = {"eval": ("x + att(norm1(x))",), "train": ("x + drop_shortcut(att(norm1(x)))", "x + dropout(att(norm1(x)))")}
SIDE = {"att": {"norm": "norm1", "what": "attention", "out": "attention's output", "steps": (2, 3, 4, 5),
                "start": "the block input x"},
        "ff": {"norm": "norm2", "what": "the feed-forward network", "out": "the feed-forward output",
               "steps": (7, 8, 9, 10), "start": "h"}}


@dataclass(frozen=True)
class Finding:
    step: int
    message: str

    def text(self) -> str:
        body = f"Step {self.step} of 10 ({STEPS[self.step]}): {self.message}"
        spaced = f" {body} ".replace(",", " ").replace(")", " ").replace(";", " ").replace(":", " ")
        return body + (f" [{H_LEGEND}]" if f" {H_NAME} " in spaced else "")


def close(flow: Flow, a: np.ndarray, b: np.ndarray, scale: float = 10.0) -> bool:
    a, b = np.asarray(a, dtype=np.float64).reshape(-1), np.asarray(b, dtype=np.float64).reshape(-1)
    return a.shape == b.shape and bool(np.linalg.norm(a - b) <= scale * flow.tol * max(np.linalg.norm(b), 1.0))


@dataclass
class Half:
    """One branch (attention or feed-forward) and the values around it, as the student wrote it."""
    branch: Step
    norm: Step | None            # the norm-like call whose output the branch received, if any
    start: dict | None           # the value the half started from (what was normalized, or the branch input)
    drops: list                  # dropouts applied to the branch's output, in order (each on the previous)
    added_to: dict | None        # what the branch's final value was added to, where it was first used
    coefficient: float           # the branch's coefficient in that sum
    added_in: str | None         # where that sum went: a step's key or "y"
    out_key: str = ""            # the branch's final value: after its dropouts and any call that took it alone

    @property
    def result(self) -> dict | None:
        if self.added_to is None:
            return None
        return {**self.added_to, self.out_key: self.added_to.get(self.out_key, 0.0) + self.coefficient}


def half(flow: Flow, name: str) -> Half | None:
    branch = flow.first(name)
    if branch is None:
        return None
    norm = None
    if branch.takes is not None and len(branch.takes) == 1 and next(iter(branch.takes.values())) == 1.0:
        producer = flow.producer(next(iter(branch.takes)))
        if producer is not None and producer.is_norm:
            norm = producer
    start = norm.takes if norm is not None else branch.takes
    while start is not None and len(start) == 1 and next(iter(start.values())) == 1.0:    # norm of a norm: the
        before = flow.producer(next(iter(start)))                                            # half starts before both
        if before is None or not before.is_norm:
            break
        start = before.takes
    live = flow.live
    drops, further, current = [], [], branch.key
    for step in live:          # the branch goes on through every call that takes its value alone
        if step.index > branch.index and step.takes == {current: 1.0}:
            (drops if step.is_dropout and not further else further).append(step)
            current = step.key
    added_to, coefficient, added_in = None, 0.0, None
    chain = {d.key for d in drops + further}
    later = [(s.key, s.takes) for s in live if s.index > branch.index and s.key not in chain]
    for where, takes in later + [("y", flow.y_takes)]:
        if takes is not None and current in takes:
            coefficient = takes[current]
            added_to = {k: c for k, c in takes.items() if k != current}
            added_in = where
            break
    return Half(branch, norm, start, drops, added_to, coefficient, added_in, current)


@dataclass
class Anatomy:
    """Both halves of one run."""
    flow: Flow
    parts: dict
    mode: str                  # "eval" or "train"
    drop_p: float

    def __post_init__(self):
        self.att, self.ff = half(self.flow, "att"), half(self.flow, "ff")

    def _h(self) -> dict | None:
        """The first half's result, where it is Pre-LN's h (so that naming it `h` is true)."""
        result = self.att.result if self.att is not None else None
        if result is None or self.flow.describe(result) not in PRE_LN_H[self.mode]:
            return None
        return result

    def _say(self, combination: dict | None) -> str:
        """A sum, reading the first half's result as `h` where it appears whole."""
        flow, h = self.flow, self._h()
        if combination is None or h is None or not all(k in combination and combination[k] == c for k, c in h.items()):
            return flow.describe(combination)
        rest = {k: c for k, c in combination.items() if k not in h}
        return H_NAME + ("" if not rest else " + " + flow.describe(rest).replace("+ -", "- "))

    # --- steps 2-3 and 7-8: the norm in front of each branch -----------------------------------------
    def norm(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["steps"][0]
        if h is None:
            return Finding(s["steps"][1], f"{s['what']} never ran")
        pieces = self._pieces(side)
        if pieces is not None:
            return pieces
        if h.norm is None:
            before = self._dropout_before(side)
            if before is not None:
                return before
            if h.branch.takes is None:
                if standardized(h.branch.input.reshape(self.flow.x.shape)):
                    return Finding(step, f"{s['what']} received a normalized value that does not use {s['norm']}'s "
                                         f"scale and shift, and is no normalization of the block's earlier values")
                return Finding(step, f"{s['what']} received a value that is not a sum of the block's earlier values")
            return Finding(step, f"{s['what']} received {self._say(h.branch.takes)}, which is not the output of a "
                                 f"LayerNorm: Pre-LN hands it {s['norm']}(...) of the value its half starts from")
        name = h.norm.name
        if h.norm.variant is not None:
            return Finding(step, f"{s['what']} received a normalization of {self._say(h.norm.takes)} that "
                                 f"{describe_variant(h.norm.variant, float(self.parts[s['norm']].eps))}, where "
                                 f"{s['norm']} is a LayerNorm")
        if name == s["norm"]:
            return None
        if name == "layer_norm":
            return Finding(step, f"{s['what']} received layer_norm({self._say(h.norm.takes)}) without "
                                 f"{s['norm']}'s scale and shift: Pre-LN calls self.{s['norm']}(...)")
        return Finding(step, f"{s['what']} received {name}({self._say(h.norm.takes)}): Pre-LN normalizes "
                             f"{s['what']}'s input with {s['norm']}")

    def _pieces(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        branch = h.branch
        if branch.whole:
            return None if branch.pieces is None else Finding(
                s["steps"][1], f"{s['what']} was called {len(branch.pieces)} times on pieces of shape "
                               f"{tuple(branch.pieces[0].shape)}, and together they give other values than "
                               f"{s['what']} on the whole block's sequences")
        calls = "in one call" if len(branch.calls) == 1 else f"in {len(branch.calls)} calls"
        return Finding(s["steps"][1], f"{s['what']} ran on only {int(branch.covers.sum())} of the block's "
                                      f"{branch.covers.size} values ({calls}): it ran on only some of the tokens")

    def _dropout_before(self, side: str) -> Finding | None:
        """Dropout applied to the branch's input (the normalized value) instead of its output."""
        s, h = SIDE[side], getattr(self, side)
        takes = h.branch.takes
        source = self.flow.producer(next(iter(takes))) if takes and len(takes) == 1 else None
        if source is None or not source.drops or not source.takes or len(source.takes) != 1:
            return None
        norm = self.flow.producer(next(iter(source.takes)))
        if norm is None or not norm.is_norm:
            return None
        return Finding(s["steps"][1], f"{s['what']} received {source.name}({norm.name}(...)): a dropout acted on "
                                      f"{norm.name}'s output before {s['what']}; Pre-LN applies dropout to {s['out']}")

    # --- steps 4 and 9: dropout on the branch output --------------------------------------------------
    def dropout(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["steps"][2]
        if h is None:
            return None
        pieces = self._pieces(side)
        if pieces is not None and not h.branch.whole:
            return pieces
        before = self._dropout_before(side)
        if before is not None:
            return before
        if self.mode == "eval":
            if h.drops:
                return Finding(step, f"in eval mode, {h.drops[0].name} still dropped values of {s['out']}: dropout "
                                     "must be inactive after model.eval(); self.drop_shortcut follows .train() and .eval()")
            return None
        flow = self.flow
        on_sum = next((st for st in flow.live if st.index > h.branch.index and st.is_dropout and st.takes
                       and h.branch.key in st.takes and len(st.takes) > 1), None)
        if not h.drops and on_sum is not None:
            return Finding(step, f"{on_sum.name} received {self._say(on_sum.takes)}: the branch was added to other "
                                 f"values before dropout. Pre-LN applies dropout to {s['out']} alone, then adds")
        if not h.drops:
            return Finding(step, f"in train mode {s['out']} was not passed through a dropout before it was used")
        if len(h.drops) > 1:
            return Finding(step, f"{s['out']} went through dropout {len(h.drops)} times; Pre-LN applies "
                                 "drop_shortcut once")
        scale, expected = h.drops[0].scale, 1.0 / (1.0 - self.drop_p)
        if scale is not None and abs(scale - expected) > 1e-3 * expected:
            return Finding(step, f"the dropout on {s['out']} multiplied kept values by {scale:.4g}, which is dropout "
                                 f"with p = {1 - 1 / scale:.3g}, not drop_shortcut's p = {self.drop_p:g} (its p comes "
                                 "from cfg['drop_rate'])")
        return None

    # --- steps 5 and 10 (and 1, 6): the shortcut additions --------------------------------------------
    def addition(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        add = s["steps"][3]
        if h is None:
            return None
        flow = self.flow
        if not h.branch.whole:
            return self._pieces(side)
        if h.added_in is None:
            if flow.y_takes is None or any(st.takes is None for st in flow.live if st.index > h.branch.index):
                return Finding(add, f"what happens to {s['out']} cannot be followed: {flow.why_not_replayable()}")
            return Finding(add, f"{s['out']} does not reach what your forward returns")
        if h.start is None:
            return Finding(add, f"{s['what']} received a value that is not a sum of the block's earlier values, so "
                                "the value its half started from cannot be told")
        where = "what your forward returned" if h.added_in == "y" else f"the input of {flow.producer(h.added_in).name}"
        branch = "attention" if side == "att" else "feed-forward"
        if h.coefficient != 1.0:
            return Finding(add, f"the {branch} branch went into {where} with coefficient "
                                f"{coefficient_text(h.coefficient)} (Pre-LN adds it unscaled)")
        rest = h.added_to
        if close(flow, flow.value(rest), flow.value(h.start)):
            return None
        if not rest:
            return Finding(add, f"{where} is {flow.describe({h.out_key: 1.0})} alone: nothing was added to the "
                                f"{branch} branch; Pre-LN adds it to {s['start']}")
        if h.norm is not None:
            return Finding(add, f"the {branch} branch was added to {self._say(rest)} (in {where}), but the value "
                                f"{h.norm.name} normalized in front of {s['what']} was {self._say(h.start)}; Pre-LN adds "
                                "the branch to the value its half normalizes")
        return Finding(add, f"the {branch} branch was added to {self._say(rest)} (in {where}), but {s['what']} "
                            f"received {self._say(h.start)}; Pre-LN adds the branch to the value its half starts from")

    # --- steps 1, 6 and 10: the path between the halves and to the output ------------------------------
    def stream(self) -> Finding | None:
        """The shortcut path: x enters the first half, its result enters the second, the second's result is
        returned, with nothing (no LayerNorm, no scaling) in between."""
        flow, first, second = self.flow, self.att, self.ff
        if first is None or second is None or first.start is None:
            return None
        if second.branch.index < first.branch.index:
            first, second = second, first
        if first.result is None:
            return None
        if not close(flow, flow.value(first.start), flow.x):
            return Finding(2, f"the first half started from {flow.describe(first.start)}, not from the block input x")
        if second.start is None:
            return Finding(6, "the value the second half started from is not a sum of the block's earlier values")
        if not close(flow, flow.value(second.start), flow.value(first.result)):
            return Finding(6, f"the second half started from {flow.describe(second.start)}, not from the first "
                              f"half's result {flow.describe(first.result)}")
        return self.output()

    def output(self) -> Finding | None:
        flow = self.flow
        first, second = self.att, self.ff
        if first is not None and second is not None and second.branch.index < first.branch.index:
            first, second = second, first
        if second is None or second.result is None:
            return None
        if flow.y_takes is None:
            return Finding(10, "the returned value is not a sum of the block's earlier values")
        last = max([second.branch.index] + [d.index for d in second.drops])
        extra = next((st for st in flow.live if st.index > last), None)
        if extra is not None:
            return Finding(10, f"after the second branch your forward still ran {extra.name} on "
                               f"{self._say(extra.takes)}, and returned {self._say(flow.y_takes)}; Pre-LN returns "
                               "the second sum itself")
        if not close(flow, flow.value(flow.y_takes), flow.value(second.result)):
            return Finding(10, f"the block returned {self._say(flow.y_takes)} instead of the second sum "
                               f"{self._say(second.result)}")
        return None
