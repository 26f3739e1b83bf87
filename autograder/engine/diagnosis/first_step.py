"""The first step where a student's forward went wrong: the first of Pre-LN's equations (`steps.EQUATIONS`, as
`engine.ledger` evaluates them) that does not hold on a run, named by the table of `steps` from what its left side
received, and said as the facts the run shows there.

The equations are read in Pre-LN's order, in eval mode and in train mode (real dropout, the grader's seed). Where
every equation up to a component's holds, the component itself must give what the grader's own gives on what it
received (`Gave`). At the first equation that does not hold, what the component there received is set against
Pre-LN's own values on the same input (`chain`): Pre-LN's x where a normalized value belongs skipped the LayerNorm
(`steps.handed`), another normalization stood in the LayerNorm's place, a value changed on its way in broke the
component's own input; a sum is read term by term (`sums`); a boundary the run does not show whole and once is
read on at the next equation where a later one tells. Where the values cannot tell which step broke, no step is
named and the facts alone are said.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.engine.ledger import FAILS, HOLDS, ONCE, UNKNOWN, fed_by
from autograder.engine.results import Diverged
from autograder.engine.steps import HALVES, handed
from .chain import ATT, FF, INPUT, NORM, ORDER, OWN, Chain
from .sums import sum_step
from .told import facts_at, unread_only

__all__ = ["Divergence", "Reading", "facts_at", "first_divergence"]

# Each component, the step it performs, what Pre-LN hands it and what it gives (the chain's nodes)
COMPONENTS = (
    ("norm1", ATT.norm, "x", "n1"),
    ("att", ATT.branch, "n1", "a"),
    ("norm2", FF.norm, "h", "n2"),
    ("ff", FF.branch, "n2", "f"),
)


@dataclass(frozen=True)
class Divergence:
    step: int | None  # None: the values show where, not which step
    message: str
    mode: str | None = None  # "train" or "eval": the run this was seen in, when the two runs differ
    only: bool = False  # the other run shows no divergence at all
    facts: tuple = field(default_factory=tuple)  # the facts the message states (`facts`)

    def diverged(self) -> Diverged:
        """The same as data: what the result carries and every reader groups by."""
        return Diverged(self.step, self.mode, self.only)

    def text(self) -> str:
        """The sentence the student reads: the words of `diverged()`, then the message."""
        label = self.diverged().label() or f"{self.diverged().where()}Where your forward first differs from Pre-LN"
        return f"{label}: {self.message}"


class Reading(Chain):
    """One run read against Pre-LN, equation by equation. `moved`: the `moved` question's runs (eval mode)."""

    def __init__(self, flow, parts: dict, mode: str, tol: float, drop_p, moved=None):
        super().__init__(flow, parts, mode, tol, drop_p)
        self.moved = moved

    def first(self) -> tuple | None:
        """(the index of the first equation that does not hold, the step broken there, the component that gave a
        wrong value where that is what broke), None: every equation holds and every component gave its value, or
        the block returned what Pre-LN returns on the run's own x (and masks): matching is enough."""
        if self.returned_as_pre_ln():
            return None
        for index, step in enumerate(ORDER):
            outcome = self.found.get(step, UNKNOWN)
            if outcome == HOLDS or (outcome == UNKNOWN and step in (ATT.drop, FF.drop) and self.mode == "eval"):
                wrong = next((c for c in COMPONENTS if c[1] <= step and outcome == HOLDS and not self.gave(c[0])), None)
                if wrong is not None:
                    return index, wrong[1], wrong
                continue
            named = self.at(step, outcome)
            if named is not False:
                return index, named, None
        return None

    def gave(self, name: str) -> bool:
        """Did the component read at its boundary give what the grader's own gives on what it received?"""
        got, out = self.values.get(f"{name}.in"), self.values.get(f"{name}.out")
        return got is None or out is None or self.close(self.run(name, got), out)

    def at(self, step: int, outcome: str):
        """The step broken at `step`'s equation, None where the values cannot tell; False: read on at the next one."""
        half = "att" if step <= ATT.sum else "ff"
        steps, norm = HALVES[half], NORM[half]
        if step == ATT.norm:
            if outcome == FAILS:
                return ATT.saved if self._input_replaced() else ATT.norm
            return self.into_branch("att") if self.live("att") else False
        if step == steps.branch:
            if outcome == UNKNOWN and not self.ran(half):
                if half == "ff" and not self.ran(norm):
                    return False  # the second half never ran: what the block returned tells how
                return steps.branch if f"{norm}.out" in self.values else steps.norm
            if outcome == UNKNOWN and not self.calls(half) and f"{norm}.out" in self.values:
                # run through its own layers, unread: did Pre-LN's branch output reach anything?
                return None if OWN[half] not in self.chain else False if self.seen(self.chain[OWN[half]]) else steps.branch
            if outcome == UNKNOWN and not self.live(half):  # the branch does not reach the output: its sum shows how,
                return self.into_branch(half)  # where it received Pre-LN's value (else the values cannot tell)
            return self.into_branch(half)
        if step == steps.drop:
            if len(self.live(half)) > 1:
                return steps.branch  # the branch's component run again on its own output
            unread = f"{half}.out" in self.values and not self.dropped_as_pre_ln(half)  # not dropped as Pre-LN's
            scaled = self.mode == "train" and self.into_dropout_scaled(OWN[half])  # a dropout took it scaled
            return steps.drop if outcome == FAILS or unread or scaled else False
        if outcome == FAILS and self.found.get(ONCE[half]) == FAILS:
            return steps.drop  # what the branch's dropout gave went through another
        return sum_step(self, half)

    def _input_replaced(self) -> bool:
        """Is what norm1 received also the first sum's shortcut (x itself changed before the block used it)?"""
        start, h, d1 = self.values.get("norm1.in"), self.values.get("norm2.in"), self.chain.get("d1")
        return self.close(h - d1, start) if h is not None and d1 is not None else False

    def into_branch(self, half: str):
        """The step broken where the branch's component (`att`, `ff`) did not receive its LayerNorm's output; False:
        it did (what broke shows later); None: the values cannot tell."""
        steps, norm = HALVES[half], NORM[half]
        calls, read = self.live(half) or self.calls(half), f"{norm}.out" in self.values
        if not calls:
            return None
        if not any(call.covers.any() for call in calls):  # inputs the reading could not place: pieces of Pre-LN's?
            placed = self.placed(half, calls)
            return None if not read or placed is None else False if placed else steps.branch
        got = self.joined(calls) if len(calls) > 1 else calls[0].input if calls[0].whole else None
        node = self.node(got, ("x", "n1", "a", "h", "n2") if half == "ff" else ("x", "n1")) if got is not None else None
        if node == INPUT[half]:
            return False  # Pre-LN's very input
        if node is not None:
            return handed(half, node)
        if len(calls) > 1:
            return steps.branch if read and got is not None and not self.normalizes(got) else None
        if not self.ran(norm) and not self.made(self.chain.get(INPUT[half])):
            return steps.norm  # its LayerNorm never ran, nor was its value made: something else stood in its place
        producer = fed_by(self.flow, calls[0])
        if producer is not None and producer.whole:
            if producer.name == norm and producer.variant is None and not read:
                return False  # its own LayerNorm's output, unread: what broke shows later
            again = self.normalizes(producer.input) or self.close(producer.input, self.values.get(f"{norm}.out"))
            return steps.branch if again else steps.norm  # its own output normalized again; another normalization
        return steps.branch if read and calls[0].whole else None  # unread: whether it handed the branch its output


