"""The LayerNorm in front of each branch, and what the branch received (each half's norm and branch steps)."""

from __future__ import annotations

from autograder.engine.reading.dataflow import standardized
from autograder.engine.reading.normfit import describe_variant
from .halves import SIDE, Finding, Halves


class NormFinder(Halves):
    """The LayerNorm in front of attention and of the feed-forward network."""

    def norm(self, side: str) -> Finding | None:
        s, h = SIDE[side], getattr(self, side)
        step = s["half"].norm
        if h is None:
            return Finding(s["half"].branch, f"{s['what']} never ran")
        pieces = self._pieces(side)
        if pieces is not None:
            return pieces
        if h.norm is None:
            before = self._dropout_before(side)
            if before is not None:
                return before
            if h.branch.takes is None:
                if standardized(h.branch.input.reshape(self.flow.x.shape)):
                    return Finding(
                        step,
                        f"{s['what']} received a normalized value that does not use {s['norm']}'s "
                        f"scale and shift, and is no normalization of the block's earlier values",
                    )
                return Finding(
                    step, f"{s['what']} received a value the grader cannot write as a sum of the block's earlier values"
                )
            return Finding(
                step,
                f"{s['what']} received {self._say(h.branch.takes)}, which is not the output of a "
                f"LayerNorm: Pre-LN hands it {s['norm']}(...) of the value its half starts from",
            )
        name = h.norm.name
        if h.norm.variant is not None:
            return Finding(
                step,
                f"{s['what']} received a normalization of {self._say(h.norm.takes)} that "
                f"{describe_variant(h.norm.variant, float(self.parts[s['norm']].eps))}, where "
                f"{s['norm']} is a LayerNorm",
            )
        if name == s["norm"]:
            return None
        if name == "layer_norm":
            return Finding(
                step,
                f"{s['what']} received layer_norm({self._say(h.norm.takes)}) without "
                f"{s['norm']}'s scale and shift: Pre-LN calls self.{s['norm']}(...)",
            )
        return Finding(
            step,
            f"{s['what']} received {name}({self._say(h.norm.takes)}): Pre-LN normalizes {s['what']}'s input with {s['norm']}",
        )
