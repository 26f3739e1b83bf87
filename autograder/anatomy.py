"""What each half of a student's block does, set against the ten Pre-LN steps.

Each finder looks at one step of one half in a named run (`dataflow.Flow`) and returns a `Finding` (the
step and what went wrong there) or None. The checks take their messages from these findings and the
first-divergence walk takes the earliest one, so a mistake is described in one place, the same way,
wherever it costs points.

The ten steps of a Pre-LN forward:
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dataflow import H_LEGEND, H_NAME, Flow, Half, coefficient_text, half, norm_of, standardized

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
__doc__ += "\n".join(f"    {n}. {text}" for n, text in STEPS.items())

SIDE = {"att": {"norm": "norm1", "other_norm": "norm2", "what": "attention", "out": "attention's output",
                "steps": (2, 3, 4, 5), "start": "the block input x"},
        "ff": {"norm": "norm2", "other_norm": "norm1", "what": "the feed-forward network",
               "out": "the feed-forward output", "steps": (7, 8, 9, 10), "start": "h"}}


@dataclass(frozen=True)
class Finding:
    step: int
    message: str
    sure: bool = True          # False: the value could not be followed here, which may be a later step's doing

    def text(self) -> str:
        body = f"Step {self.step} of 10 ({STEPS[self.step]}): {self.message}"
        return body + (f" [{H_LEGEND}]" if f" {H_NAME} " in f" {body} ".replace(",", " ").replace(")", " ") else "")


def close(flow: Flow, a: np.ndarray, b: np.ndarray, scale: float = 10.0) -> bool:
    a, b = np.asarray(a, dtype=np.float64).reshape(-1), np.asarray(b, dtype=np.float64).reshape(-1)
    return a.shape == b.shape and bool(np.linalg.norm(a - b) <= scale * flow.tol * max(np.linalg.norm(b), 1.0))


def _is(flow: Flow, combination: dict | None, value: np.ndarray) -> bool:
    return combination is not None and close(flow, flow.value(combination), value)


def _describe_h(flow: Flow, combination: dict | None, h: dict | None) -> str:
    """A sum, reading the first half's result as `h` where it appears whole."""
    if combination is None or h is None or not all(k in combination and combination[k] == c for k, c in h.items()):
        return flow.describe(combination)
    rest = {k: c for k, c in combination.items() if k not in h}
    return H_NAME + ("" if not rest else " + " + flow.describe(rest).replace("+ -", "- "))


