"""The two halves of a student's block, read from a named run (`dataflow.Flow`): for each branch, what it received,
the dropouts on its output, and what its result was added to. Every step family's finder reads these.
"""

from __future__ import annotations

from dataclasses import dataclass


from autograder.engine.reading.dataflow import H_LEGEND, H_NAME, Flow, Step
from autograder.engine.steps import HALVES

PRE_LN_H = {"eval": ("x + att(norm1(x))",), "train": ("x + drop_shortcut(att(norm1(x)))", "x + dropout(att(norm1(x)))")}
SIDE = {
    "att": {
        "norm": "norm1",
        "what": "attention",
        "out": "attention's output",
        "half": HALVES["att"],  # its steps
        "start": "the block input x",
    },
    "ff": {
        "norm": "norm2",
        "what": "the feed-forward network",
        "out": "the feed-forward output",
        "half": HALVES["ff"],
        "start": "h",
    },
}


@dataclass(frozen=True)
class Finding:
    step: int
    message: str

    def text(self) -> str:
        """The finding in words. The step it concerns is not said here: a forward has one first divergent step,
        named once (`first_step`), and a part's finding may lie after it."""
        body = self.message
        spaced = f" {body} ".replace(",", " ").replace(")", " ").replace(";", " ").replace(":", " ")
        return body + (f" [{H_LEGEND}]" if f" {H_NAME} " in spaced else "")


@dataclass
class Half:
    """One branch (attention or feed-forward) and the values around it, as the student wrote it."""

    branch: Step
    norm: Step | None  # the norm-like call whose output the branch received, if any
    start: dict | None  # the value the half started from (what was normalized, or the branch input)
    drops: list  # dropouts applied to the branch's output, in order (each on the previous)
    added_to: dict | None  # what the branch's final value was added to, where it was first used
    coefficient: float  # the branch's coefficient in that sum
    added_in: str | None  # where that sum went: a step's key or "y"
    out_key: str = ""  # the branch's final value: after its dropouts and any call that took it alone

    @property
    def result(self) -> dict | None:
        if self.added_to is None:
            return None
        return {**self.added_to, self.out_key: self.added_to.get(self.out_key, 0.0) + self.coefficient}


def norm_in_front(flow: Flow, branch: Step) -> Step | None:
    """The norm-like call whose output `branch` received alone, if any."""
    if branch.takes is not None and len(branch.takes) == 1 and next(iter(branch.takes.values())) == 1.0:
        producer = flow.producer(next(iter(branch.takes)))
        if producer is not None and producer.is_norm:
            return producer
    return None


def half(flow: Flow, name: str) -> Half | None:
    branch = flow.first(name)
    if branch is None:
        return None
    norm = norm_in_front(flow, branch)
    start = norm.takes if norm is not None else branch.takes
    while start is not None and len(start) == 1 and next(iter(start.values())) == 1.0:  # norm of a norm: the
        before = flow.producer(next(iter(start)))  # half starts before both
        if before is None or not before.is_norm:
            break
        start = before.takes
    live = flow.live
    other = flow.first("ff" if name == "att" else "att")
    others = set() if other is None else {other.key, *(n.key for n in [norm_in_front(flow, other)] if n is not None)}
    drops, further, current = [], [], branch.key
    for step in live:  # the branch goes on through every call that takes its value alone, up to the
        if step.index > branch.index and step.takes == {current: 1.0}:  # other half's norm or branch
            if step.key in others:
                break
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
class Halves:
    """Both halves of one run, and what every step family's finder reads them with."""

    flow: Flow
    parts: dict
    mode: str  # "eval" or "train"
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

    # --- shared by the step families: a branch run on pieces, a dropout in front of a branch ------------
    def _pieces(self, side: str) -> Finding | None:
        """A branch run piece by piece whose pieces do not make up the branch on the whole block, if so."""
        s, h = SIDE[side], getattr(self, side)
        branch = h.branch
        if branch.whole:
            return (
                None
                if branch.pieces is None
                else Finding(
                    s["half"].branch,
                    f"{s['what']} was called {len(branch.pieces)} times on pieces of shape "
                    f"{tuple(branch.pieces[0].shape)}, and together they give other values than "
                    f"{s['what']} on the whole block's sequences",
                )
            )
        calls = "in one call" if len(branch.calls) == 1 else f"in {len(branch.calls)} calls"
        made = sum(1 for call in self.flow.calls if call.name == side and call.kind != "manual")
        if not branch.covers.any() or made > len(branch.calls):  # not all it received is placed: say what is
            held = "its recorded call" if made == 1 else f"its {made} recorded calls"
            return Finding(
                s["half"].branch,
                f"of what {s['what']} received in {held}, the grader "
                f"can place {int(branch.covers.sum())} of the block's "
                f"{branch.covers.size} values",
            )
        return Finding(
            s["half"].branch,
            f"{s['what']} ran on only {int(branch.covers.sum())} of the block's "
            f"{branch.covers.size} values ({calls}): it ran on only some of the tokens",
        )

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
        return Finding(
            s["half"].branch,
            f"{s['what']} received {source.name}({norm.name}(...)): a dropout acted on "
            f"{norm.name}'s output before {s['what']}; Pre-LN applies dropout to {s['out']}",
        )
