"""Facts of the grader's replays of the student's own code: runs in which it changed a component's output (the
`respond` question) or held two components' outputs and moved one value (the `moved` question). Like every fact
(`facts`), each is a predicate on the values those runs recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .facts import Fact, what_of


@dataclass(frozen=True)
class Responds(Fact):
    """What the block returns (eval mode) changes (`responds`) or does not change when `component`'s output is
    changed by the grader."""

    kind: ClassVar[str] = "responds"
    component: str
    responds: bool

    def text(self) -> str:
        if self.responds:
            return f"what your block returns changes when {what_of(self.component)}'s output changes"
        return f"what your block returns does not change when {what_of(self.component)}'s output changes"


@dataclass(frozen=True)
class Moved(Fact):
    """With attention's and the feed-forward network's outputs held at values of the grader's, the grader moved one
    value of `half`'s sum by an amount: its shortcut (`moved` "shortcut": the block input for attention's half,
    attention's held output, and so h, for the feed-forward half), its branch ("branch": the component's held
    output), or that amount out of the shortcut and into the branch, keeping their sum ("across"). `where` is what
    the grader read (a component's input, None: what the block returned). `exactly`: it moved by exactly that
    amount ("shortcut", "branch"), or it did not move at all ("across"). `call`: which call of `where`."""

    kind: ClassVar[str] = "moved"
    half: str
    moved: str
    where: str | None
    call: int | None
    exactly: bool

    def text(self) -> str:
        which = "" if not self.call or self.call == 1 else f" (call {self.call})"
        what = "what your block returned" if self.where is None else f"what {what_of(self.where)}{which} received"
        held = "with attention's and the feed-forward network's outputs held fixed"
        if self.moved == "across":
            shortcut = "the block input" if self.half == "att" else "attention's output (and so h)"
            how = "did not change" if self.exactly else "changed"
            return (
                f"{held}, when the grader moved an amount out of {what_of(self.half)}'s output and added it to "
                f"{shortcut}, keeping their sum, {what} {how}"
            )
        moved = (
            ("the block input" if self.half == "att" else "attention's output (and so h)")
            if self.moved == "shortcut"
            else f"{what_of(self.half)}'s output"
        )
        how = "by exactly that amount" if self.exactly else "by something other than that amount"
        return f"{held}, when the grader moved {moved} by some amount, {what} changed {how}"