@dataclass
class Anatomy:
    """Both halves of one run, and the values Pre-LN would have at each step (from the grader's components)."""
    flow: Flow
    parts: dict
    mode: str                  # "eval" or "train"
    drop_p: float

    def __post_init__(self):
        self.att, self.ff = half(self.flow, "att"), half(self.flow, "ff")

    def norm_value(self, name: str, combination: dict | None) -> np.ndarray | None:
        return None if combination is None else norm_of(self.parts, name, self.flow.value(combination), self.flow.x.shape)

    # --- the halves' order --------------------------------------------------------------------------
    def order(self) -> Finding | None:
        flow = self.flow
        if not flow.steps:
            return Finding(2, "your forward called none of the five components (norm1, att, drop_shortcut, norm2, ff)")
        if self.att is not None and self.ff is not None and self.ff.branch.index < self.att.branch.index:
            return Finding(2, "the feed-forward half ran first: the attention half (norm1, att) comes first and the "
                              "feed-forward half (norm2, ff) second. Are the two halves swapped?")
        return None

    # --- steps 2-3 and 7-8: the norm in front of each branch -----------------------------------------
    def norm(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["steps"][0]
        if h is None:
            return Finding(s["steps"][1], f"{s['what']} never ran")
        branch = h.branch
        if branch.input.size != self.flow.x.size:
            return Finding(s["steps"][1], f"{s['what']} received a tensor of shape {tuple(branch.input.shape)}, not the "
                                          f"block's {tuple(self.flow.x.shape)}: it ran on only some of the tokens")
        if h.norm is None:
            before = self._dropout_before(side)
            if before is not None:
                return before
            what = "the block input x" if branch.takes == {"x": 1.0} else self.flow.describe(branch.takes)
            if branch.takes is None and branch.input.size == self.flow.x.size and standardized(branch.input):
                return Finding(step, f"{s['what']} received a normalized value that does not use {s['norm']}'s "
                                     f"scale and shift: call self.{s['norm']}(...)")
            return Finding(step, f"{s['what']} received {what} without normalization: Pre-LN applies "
                                 f"{s['norm']} first")
        name = h.norm.name
        if name == s["norm"]:
            return None
        if name == "layer_norm":
            return Finding(step, f"{s['what']} received a value normalized without {s['norm']}'s scale and shift "
                                 f"(a functional layer_norm without its parameters?): call self.{s['norm']}(...)")
        if side == "att":
            return Finding(step, f"{name} normalized the input of attention: the attention half uses norm1, norm2 "
                                 "belongs to the feed-forward half (are the two norms swapped or is norm2 reused?)")
        if self.att is not None and self.att.added_in == h.norm.key and h.added_to == {h.norm.key: 1.0}:
            return Finding(step, f"the feed-forward network received {name}'s output of the first half's sum: a "
                                 "LayerNorm after the addition fed the second half (the Post-LN arrangement). Pre-LN "
                                 "keeps that sum as it is and normalizes it with norm2 inside the second half")
        return Finding(step, f"{name} ran again where norm2 belongs: each half has its own LayerNorm (norm1 reused "
                             "for both halves?)")

    # --- steps 4 and 9: dropout on the branch output --------------------------------------------------
    def _dropout_before(self, side: str) -> Finding | None:
        """Dropout applied to the branch's input (the normalized value) instead of its output."""
        s, h = SIDE[side], getattr(self, side)
        takes = h.branch.takes
        source = self.flow.producer(next(iter(takes))) if takes and len(takes) == 1 else None
        if source is None or not source.is_dropout or not source.drops or not source.takes or len(source.takes) != 1:
            return None
        norm = self.flow.producer(next(iter(source.takes)))
        if norm is None or not norm.is_norm:
            return None
        return Finding(s["steps"][1], f"drop_shortcut was applied to {norm.name}'s output before {s['what']}; dropout "
                                      f"belongs on {s['out']} (step {s['steps'][2]}), not on its input")

    def dropout(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["steps"][2]
        if h is None:
            return None
        flow = self.flow
        key = h.branch.key
        if h.branch.output.size != flow.x.size:
            return self._unfollowable(side, step)
        before = self._dropout_before(side)
        if before is not None:
            return before
        if self.mode == "eval":
            if h.drops:
                return Finding(step, f"in eval mode, dropout still dropped values of {s['out']}: "
                                     f"{active_how(h.drops[0])}")
            return None
        on_sum = next((st for st in flow.steps[h.branch.index + 1:] if st.is_dropout and st.takes
                       and key in st.takes and len(st.takes) > 1), None)
        if not h.drops and on_sum is not None and (h.added_in == on_sum.key):
            return Finding(step, f"drop_shortcut received {_describe_h(flow, on_sum.takes, self._h())}: the shortcut "
                                 f"was added before dropout. Apply dropout to {s['out']} alone, then add the shortcut")
        if not h.drops:
            return Finding(step, f"{s['out']} was not passed through drop_shortcut before the addition")
        if len(h.drops) > 1:
            return Finding(step, f"{s['out']} went through dropout {len(h.drops)} times; apply drop_shortcut once")
        drop = h.drops[0]
        if drop.mask is None:
            return Finding(step, f"in train mode the dropout on {s['out']} dropped nothing (it was told "
                                 "training=False, or p = 0): use self.drop_shortcut, which follows .train() and .eval()")
        scale = _mask_scale(drop)
        expected = 1.0 / (1.0 - self.drop_p)
        if scale is not None and abs(scale - expected) > 1e-3 * expected:
            return Finding(step, f"the dropout on {s['out']} used p = {1 - 1 / scale:.3g}, not drop_shortcut's p = "
                                 f"{self.drop_p:g}: use self.drop_shortcut (its p comes from cfg['drop_rate'])")
        if h.raw_used:
            return Finding(s["steps"][3], f"the addition used {s['out']} before dropout: drop_shortcut's result was "
                                          "discarded")
        return None

    def _unfollowable(self, side: str, step: int) -> Finding:
        s, h = SIDE[side], getattr(self, side)
        return Finding(step, f"what happens to {s['out']} cannot be followed: it has shape "
                             f"{tuple(h.branch.output.shape)}, not the block's {tuple(self.flow.x.shape)}", sure=False)

    # --- steps 5 and 10 (and 1, 6): the shortcut additions --------------------------------------------
    def _h(self) -> dict | None:
        return self.att.result if self.att is not None else None

    def addition(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        add = s["steps"][3]
        if h is None:
            return None
        flow = self.flow
        if h.branch.output.size != flow.x.size:
            return self._unfollowable(side, add)
        if h.added_in is None:
            lost = flow.y_takes is None or any(st.takes is None for st in flow.steps[h.branch.index + 1:])
            if lost:
                return Finding(add, f"what happens to {s['out']} cannot be followed: {flow.why_not_replayable()}",
                               sure=False)
            return Finding(add, f"{s['out']} is never used: it does not reach what your forward returns")
        if h.start is None:
            return Finding(add, f"the value {s['what']} received is not a sum of the block's earlier values, so the "
                                "value its half started from cannot be told")
        rest = h.added_to
        if h.coefficient != 1.0:
            return Finding(add, f"the {'attention' if side == 'att' else 'feed-forward'} branch was scaled by "
                                f"{coefficient_text(h.coefficient)} before the addition")
        if not rest:
            if side == "att":
                return Finding(5, "the first shortcut is missing: the second half received "
                                  f"{flow.describe({h.out_key: 1.0})} alone. Add the block input x back")
            return Finding(10, "the second shortcut is missing: the block returned the feed-forward branch alone. "
                               "Add back the value the second half started from")
        start = h.start
        if start is not None and _is(flow, rest, flow.value(start)):
            return None
        if side == "att":
            if _is(flow, rest, self.norm_value("norm1", {"x": 1.0})):
                return Finding(1, "the shortcut was saved after norm1: norm1(x) was added back instead of the "
                                  "block input x")
            if set(rest) == {"x"}:
                return Finding(5, f"the shortcut was scaled by {coefficient_text(rest['x'])}: add the block input x "
                                  "back unchanged")
            return Finding(1, f"the first addition added {flow.describe(rest)} instead of the block input x")
        first = self._h()
        if rest == {"x": 1.0} and first is not None and first != {"x": 1.0}:
            return Finding(6, "the second shortcut saved the block input x, not the first half's result h = "
                              "x + drop_shortcut(att(norm1(x))): the attention half's contribution is lost")
        if first is not None and start is not None and _is(flow, rest, self.norm_value("norm2", start)):
            return Finding(6, "the second shortcut was saved after norm2: norm2(h) was added back instead of h")
        if h.norm is not None and rest == {h.norm.key: 1.0}:
            return Finding(6, f"the feed-forward branch was added to {h.norm.name}'s output, not to the sum it "
                              f"normalized: a LayerNorm sits on the shortcut path (the Post-LN arrangement), so the "
                              "shortcut no longer carries the first half's result h")
        if first is not None and set(rest) == set(first) and len({round(rest[k] / first[k], 6) for k in rest}) == 1:
            factor = rest[next(iter(rest))] / first[next(iter(rest))]
            return Finding(10, f"the second shortcut was scaled by {coefficient_text(factor)}: add h back unchanged")
        return Finding(6, f"the second addition added {_describe_h(flow, rest, first)} instead of the value the "
                          "second half started from")

    # --- steps 1, 6 and 10: the path between the halves and to the output ------------------------------
    def stream(self) -> Finding | None:
        """The shortcut path: x enters the first half, its result enters the second, the second's result is
        returned, with nothing (no LayerNorm, no scaling) in between."""
        flow, first, second = self.flow, self.att, self.ff
        if first is None or second is None or first.start is None:
            return None
        if second.branch.index < first.branch.index:       # halves swapped: the path still runs through both
            first, second = second, first
        if first.result is None:
            return None
        if first.norm is not None and not _is(flow, first.start, flow.x):
            return Finding(2, f"the first half started from {flow.describe(first.start)}, not from the block input x")
        if second.start is None:
            return Finding(6, f"the value the feed-forward half started from ({flow.describe(second.branch.takes)}) "
                              "is not a sum of the block's earlier values")
        if not _is(flow, second.start, flow.value(first.result)):
            if first.added_in not in (None, "y"):
                norm = flow.producer(first.added_in)
                if norm is not None and norm.is_norm:
                    return Finding(6, f"a LayerNorm ({norm.name}) sits on the shortcut path: the first half's sum "
                                      f"x + ... was normalized before the second half started (the Post-LN "
                                      "arrangement). Pre-LN keeps the sum itself as the second shortcut")
            if second.start == {"x": 1.0}:
                return Finding(6, "the feed-forward half started from the block input x, not from the first half's "
                                  "result h = x + drop_shortcut(att(norm1(x))): the attention half's contribution is lost")
            return Finding(6, f"the feed-forward half started from {flow.describe(second.start)} instead of the first "
                              "half's result h")
        return self.output()

    def output(self) -> Finding | None:
        flow = self.flow
        second = self.ff if self.att is None or self.ff is None or self.att.branch.index < self.ff.branch.index else self.att
        if second is None or second.result is None:
            return None
        last = max([second.branch.index] + [d.index for d in second.drops])
        later = [st for st in flow.steps if st.index > last and not (st.takes is not None and st.key in st.takes)
                 and not (st.is_dropout and not st.drops)]      # a dropout that dropped nothing is no extra call
        extra = next((st for st in later if st.takes is not None and (second.out_key in st.takes or
                                                                      st.key in (flow.y_takes or {}))), None)
        if extra is not None:
            kind = "an extra normalization after the addition" if extra.is_norm else "an extra call"
            return Finding(10, f"after the second dropout your forward still ran {extra.name} on "
                               f"{_describe_h(flow, extra.takes, self._h())} ({kind}); the block must return the "
                               "second sum itself")
        if flow.y_takes is None:
            return Finding(10, "the returned value is not a sum of the block's earlier values")
        if not _is(flow, flow.y_takes, flow.value(second.result)):
            return Finding(10, f"the block returned {_describe_h(flow, flow.y_takes, self._h())} instead of the second sum")
        return None

    def walk(self) -> Finding | None:
        """The first of the ten steps whose value disagrees with Pre-LN (None: every step agrees).

        Every finder looks at its own steps; the earliest step found is where the block first went wrong
        (a mistake in the attention half comes before anything the feed-forward half does with its result)."""
        order = self.order()
        if order is not None:
            return order
        finders = [lambda: self.norm("att"), lambda: self.dropout("att"), lambda: self.addition("att"),
                   self._second_half_start, lambda: self.norm("ff"), lambda: self.dropout("ff"),
                   lambda: self.addition("ff"), self.stream]
        found = [f for f in (finder() for finder in finders) if f is not None]
        sure = [f for f in found if f.sure]
        return min(sure or found, key=lambda f: f.step) if found else None

    def _second_half_start(self) -> Finding | None:
        if self.ff is None:
            if self.att is not None and self.att.added_in == "y":
                return Finding(7, "the forward stopped after the attention half: norm2, ff and the second shortcut "
                                  "never ran")
            return Finding(8, "the feed-forward network never ran")
        return None


def _mask_scale(step) -> float | None:
    kept = step.mask[np.abs(step.mask) > 1e-6]
    return float(np.median(kept)) if kept.size else None


def active_how(step) -> str:
    if step.name == "drop_shortcut":
        return "drop_shortcut was still in training mode"
    if step.via == "module":
        return ("an nn.Dropout created inside forward stays in training mode; use self.drop_shortcut, which "
                "follows .train() and .eval()")
    return ("torch.nn.functional.dropout was called with training=True; use self.drop_shortcut, which follows "
            ".train() and .eval()")
