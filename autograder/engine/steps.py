"""The ten steps of the Pre-LN forward: the one table that the engine, the feedback, the report and the tests read.

Pre-LN's forward, one value per step (the lesson's notation):

    s1 = x                          1  save the block input as the first shortcut
    n1 = norm1(x)                   2  normalize with norm1
    a  = att(n1)                    3  run attention on norm1's output
    d1 = drop_shortcut(a)           4  apply drop_shortcut to attention's output
    h  = s1 + d1                    5  add the first shortcut back
    s2 = h                          6  save that sum as the second shortcut
    n2 = norm2(h)                   7  normalize with norm2
    f  = ff(n2)                     8  run the feed-forward network on norm2's output
    d2 = drop_shortcut(f)           9  apply drop_shortcut to the feed-forward output
    y  = s2 + d2                   10  add the second shortcut back and return the sum

Every edge of that dataflow belongs to one step: the step a change on that edge breaks (`EDGES`). A change that
replaces a shortcut by another value breaks the step that saves it (1, 6); a shortcut left out, scaled or passed
through a dropout, or a branch changed on its way into the sum, breaks the addition (5, 10); a branch left out of
its sum leaves its whole half out of the output, which shows first at the half's LayerNorm (2, 7); a branch's
component handed an earlier value of the chain that is not normalized skipped its half's LayerNorm (attention on x
itself, the feed-forward network on h or on attention's output: 2, 7), and one handed another normalized value, or
its own normalized again, breaks its own input's step (`handed`); anything else breaks the step whose input it
changes. The first divergent step of a forward is the step of the first edge, in this order, where the student's
values differ from Pre-LN's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    number: int
    text: str  # what the step does, in the lesson's words
    node: str  # the value it produces, in the table above
    value: str  # that value in the lesson's notation
    component: str | None  # the component the step calls; None for a saved shortcut or a sum


STEPS: tuple[Step, ...] = (
    Step(1, "save the block input as the first shortcut", "s1", "x", None),
    Step(2, "normalize with norm1", "n1", "norm1(x)", "norm1"),
    Step(3, "run attention on norm1's output", "a", "att(norm1(x))", "att"),
    Step(4, "apply drop_shortcut to attention's output", "d1", "drop_shortcut(att(norm1(x)))", "drop_shortcut"),
    Step(5, "add the first shortcut back", "h", "h = x + drop_shortcut(att(norm1(x)))", None),
    Step(6, "save that sum as the second shortcut", "s2", "h", None),
    Step(7, "normalize with norm2", "n2", "norm2(h)", "norm2"),
    Step(8, "run the feed-forward network on norm2's output", "f", "ff(norm2(h))", "ff"),
    Step(9, "apply drop_shortcut to the feed-forward output", "d2", "drop_shortcut(ff(norm2(h)))", "drop_shortcut"),
    Step(10, "add the second shortcut back and return the sum", "y", "h + drop_shortcut(ff(norm2(h)))", None),
)
BY_NUMBER = {step.number: step for step in STEPS}
BY_NODE = {step.node: step for step in STEPS}
NUMBER = {step.node: step.number for step in STEPS}  # a step named by the value it produces: NUMBER["n2"] is norm2's

# (producer, consumer) -> the step a change on that edge breaks. "out" is what the block returns.
EDGES: dict[tuple[str, str], int] = {
    ("x", "n1"): 2,  # what norm1 normalizes
    ("n1", "a"): 3,  # what attention receives
    ("a", "d1"): 4,  # what the first dropout receives
    ("x", "h"): 1,  # the first shortcut, replaced by another value (left out or scaled: step 5)
    ("d1", "h"): 5,  # attention's branch on its way into the first sum
    ("h", "n2"): 7,  # what norm2 normalizes
    ("n2", "f"): 8,  # what the feed-forward network receives
    ("f", "d2"): 9,  # what the second dropout receives
    ("h", "y"): 6,  # the second shortcut, replaced by another value (left out or scaled: step 10)
    ("d2", "y"): 10,  # the feed-forward branch on its way into the second sum
    ("y", "out"): 10,  # the sum, on its way out of the block
}
# A shortcut left out of its sum, scaled or passed through a dropout breaks the addition rather than what was saved.
SHORTCUT_SCALED = {("x", "h"): 5, ("h", "y"): 10}
# A branch left out of its sum entirely: its whole half does not reach the output, which shows first where the half
# starts (its LayerNorm's step).
BRANCH_LEFT_OUT = {("d1", "h"): 2, ("d2", "y"): 7}


@dataclass(frozen=True)
class Half:
    """One half of the block: its five steps, in the table's order (save the shortcut, normalize, run the branch's
    component, drop, add the shortcut back)."""

    component: str  # the branch's component: "att" or "ff"
    saved: int  # the step that saves the half's shortcut
    norm: int  # its LayerNorm
    branch: int  # its branch's component
    drop: int  # the dropout on the branch
    sum: int  # the addition that ends the half


def _halves() -> dict[str, Half]:
    size = len(STEPS) // 2
    halves = (STEPS[:size], STEPS[size:])
    return {steps[2].component: Half(steps[2].component, *(step.number for step in steps)) for steps in halves}


HALVES = _halves()  # "att" and "ff"
# Where a half's sum is read, by the value read there (a, d1, h, f, d2, y), the last step a divergence first seen
# there can be: h is read where norm2 receives it, so a change seen there may still be norm2's own step (a LayerNorm
# skipped, or one on the shortcut path); elsewhere it is the value's own step. The `moved` question's reading of a
# sum (`diagnosis/moves.py`) names the step of a sum only its consumer saw so.
LAST_STEP_AT = {NUMBER[node]: NUMBER["n2" if node == "h" else node] for node in ("a", "d1", "h", "f", "d2", "y")}
OUTPUT = NUMBER["y"]  # the last step: what the block returns


def handed(component: str, node: str | None) -> int:
    """The step broken where a branch's component ("att", "ff") receives the chain's value `node` ("x", "a", "d1",
    "h", "n1") instead of its LayerNorm's output: one from before that LayerNorm and not normalized skipped the
    LayerNorm's step; a normalized one (norm1(x) handed to the feed-forward network), or the right one changed on its
    way in (`node` None: normalized again, scaled, dropped), is the branch's own input edge."""
    half = HALVES[component]
    normalized = node is None or getattr(BY_NODE.get(node), "component", None) in ("norm1", "norm2")
    return half.branch if normalized else half.norm


