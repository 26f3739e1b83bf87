"""The Pre-LN forward as a script: the lesson's ten steps, one value per line, and the program a script computes.
The test corpus (tests/catalog) changes scripts one step at a time and renders them as forwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder.engine.reading.program import TRAIN, Op, Program, Variant
from autograder.engine.steps import EDGES, STEPS


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
