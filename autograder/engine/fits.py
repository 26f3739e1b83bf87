"""What the ledger says of a part whose equations do not hold (`engine.ledger`).

In eval mode, where it can: the value the failing equation's left side holds, written over the outputs the run showed
before it (the block input, each earlier component's output) by least squares, as a typed fact (`facts.Sum`). Said
only where the sum is exact, the same on every eval run the grader read, and each value it names is one recorded call
of its component, so that anyone holding the run can check it (`said`).

Elsewhere, what a branch received or where its output went, as the reading wrote it (`taken`), a near miss of a
LayerNorm (`Near`), or the equation itself (`unmet.Unmet`): it fails between the values the run recorded, or a boundary
it needs is not shown whole and once, so the grader cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from autograder.engine.facts import Dropout, Fact, Said, Sum, Unknown, what_of
from autograder.engine.ledger import ADDED, ALL, COMPONENTS, FAILS, FED, HOLDS, ONCE, RELATIVE, boundaries, fed_by, outcomes
from autograder.engine.ledger import right_side
from autograder.engine.reading.normfit import describe_variant
from autograder.engine.reading.placement import confirms, express, unconfirmed
from autograder.engine.steps import BY_NODE, EQUATIONS, HALVES, STEPS
from autograder.engine.tolerance import close
from autograder.engine.unmet import unmet

# What Pre-LN hands each left side a fit is said of (a node of `steps`), and the component whose output names it there
HANDED = {"att.in": "n1", "norm2.in": "h", "ff.in": "n2", "y": "y"}
BEFORE = {"att.in": "norm1", "norm2.in": "att", "ff.in": "norm2", "y": "ff"}


def said(flows: dict, needs: tuple, tol: float, found: dict | None = None) -> Said | None:
    """Why a part's equations (`needs`, as for `holds`) do not hold in eval mode, as facts: for the first equation of
    theirs that fails on the eval runs and whose left side is what a component received (or what the block
    returned), that value written over the outputs the run showed before it where `fit` can write it, else, where
    Pre-LN's value there is one the run shows, that it is not that value and the grader cannot write it (`Unknown`);
    None where neither can be said. `found`: the eval outcomes (`outcomes`), where the caller holds them already."""
    runs = [run for run in (flows.get("eval"), getattr(flows.get("eval"), "other", None)) if run is not None]
    found = outcomes(flows, "eval", tol) if found is None else found
    named, values = named_outputs(found), [boundaries(run) for run in runs]
    for step in (step for together in needs for step in together if found.get(step) == FAILS):
        left = ALL[step][0]
        if left not in HANDED:
            continue
        value, component = BY_NODE[HANDED[left]].value, None if left == "y" else left.split(".")[0]
        fact = fit(runs, left, tol, named, values)
        if fact is not None:
            return Said((fact,), f"Pre-LN returns {value}" if left == "y" else f"Pre-LN hands {what_of(component)} {value}")
        if BEFORE[left] in named and all(_unlike(run, shown, step, component, tol) for run, shown in zip(runs, values)):
            name = "h" if HANDED[left] == "h" else value  # Pre-LN's first sum goes by its name
            return Said((Unknown("eval", component, 1 if component else None, name, 1 if component else None),))
    return None


def fit(runs: list, left: str, tol: float, named: dict | None = None, values: list | None = None) -> Sum | None:
    """The boundary `left` of eval runs (`att.in`, ..., `y`) as an exact sum of the block input and the outputs of the
    components before it (`Sum`), the same sum on every run; a coefficient other than 1 or -1 is said only where a
    second run gives it too. An output is named as Pre-LN's value where `named` holds it (`named_outputs`), else as the call
    that gave it ("att#1"), which must be one plain recorded call of its component (`plain`), as must the call that
    received `left`. None where a run shows no such sum. `values`: each run's `boundaries`, where read already."""
    named = named or {}
    component = left.split(".")[0] if left != "y" else None
    earlier = COMPONENTS[: COMPONENTS.index(component)] if component else COMPONENTS
    found = []
    for run, values in zip(runs, values or [boundaries(run) for run in runs]):
        relative = values.get(RELATIVE, frozenset())  # placed only against what they came from: not written over x
        single = {name for name in COMPONENTS if plain(run, name, values, tol) and f"{name}.out" not in relative}
        if left not in values or left in relative or (component is not None and component not in single):
            return None
        # Pre-LN's earlier components, named or plain; and any other plain one the run called first (norm2, when the
        # norms are swapped)
        first = [n for n in COMPONENTS if n in single and n not in earlier and component and _at(run, n) < _at(run, component)]
        shown = [n for n in (*earlier, *first) if f"{n}.out" in values and f"{n}.out" not in relative]
        outputs = [n for n in shown if n in named or n in single]
        starts = [{"x": values["x"]}]
        if left == "y" and "h" in named.values() and "norm2.in" in values:  # the first half's result, as Pre-LN's h,
            h, a = values["norm2.in"], values.get("att.out")  # beside attention's output or x: the plainest sum
            starts = [{"h": h}, {"x": values["x"], "h": h}] + ([{"h": h, named.get("att", "att#1"): a}] if a is not None else [])
            outputs = [n for n in outputs if n not in ("norm1", "att")]
        sums = [
            terms
            for start in starts
            if (terms := express(values[left], {**start, **{named.get(n, f"{n}#1"): values[f"{n}.out"] for n in outputs}}, tol))
        ]
        terms = min(sums, key=lambda t: sum(c not in (0, 1) for c in t.values())) if sums else None
        if terms is None:
            return None
        found.append(tuple((name, c) for name, c in terms.items() if c))
    if not found or any(
        len(t) != len(found[0]) or any(a[0] != b[0] or not confirms(a[1], b[1]) for a, b in zip(t, found[0])) for t in found[1:]
    ):
        return None
    if len(found) == 1 and any(unconfirmed(c) for _, c in found[0]):
        return None
    return Sum("eval", component, 1 if component else None, found[0], 1 if component else None)


