"""One change to the Pre-LN script (`autograder.engine.reading.script`): an `Edit`, the words for the script's
values and components, and `on_value`, which puts a call on a value wherever it is used. `edits` (one line at a
time) and `structure` (the block's structure) make them; `generate` renders them as the corpus's mutants.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autograder.engine.reading.program import Program
from autograder.engine.reading.script import Line, compile_script

NAMES = {
    "x": "the block input x",
    "n1": "norm1(x)",
    "a": "attention's output att(norm1(x))",
    "d1": "attention's branch drop_shortcut(att(norm1(x)))",
    "h": "the first half's result h",
    "n2": "norm2(h)",
    "f": "the feed-forward output ff(norm2(h))",
    "d2": "the feed-forward branch drop_shortcut(ff(norm2(h)))",
    "y": "the second sum",
}
COMPONENT = {
    "norm1": "norm1",
    "norm2": "norm2",
    "layer_norm": "a LayerNorm without scale and shift",
    "att": "attention",
    "ff": "the feed-forward network",
    "drop": "drop_shortcut",
}


def on_value(lines: tuple, value: str, line: Line) -> tuple:
    """`line` (a call on `value`) inserted right after `value`, every later use of `value` taking its output."""
    out = []
    for current in lines:
        if out and out[-1].target == value:
            out.append(line)
        if (
            current.target != line.target
            and any(v == value for v, _ in current.terms)
            and value != "x"
            and any(o.target == line.target for o in out)
        ):
            current = replace(current, terms=tuple((line.target if v == value else v, c) for v, c in current.terms))
        out.append(current)
    if out[-1].target == value:
        out.append(line)
    return tuple(out)


@dataclass(frozen=True)
class Edit:
    """One change to the Pre-LN script: `step` is the lesson's step it breaks (by the rules of
    `autograder.engine.steps`), `text` what it changed, in the lesson's words."""

    kind: str
    step: int
    text: str
    lines: tuple

    def program(self, drop_p: float) -> Program:
        return compile_script(self.lines, drop_p, self.kind)
