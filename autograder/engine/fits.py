"""What the ledger says of an equation that fails in eval mode (`engine.ledger`): the value its left side holds,
written over the outputs the run showed before it (the block input, each earlier component's output) by least
squares, as a typed fact (`facts.Sum`). Said only where the sum is exact, the same on every eval run the grader read,
and each value it names is one recorded call of its component, so that anyone holding the run can check it.
"""

from __future__ import annotations

import numpy as np

from autograder.engine.facts import Said, Sum, Unknown, what_of
from autograder.engine.ledger import ALL, COMPONENTS, FAILS, HOLDS, boundaries, outcomes, right_side
from autograder.engine.reading.placement import confirms, express, unconfirmed
from autograder.engine.steps import BY_NODE, EQUATIONS, STEPS
from autograder.engine.tolerance import close

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
    that gave it ("att#1"), which must be one plain recorded call of its component (`_plain`), as must the call that
    received `left`. None where a run shows no such sum. `values`: each run's `boundaries`, where read already."""
    named = named or {}
    component = left.split(".")[0] if left != "y" else None
    earlier = COMPONENTS[: COMPONENTS.index(component)] if component else COMPONENTS
    found = []
    for run, values in zip(runs, values or [boundaries(run) for run in runs]):
        single = {name for name in COMPONENTS if _plain(run, name, values, tol)}
        if left not in values or (component is not None and component not in single):
            return None
        outputs = [n for n in earlier if f"{n}.out" in values and (n in named or n in single)]
        start = {"x": values["x"]}
        if left == "y" and "h" in named.values() and "norm2.in" in values:  # the first half's result, as Pre-LN's h
            start, outputs = {"h": values["norm2.in"]}, [n for n in outputs if n not in ("norm1", "att")]
        vectors = {**start, **{named.get(n, f"{n}#1"): values[f"{n}.out"] for n in outputs}}
        terms = express(values[left], vectors, tol)
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
    received by one plain call (`_plain`)?"""
    left, right = ALL[step][0], right_side(values, step, "eval")
    if left not in values or right is None or (component and not _plain(run, component, values, tol)):
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


def _plain(flow, name: str, values: dict, tol: float) -> bool:
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
