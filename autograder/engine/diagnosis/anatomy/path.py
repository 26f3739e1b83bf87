"""The shortcut path between the halves and to the output, with nothing in between (the steps that save each
shortcut, and what the block returns)."""

from __future__ import annotations

from autograder.engine.steps import NUMBER, OUTPUT
from autograder.engine.tolerance import REPLAYED, close

from .halves import Finding, Halves


class PathFinder(Halves):
    """The shortcut path from x through both halves to the output."""

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
        if not close(flow.value(first.start), flow.x, flow.tol, REPLAYED, flat=True):
            return Finding(NUMBER["n1"], f"the first half started from {flow.describe(first.start)}, not from the block input x")
        if second.start is None:
            return Finding(
                NUMBER["s2"],
                "the grader cannot write the value the second half started from as a sum of the block's earlier values",
            )
        if not close(flow.value(second.start), flow.value(first.result), flow.tol, REPLAYED, flat=True):
            return Finding(
                NUMBER["s2"],
                f"the second half started from {flow.describe(second.start)}, not from the first "
                f"half's result {flow.describe(first.result)}",
            )
        return self.output()

    def output(self) -> Finding | None:
        flow = self.flow
        first, second = self.att, self.ff
        if first is not None and second is not None and second.branch.index < first.branch.index:
            first, second = second, first
        if second is None or second.result is None:
            return None
        if flow.y_takes is None:
            return Finding(OUTPUT, "the grader cannot write the returned value as a sum of the block's earlier values")
        last = max([second.branch.index] + [d.index for d in second.drops])
        extra = next((st for st in flow.live if st.index > last), None)
        if extra is not None:
            return Finding(
                OUTPUT,
                f"after the second branch your forward still ran {extra.name} on "
                f"{self._say(extra.takes)}, and returned {self._say(flow.y_takes)}; Pre-LN returns "
                "the second sum itself",
            )
        if not close(flow.value(flow.y_takes), flow.value(second.result), flow.tol, REPLAYED, flat=True):
            return Finding(
                OUTPUT, f"the block returned {self._say(flow.y_takes)} instead of the second sum {self._say(second.result)}"
            )
        return None