def first_divergence(
    flows: dict, parts: dict, drop_p: float, tol: float, moved: dict | None = None, read: dict | None = None
) -> Divergence | None:
    """The first equation that does not hold on the eval or the train run (`flows`: mode -> Flow), with its step and
    its facts; None where neither run differs from Pre-LN. `moved`: the `moved` question's runs ("runs") and the
    values it held and moved ("values"), both of the eval run; `read`: mode -> its `Reading`, where the checks read
    it already (the train run's), read and never changed."""
    found = {}
    for mode in ("eval", "train"):
        if flows.get(mode) is not None:
            reading = (read or {}).get(mode) or Reading(flows[mode], parts, mode, tol, drop_p, moved if mode == "eval" else None)
            if (seen := reading.first()) is not None:
                found[mode] = (*seen, reading)
    if not found:
        return None
    mode, (index, step, wrong, reading) = min(
        found.items(), key=lambda pair: (pair[1][0], pair[1][1] is None, pair[1][1] or 0, pair[0] != "eval")
    )
    both = all(flows.get(m) is not None for m in ("eval", "train"))
    same = len(found) == 2 and (found["eval"][0] == found["train"][0] or found["eval"][1] == found["train"][1] is not None)
    label = None if same or not both else mode
    told, said_in = facts_at(flows, reading, index, wrong, tol, step), mode
    other = found.get("train" if mode == "eval" else "eval")
    if other is not None and other[:2] == (index, step) and unread_only(told):  # the other run may show more
        more = facts_at(flows, other[3], index, other[2], tol, step)
        told, said_in = (told, said_in) if unread_only(more) else (more, other[3].mode)
    words = told.text()
    if said_in == "train" and label != "train" and not words.startswith("in train mode"):
        words = f"in train mode, {words}"  # facts of the train run, where the label names no run
    return Divergence(step, words, label, label is not None and len(found) == 1, told.facts)
