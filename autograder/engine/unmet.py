"""The ledger's equations in words (`WORDS`), and the fact that one does not hold on a run (`Unmet`): it fails between
the values the run recorded at the component boundaries, or a boundary it needs is not shown whole and once there, so
the grader cannot tell. Said of a part whose equations do not hold, where nothing more particular can be (`fits.why`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from autograder.engine.facts import Fact, Said, what_of
from autograder.engine.ledger import ADDED, ALL, FAILS, HOLDS, ONCE, PATH, SUMS
from autograder.engine.steps import HALVES

# What each of the ledger's equations states, by its key as `Unmet` holds it: (where it holds, where it fails). A branch
# is its component's output after the calls that took it alone (its dropout among them); "as dropped": after its dropout.
_BRANCH = {"att": "attention's branch", "ff": "the feed-forward branch"}
WORDS = {
    str(HALVES["att"].norm): ("norm1 received the block input x", "norm1 received another value than the block input x"),
    **{
        str(HALVES[side].branch): (
            f"{what_of(side)} received {norm}'s output",
            f"{what_of(side)} received another value than {norm}'s output",
        )
        for side, norm in (("att", "norm1"), ("ff", "norm2"))
    },
    **{
        str(HALVES[side].drop): (
            f"one dropout received {what_of(side)}'s output whole, zeroed some of it and multiplied the rest by "
            "drop_shortcut's 1/(1 - p)",
            f"a dropout zeroed values of {what_of(side)}'s output in eval mode",
        )
        for side in ("att", "ff")
    },
    str(HALVES["att"].sum): (
        "norm2 received x plus attention's output as dropped",
        "norm2 received another value than x plus attention's output as dropped",
    ),
    str(HALVES["ff"].sum): (
        "your block returned what norm2 received plus the feed-forward output as dropped",
        "your block returned another value than what norm2 received plus the feed-forward output as dropped",
    ),
    SUMS: (
        "your block returned x plus both branches as dropped",
        "your block returned another value than x plus both branches as dropped",
    ),
    **{
        ADDED[side]: (
            f"the sum {_BRANCH[side]} went into, less that branch, is the value its half started from",
            f"the sum {_BRANCH[side]} went into, less that branch, is not the value its half started from",
        )
        for side in ("att", "ff")
    },
    **{
        ONCE[side]: (
            f"what the dropout on {what_of(side)}'s output gave went into no other dropout",
            f"what the dropout on {what_of(side)}'s output gave went into another dropout",
        )
        for side in ("att", "ff")
    },
    "path x": ("the first half started from the block input x", "the first half did not start from the block input x"),
    "path h": (
        "the second half started from the sum that attention's branch went into",
        "the second half did not start from the sum that attention's branch went into",
    ),
    "path y": (
        "your block returned the sum that the feed-forward branch went into",
        "your block did not return the sum that the feed-forward branch went into",
    ),
}
assert set(WORDS) == {str(key) for key in ALL} | set(ONCE.values()), "every equation of the ledger has its words"


@dataclass(frozen=True)
class Unmet(Fact):
    """In the run of `mode`, the ledger's equation `equation` (`ledger.ALL`'s key, or `ONCE`'s, as a string) fails
    between the values recorded at the component boundaries (`known`), or a boundary it needs is not shown whole and
    once there, so the grader cannot tell whether it holds (not `known`)."""

    kind: ClassVar[str] = "unmet"
    equation: str
    known: bool

    def text(self) -> str:
        holds, fails = WORDS[self.equation]
        where = "" if self.mode == "eval" or self.equation in PATH else f"in {self.mode} mode, "
        if self.known:
            return where + fails
        return f"{where}the grader cannot tell from the values at your components' boundaries whether {holds}"


def unmet(found: dict, needs: tuple, mode: str) -> Said:
    """Why none of `needs` (alternatives, as for `ledger.holds`) holds in `found` (`outcomes` of `mode`): the first
    equation that fails, from the last alternative (a half's own equations come last) back; else the first of the last
    alternative that the grader cannot read."""
    for together in reversed(needs):
        failing = next((key for key in together if found.get(key) == FAILS), None)
        if failing is not None:
            return Said((Unmet(mode, str(failing), True),))
    unread = next(key for key in needs[-1] if found.get(key) != HOLDS)
    return Said((Unmet(mode, str(unread), False),))
