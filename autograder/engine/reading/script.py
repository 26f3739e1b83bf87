"""The Pre-LN forward as a script: the lesson's ten steps, one value per line, and the program a script computes.

An `Edit` is one change to the script, made by `edits` (one line at a time) and `structure` (the block's
structure); `on_value` puts a call on a value wherever it is used. The test corpus renders scripts as forwards.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from autograder.engine.reading.program import TRAIN, Op, Program, Variant
from autograder.engine.steps import EDGES, STEPS

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


@dataclass(frozen=True)
class Line:
    """`target = name(terms)` for a call, `target = sum of terms` for a sum; terms are (value, coefficient)."""

    target: str
    kind: str  # "call" or "sum"
    terms: tuple
    name: str = ""
    variant: Variant | None = None
    p: float | None = None  # a drop's p when it is not drop_shortcut's
    when: str = TRAIN


# Pre-LN itself, read off the table of `steps`: one line per step that computes a value (a saved shortcut is the
# value it saves), taking what the table's edges hand it, in order.
PRE_LN = tuple(
    Line(
        step.node,
        "call" if step.component else "sum",
        tuple((producer, 1.0) for producer, consumer in EDGES if consumer == step.node),
        "drop" if step.component == "drop_shortcut" else step.component or "",
    )
    for step in STEPS
    if any(consumer == step.node for _, consumer in EDGES)
)


def compile_script(lines: tuple, drop_p: float, name: str = "") -> Program:
    """The program a script computes (sums folded into the calls that use them)."""
    keep = 1.0 / (1.0 - drop_p) if drop_p < 1 else 0.0
    env: dict[str, dict] = {"x": {"x": 1.0}}
    ops = []
    for line in lines:
        total: dict = {}
        for value, c in line.terms:
            for key, w in env[value].items():
                total[key] = total.get(key, 0.0) + c * w
        total = {k: c for k, c in total.items() if abs(c) > 1e-12}
        if line.kind == "sum":
            env[line.target] = total
            continue
        scale = None if line.name != "drop" else (1.0 / (1.0 - line.p) if line.p is not None else keep)
        same = next(
            (op for op in ops if line.name != "drop" and (op.name, op.takes, op.variant) == (line.name, total, line.variant)),
            None,
        )
        if same is not None:  # the same call on the same value gives the same value: one call
            env[line.target] = {same.key: 1.0}
            continue
        ops.append(Op(line.name, total, line.target, line.variant, scale, line.when))
        env[line.target] = {line.target: 1.0}
    return Program(ops, env[lines[-1].target], name)


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
    """One change to the Pre-LN script; `step` is the lesson's step it breaks, `text` what it changed. `local`,
    when given, says only what the change does where it first shows (its other consequences unsaid): the
    diagnosis uses it when the change explains a run only that far."""

    kind: str
    step: int
    text: str
    lines: tuple
    local: str = ""

    @property
    def first_sign(self) -> str:
        return self.local or self.text

    def program(self, drop_p: float) -> Program:
        return compile_script(self.lines, drop_p, self.kind)
