"""Each shortcut addition (each half's sum step): the branch added unscaled to the value its half started from."""

from __future__ import annotations

from autograder.engine.reading.dataflow import coefficient_text
from autograder.engine.tolerance import REPLAYED, close

from .halves import SIDE, Finding, Halves


class AdditionFinder(Halves):
    """The two shortcut additions."""

    def addition(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        add = s["half"].sum
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
            return Finding(
                add,
                f"{s['what']} received a value the grader cannot write as a sum of the block's earlier values, so "
                "it cannot tell the value its half started from",
            )
        where = "what your forward returned" if h.added_in == "y" else f"the input of {flow.producer(h.added_in).name}"
        branch = "attention" if side == "att" else "feed-forward"
        if h.coefficient != 1.0:
            return Finding(
                add,
                f"the {branch} branch went into {where} with coefficient "
                f"{coefficient_text(h.coefficient)} (Pre-LN adds it unscaled)",
            )
        rest = h.added_to
        if close(flow.value(rest), flow.value(h.start), flow.tol, REPLAYED, flat=True):
            return None
        if not rest:
            return Finding(
                add,
                f"{where} is {flow.describe({h.out_key: 1.0})} alone: nothing was added to the "
                f"{branch} branch; Pre-LN adds it to {s['start']}",
            )
        if h.norm is not None:
            return Finding(
                add,
                f"the {branch} branch was added to {self._say(rest)} (in {where}), but the value "
                f"{h.norm.name} normalized in front of {s['what']} was {self._say(h.start)}; Pre-LN adds "
                "the branch to the value its half normalizes",
            )
        return Finding(
            add,
            f"the {branch} branch was added to {self._say(rest)} (in {where}), but {s['what']} "
            f"received {self._say(h.start)}; Pre-LN adds the branch to the value its half starts from",
        )