# Pre-LN's equations between boundary values, by the step each states: a boundary is what a component received
# (`att.in`) or gave (`att.out`), the block input `x` or what the block returned `y`; `drop1` and `drop2` are
# drop_shortcut on attention's output and on the feed-forward output. Each step that produces a value has one
# equation, read where its value is first seen: h is seen where norm2 receives it, so the first sum (step 5) is
# `norm2.in`, and the steps that save a shortcut (1, 6) or normalize h (7) show in the equations of their sums (5,
# 10) and of norm2's input. Terms are (boundary, coefficient); `engine.ledger` evaluates them on a recorded run.
EQUATIONS: dict[int, tuple[str, tuple]] = {
    2: ("norm1.in", (("x", 1.0),)),
    3: ("att.in", (("norm1.out", 1.0),)),
    4: ("drop1.in", (("att.out", 1.0),)),
    5: ("norm2.in", (("x", 1.0), ("drop1.out", 1.0))),
    8: ("ff.in", (("norm2.out", 1.0),)),
    9: ("drop2.in", (("ff.out", 1.0),)),
    10: ("y", (("norm2.in", 1.0), ("drop2.out", 1.0))),
}
# The value each boundary holds, by the table's node: a component's output, h where norm2 receives it
NODES = {
    "norm1.out": "n1",
    "att.out": "a",
    "drop1.out": "d1",
    "norm2.in": "h",
    "norm2.out": "n2",
    "ff.out": "f",
    "drop2.out": "d2",
}
# Both sums read together where the block returns them: Pre-LN's output is x plus both branches. Where norm2 received
# another value than h (its own step), h is not seen at norm2, and each addition still shows here.
BOTH_SUMS = ("y", (("x", 1.0), ("drop1.out", 1.0), ("drop2.out", 1.0)))


def step_text(number: int) -> str:
    """'Step 4 of 10 (apply drop_shortcut to attention's output)'."""
    return f"Step {number} of {len(STEPS)} ({BY_NUMBER[number].text})"
