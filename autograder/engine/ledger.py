"""Pre-LN's equations (`steps.EQUATIONS`) evaluated on one recorded run: for each step, does its equation hold
between the values the run recorded at the component boundaries?

The run is read as the grader names it (`reading.dataflow.Flow`): every recorded call checked against the grader's
own component (the child's word is never evidence), calls on pieces joined, values placed at the block's positions.
A boundary's value is taken from it only where the run shows it whole and once: one call of the component's in the
program, covering every position of the block, and no run of it the recording missed. In eval mode drop_shortcut
hands its input back, so a dropout's output is the value it received (attention's output, the feed-forward
output), and the dropout steps themselves show nothing; in train mode a dropout on a branch is the one dropout that
received the component's output and kept values at drop_shortcut's 1/(1 - p), and its output is what the sum holds.

Each equation's outcome is one of:

* HOLDS: both sides are equal within the grader's tolerance (`tolerance.close`);
* FAILS: both sides are known and differ;
* UNKNOWN: a boundary it needs is not shown whole and once (a component called twice, not at all, on part of the
  block), or the run does not show the step (a dropout in eval mode).

A part whose equations hold on every recorded run of its mode is paid whatever the rest of the forward does: the
equations are about values, so a mistake at one step does not cost the parts of another.
"""

from __future__ import annotations

from autograder.engine.steps import BOTH_SUMS, EQUATIONS
from autograder.engine.tolerance import close

HOLDS, FAILS, UNKNOWN = "holds", "fails", "unknown"
SUMS = "both sums"  # the outcome of `steps.BOTH_SUMS`, beside the steps'
COMPONENTS = ("norm1", "att", "norm2", "ff")
# eval mode: each dropout gives back what it received, the output of the component before it
EVAL_DROPS = {"drop1.out": "att.out", "drop2.out": "ff.out"}
DROPS = {"drop1": "att", "drop2": "ff"}  # each dropout on a branch, by the component whose output it receives


def boundaries(flow, drop_p: float | None = None) -> dict:
    """The boundary values a named run (`dataflow.Flow`) shows whole and once, flat over the block's positions, by
    name (`x`, `y`, `att.in`, `att.out`, ...). In train mode, with drop_shortcut's `drop_p`, also each dropout on a
    branch (`drop1`, `drop2`): the one dropout that received the component's output whole and dropped values of it,
    keeping the rest at 1/(1 - p) with that p."""
    values = {"x": flow.x.reshape(-1), "y": flow.y.reshape(-1)}
    for name in COMPONENTS:
        steps = [step for step in flow.steps if step.name == name]
        # every run of it the child counted is a recorded call, or a call of one of its own layers (read as passes)
        recorded = sum(1 for call in flow.calls if call.name == name and call.kind != "manual")
        recorded += sum(1 for call in flow.layers if call.get("name") == name)
        if len(steps) != 1 or not steps[0].whole or steps[0].variant is not None or flow.counts.get(name, 0) > recorded:
            continue  # a near miss of a LayerNorm (`variant`) is not the component
        if steps[0].key in flow.vectors:
            values[f"{name}.in"], values[f"{name}.out"] = steps[0].input, flow.vectors[steps[0].key]
    for drop, branch in DROPS.items():
        if not flow.train or drop_p is None or not 0 < drop_p < 1 or f"{branch}.out" not in values:
            continue
        given = values[f"{branch}.out"]
        found = [
            step
            for step in flow.steps
            if step.is_dropout and step.whole and step.key in flow.vectors and close(step.input, given, flow.tol)
        ]
        if len(found) == 1 and found[0].drops and found[0].scale is not None and abs(found[0].scale * (1 - drop_p) - 1) <= 1e-3:
            values[f"{drop}.in"], values[f"{drop}.out"] = found[0].input, flow.vectors[found[0].key]
    return values


def evaluate(values: dict, mode: str, tol: float) -> dict:
    """Each equation's outcome on one run's boundary `values` in `mode`, by step, and both sums read at the output
    (`SUMS`). A dropout's own step holds where its dropout was found (`boundaries`), and is unknown where not: a
    dropout the forward wrote by hand, or one with another p, is read by the half's reading."""
    if mode not in ("eval", "train"):
        raise ValueError(f"the ledger reads eval-mode and train-mode runs, not {mode!r}")
    outcomes = {}
    for step, (left, terms) in {**EQUATIONS, SUMS: BOTH_SUMS}.items():
        if left in {f"{drop}.in" for drop in DROPS}:
            outcomes[step] = HOLDS if mode == "train" and left in values else UNKNOWN  # in eval mode it shows nothing
            continue
        names = [left, *((EVAL_DROPS.get(name, name) if mode == "eval" else name) for name, _ in terms)]
        if not all(name in values for name in names):
            outcomes[step] = UNKNOWN
            continue
        right = sum(c * values[name] for name, (_, c) in zip(names[1:], terms))
        outcomes[step] = HOLDS if close(values[left], right, tol) else FAILS
    return outcomes


def combined(outcomes: list) -> dict:
    """One outcome per step over several runs of one mode: HOLDS where it holds on every run, FAILS where it fails
    on any, else UNKNOWN."""
    steps = set().union(*outcomes) if outcomes else set()
    found = {}
    for step in steps:
        seen = {outcome.get(step, UNKNOWN) for outcome in outcomes}
        found[step] = FAILS if FAILS in seen else HOLDS if seen == {HOLDS} else UNKNOWN
    return found


def outcomes(flows: dict, mode: str, tol: float, drop_p: float | None = None) -> dict:
    """The equations on every named run of `mode` (`flows`: mode -> Flow), by step: in eval mode the grader's input
    and, where the grader read it, the other one (the `eval_other` question, `Flow.other`); in train mode its run."""
    runs = [flows.get(mode), getattr(flows.get(mode), "other", None) if mode == "eval" else None]
    return combined([evaluate(boundaries(run, drop_p), mode, tol) for run in runs if run is not None])


def holds(outcomes: dict, needs: tuple) -> bool:
    """Does one of `needs` (alternatives, each the equations a part needs together) hold whole in `outcomes`?"""
    return any(all(outcomes.get(key) == HOLDS for key in together) for together in needs)