def _unlike(run, values: dict, step, component: str | None, tol: float) -> bool:
    """Is what the left side of `step`'s equation holds in eval `run` (its boundary `values`) no arrangement of what
    its right side gives, not even in pieces (some token vector of it, zero vectors aside, is none of that value's),
    received by one plain call (`plain`)?"""
    left, right = ALL[step][0], right_side(values, step, "eval")
    if left not in values or right is None or (component and not plain(run, component, values, tol)):
        return False
    features = run.x.shape[-1]
    got = values[left].reshape(-1, features)
    got = got[np.abs(got).sum(axis=1) > 0]  # a zero vector added (padding) is no token of another value
    expected = right.reshape(-1, features)
    nearest = np.abs(got[:, None, :] - expected[None, :, :]).max(axis=-1).min(axis=1)
    return not got.size or bool(nearest.max() > 1e-3 * max(float(np.abs(expected).max()), 1.0))


def named_outputs(found: dict) -> dict:
    """Each component's output by its value in Pre-LN's notation (`att(norm1(x))`), and the first sum as `h`, where
    every equation up to that step holds (in eval mode the dropouts' steps show nothing)."""
    names = {}
    for step in STEPS:
        needed = [s for s, (left, _) in EQUATIONS.items() if s <= step.number and left.split(".")[0] in COMPONENTS + ("y",)]
        if all(found.get(s) == HOLDS for s in needed) and (step.component in COMPONENTS or step.node == "h"):
            names[step.component or step.node] = step.node if step.node == "h" else step.value
    return names


def _at(flow, name: str) -> int:
    """Where the one recorded call of component `name` (`plain`) sits among the run's calls."""
    return next(call.index for call in flow.calls if call.name == name and call.kind != "manual")


def plain(flow, name: str, values: dict, tol: float) -> bool:
    """Was component `name` recorded as one call of its own, on the block's values as they are and in the block's
    shape (not run through its layers, not on a rearranged, reshaped or padded tensor), so that "<name>#1" names the
    value the ledger holds?"""
    made = [call for call in flow.calls if call.name == name and call.kind != "manual"]
    if len(made) != 1 or any(call.get("name") == name for call in flow.layers) or f"{name}.out" not in values:
        return False
    call = made[0]
    return (
        call.input.shape == call.output.shape == flow.x.shape
        and close(call.input.reshape(-1), values[f"{name}.in"], tol)
        and close(call.output.reshape(-1), values[f"{name}.out"], tol)
    )


@dataclass(frozen=True)
class Near(Fact):
    """Call `call` of `component` received the output of a normalization (`by`: norm1, norm2, torch's layer_norm, or
    one written by hand) that the grader's fit finds to differ from a LayerNorm as `how` says (`normfit`)."""

    kind: ClassVar[str] = "near"
    component: str
    call: int | None
    by: str
    how: str
    calls: int | None = None

    def text(self) -> str:
        who = what_of(self.component) + (f" (call {self.call} of {self.calls})" if self.calls and self.calls > 1 else "")
        return f"{who} received a normalization that {self.how}, where {FED[self.component]} is a LayerNorm"


