"""Edits of the block's structure: a LayerNorm put on the shortcut path or on the output, the halves swapped, a
LayerNorm moved after its addition (one half arranged Post-LN).
"""

from __future__ import annotations

from autograder.engine.reading.script import PRE_LN, Line
from catalog.script import COMPONENT, Edit, on_value
from autograder.engine.steps import HALVES, NUMBER, OUTPUT


def edits():
    """The single-step edits of the block's structure (among `edits.single_edits`)."""
    norm_h = Line("hn", "call", (("h", 1.0),), "norm1")
    yield Edit(
        "norm_on_path",
        NUMBER["s2"],
        "a LayerNorm (norm1) was applied to the first half's sum, and the second half "
        "started from its output: a LayerNorm sits on the shortcut path",
        on_value(PRE_LN, "h", norm_h),
    )
    for norm in ("norm1", "norm2", "layer_norm"):
        out = Line("yn", "call", (("y", 1.0),), norm)
        yield Edit(
            "norm_output", OUTPUT, f"{COMPONENT[norm]} was applied to the second sum before it was returned", PRE_LN + (out,)
        )
    swapped = (
        Line("n2", "call", (("x", 1.0),), "norm2"),
        Line("f", "call", (("n2", 1.0),), "ff"),
        Line("d2", "call", (("f", 1.0),), "drop"),
        Line("h", "sum", (("x", 1.0), ("d2", 1.0))),
        Line("n1", "call", (("h", 1.0),), "norm1"),
        Line("a", "call", (("n1", 1.0),), "att"),
        Line("d1", "call", (("a", 1.0),), "drop"),
        Line("y", "sum", (("h", 1.0), ("d1", 1.0))),
    )
    yield Edit(
        "swap",
        NUMBER["n1"],
        "the two halves ran in the opposite order: the feed-forward half (norm2, ff) first, then the attention half (norm1, att)",
        swapped,
    )
    for half, norm, branch, add in ((HALVES["att"], "norm1", "a", "h"), (HALVES["ff"], "norm2", "f", "y")):
        yield Edit(
            "move_norm",
            half.norm,
            f"{norm} was moved from {COMPONENT[branch_of(branch)]}'s input to after the "
            f"{'first' if add == 'h' else 'second'} addition: that half is arranged Post-LN",
            post_ln_half(norm, add),
        )


def branch_of(key: str) -> str:
    return {"a": "att", "f": "ff"}[key]


def post_ln_half(norm: str, add: str) -> tuple:
    """One half arranged Post-LN: its branch reads the half's input directly, its LayerNorm follows the addition."""
    source = "n1" if norm == "norm1" else "n2"
    lines = tuple(Line(line.target, "sum", line.terms) if line.target == source else line for line in PRE_LN)
    return on_value(lines, add, Line(f"{add}_{norm}", "call", ((add, 1.0),), norm))