def taken(flow, mode: str, step) -> Sum | None:
    """What call `step` of a run received (None: what the block returned), as the reading wrote it: a `Sum` of x and
    the outputs of whole recorded calls, where the value received is that sum as recorded (not rearranged)."""
    takes = flow.y_takes if step is None else step.takes
    if takes is None or (step is not None and _single(flow, step) is None):
        return None
    terms = tuple((_term(flow, key), c) for key, c in takes.items())
    if any(name is None or unconfirmed(c) for name, c in terms):  # a coefficient one input shows, not said
        return None
    call, calls = _single(flow, step) if step is not None else (None, None)
    return Sum(mode, None if step is None else step.name, call, terms, calls)


def _single(flow, step) -> tuple | None:
    """(k, n): `step` is recorded call k of its component's n, whole, in the block's shape and order; else None."""
    if len(step.calls) != 1 or step.calls[0].kind == "manual" or not step.whole or step.variant is not None:
        return None
    call, made = step.calls[0], [c for c in flow.calls if c.name == step.name and c.kind != "manual"]
    shaped = call.input.shape == call.output.shape == flow.x.shape
    if not shaped or not close(call.input.reshape(-1), step.input, flow.tol):
        return None
    return next(k for k, c in enumerate(made, 1) if c is call), len(made)


def _term(flow, key: str) -> str | None:
    """A node of the run as a `Sum` names it: x, or the output of one whole recorded call ("att#1")."""
    if key == "x":
        return "x"
    step = flow.producer(key)
    single = _single(flow, step) if step is not None else None
    if single is None or not close(step.calls[0].output.reshape(-1), flow.vectors[key], flow.tol):
        return None
    return f"{step.name}#{single[0]}"


def why(flows: dict, needs: tuple, mode: str, tol: float, found: dict, eps: float) -> Said:
    """Why none of a half's part's `needs` holds in the `mode` runs (`found`: their outcomes), as facts: in eval mode
    what the failing equation's left side received (`said`), or a branch fed by a near miss of a LayerNorm (`Near`, with
    the LayerNorm's `eps`) or by another call (`taken`); then the equation that fails (`unmet`); in train mode, where
    the grader cannot read the branch's dropout, where the branch's output went. Facts of a train run say so."""
    flow, sides = flows[mode], {step for together in needs for step in together}
    side = next(side for side in FED if {HALVES[side].branch, HALVES[side].drop, ADDED[side], ONCE[side]} & sides)
    branch = flow.first(side)
    if mode == "eval" and (found_said := said(flows, needs, tol, found)):
        return found_said
    failing = unmet(found, needs, mode)
    if failing.facts[0].known or branch is None or (at := _single(flow, branch)) is None:
        return failing
    if mode == "eval" and HALVES[side].branch in sides and branch.takes:
        producer = fed_by(flow, branch)
        fed = taken(flow, mode, branch)  # another recorded call's output (torch's layer_norm among them), or a sum
        if fed is not None:
            return Said((fed,))
        if producer is not None and (producer.variant is not None or producer.name == "layer_norm"):
            # a LayerNorm's near miss, or one written by hand without the scale and shift
            how = describe_variant(producer.variant, eps) if producer.variant is not None else "left out the scale and shift"
            return Said((Near(mode, side, at[0], producer.name, how, at[1]),))
    if mode == "train" and HALVES[side].drop in sides:
        went = next((step for step in flow.live if step.index > branch.index and step.takes and branch.key in step.takes), None)
        alone = went is not None and went.is_dropout and went.takes == {branch.key: 1.0}
        if alone and (dropped := _single(flow, went)) is not None:
            call, calls = dropped  # one dropout on the branch alone, that dropped nothing or with another p
            lesson = "Pre-LN's drop_shortcut zeroes some and multiplies the others by 1/(1 - p), with the p of cfg['drop_rate']"
            return Said((Dropout(mode, went.name, call, went.drops, went.scale if went.drops else None, calls),), lesson)
        went = taken(flow, mode, went) if went is not None or branch.key in (flow.y_takes or {}) else None
        return Said((went,)) if went is not None else failing
    return failing
