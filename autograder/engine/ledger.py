"""Pre-LN's equations (`steps.EQUATIONS`) evaluated on one recorded run: for each step, does its equation hold
between the values the run recorded at the component boundaries?

The run is read as the grader names it (`reading.dataflow.Flow`): every recorded call checked against the grader's
own component (the child's word is never evidence), calls on pieces joined, values placed at the block's positions.
A boundary's value is taken from it only where the run shows it whole and once: one call of the component's among
those whose value reaches the output (a decoy is no call of the block's), covering every position of the block, and
no run of it the recording missed; of a LayerNorm run more than once, the call whose output its branch received. In
eval mode drop_shortcut hands its input back, so a dropout's output is the value it received (attention's output,
the feed-forward output) and the dropout steps show nothing, unless a dropout acted on the branch there: its step
fails, and its output is what the sum holds. In train mode a dropout on a branch is the one dropout that received
the component's output and kept values at drop_shortcut's 1/(1 - p), and its output is what the sum holds.

Beside Pre-LN's equations, each half's own parts have one each, read where the half put its values, so that a
mistake at another step leaves them as they are: what the dropout gave is dropped no more (`ONCE`: no dropout
takes it alone), whatever else takes the branch output (a shortcut replaced by it is the shortcut's step), and
the branch, after the calls that took it alone (its dropout), was added unscaled to the value its half started
from, wherever that sum went (`ADDED`).

Each equation's outcome is one of:

* HOLDS: both sides are equal within the grader's tolerance (`tolerance.close`);
* FAILS: both sides are known and differ;
* UNKNOWN: a boundary it needs is not shown whole and once (a component called twice, not at all, on part of the
  block), or the run does not show the step (a dropout in eval mode).

A part whose equations hold on every recorded run of its mode is paid whatever the rest of the forward does: the
equations are about values, so a mistake at one step does not cost the parts of another.

Where an equation fails in eval mode, `said` writes what its left side received over the outputs the run showed
before it (the block input, each earlier component's output), by least squares, as a typed fact (`facts.Sum`): said
only where the sum is exact, the same on every eval run the grader read, and each value it names is one recorded call
of its component, so that anyone holding the run can check it.
"""

from __future__ import annotations

import numpy as np

from autograder.engine.facts import Said, Sum, Unknown, what_of
from autograder.engine.reading.placement import confirms, express, unconfirmed
from autograder.engine.steps import BOTH_SUMS, BY_NODE, EQUATIONS, STEPS
from autograder.engine.tolerance import close

HOLDS, FAILS, UNKNOWN = "holds", "fails", "unknown"
SUMS = "both sums"  # the outcome of `steps.BOTH_SUMS`, beside the steps'
COMPONENTS = ("norm1", "att", "norm2", "ff")
# eval mode: each dropout gives back what it received, the output of the component before it
EVAL_DROPS = {"drop1.out": "att.out", "drop2.out": "ff.out"}
DROPS = {"drop1": "att", "drop2": "ff"}  # each dropout on a branch, by the component whose output it receives
FEEDS = {"norm1": "att", "norm2": "ff"}  # each LayerNorm, by the branch Pre-LN hands its output
# The dropout parts' own equation: what the branch's dropout gave is dropped no more (`_once`)
ONCE = {branch: f"{drop} once" for drop, branch in DROPS.items()}  # by the branch: "att", "ff"
# Each addition part's own equation: the branch's output, after the calls that took it alone (its dropout), was added
# unscaled to the value its half started from (`_starts`: what was normalized in front of it), wherever it went (`_added`)
ADDED = {branch: f"{branch} added" for branch in FEEDS.values()}
HALF_SUMS = {ADDED[branch]: (f"{branch}.sum", ((f"{branch}.start", 1.0), (f"{branch}.added", 1.0))) for branch in FEEDS.values()}
ALL = {**EQUATIONS, SUMS: BOTH_SUMS, **HALF_SUMS}  # every equation the ledger evaluates, by step


def boundaries(flow, drop_p: float | None = None) -> dict:
    """The boundary values a named run (`dataflow.Flow`) shows whole and once, flat over the block's positions, by
    name (`x`, `y`, `att.in`, `att.out`, ...). In train mode, with drop_shortcut's `drop_p`, also each dropout on a
    branch (`drop1`, `drop2`): the one dropout that received the component's output whole and dropped values of it,
    keeping the rest at 1/(1 - p) with that p."""
    decoys = {step.key for step in flow.decoys}  # calls whose value never reaches the output, where the grader can tell
    values, read, live = {"x": flow.x.reshape(-1), "y": flow.y.reshape(-1)}, {}, [s for s in flow.steps if s.key not in decoys]
    for name in COMPONENTS:
        made = [call for call in live if call.name == name]
        # every run of it the child counted is a recorded call, or a call of one of its own layers (read as passes)
        recorded = sum(1 for call in flow.calls if call.name == name and call.kind != "manual")
        recorded += sum(1 for call in flow.layers if call.get("name") == name)
        if len(made) > 1 and name in FEEDS:  # a LayerNorm run more than once: the call whose output its branch received
            branch = [call for call in live if call.name == FEEDS[name]]
            made = [call for call in made if len(branch) == 1 and branch[0].takes == {call.key: 1.0}]
        if len(made) != 1 or not made[0].whole or made[0].variant is not None or flow.counts.get(name, 0) > recorded:
            continue  # a near miss of a LayerNorm (`variant`) is not the component
        if made[0].key in flow.vectors:
            values[f"{name}.in"], values[f"{name}.out"], read[name] = made[0].input, flow.vectors[made[0].key], made[0]
    for branch in FEEDS.values():
        if branch in read and (added := _added(flow, live, read[branch])) is not None:
            values[f"{branch}.sum"], values[f"{branch}.added"] = added
            starts = _starts(flow, read[branch])  # the one the sum holds, where one is; else the first
            start = [value for value in starts if close(added[0] - added[1], value, flow.tol)]
            values[f"{branch}.start"] = (start or starts)[0]
    for drop, branch in DROPS.items():
        if branch not in read:
            continue
        given = values[f"{branch}.out"]
        found = [
            step
            for step in live
            if step.is_dropout and step.whole and step.key in flow.vectors and close(step.input, given, flow.tol)
        ]
        if len(found) != 1 or not found[0].drops:
            continue
        kept = drop_p is not None and 0 < drop_p < 1 and found[0].scale is not None  # and at that p's 1/(1 - p):
        if not flow.train:  # a dropout left on in eval mode acts on the branch: its sum holds what it gave
            values[f"{drop}.out"] = flow.vectors[found[0].key]
        elif kept and abs(found[0].scale * (1 - drop_p) - 1) <= 1e-3:
            values[f"{drop}.in"], values[f"{drop}.out"] = found[0].input, flow.vectors[found[0].key]
            values[f"{drop}.once"] = _once(live, found[0])
    return values


def _added(flow, live: list, source) -> tuple | None:
    """(the value the output of the branch's call `source`, after the calls that took it alone, was first added into,
    that output as added), or None where no call nor the returned value takes it. The other branch's call and the
    normalization in front of it take nothing alone for this branch (its sum left out: the next half starts there)."""
    other = next((step for step in live if step.name in FEEDS.values() and step.name != source.name), None)
    others = set() if other is None else {other.key, *(other.takes or {})}
    current = source
    for step in live:
        if step.index > current.index and step.takes == {current.key: 1.0} and step.key not in others:
            current = step
    if current.key not in flow.vectors:
        return None
    into = next((step.input for step in live if step.index > current.index and step.takes and current.key in step.takes), None)
    if into is None and flow.y_takes is not None and current.key in flow.y_takes:
        into = flow.y.reshape(-1)
    return None if into is None else (into, flow.vectors[current.key])


def _starts(flow, source) -> list:
    """The values the branch's call `source` started from: the input of each whole normalization that handed the next
    its input alone, from the one in front of the branch back (norm2's, then norm1's, for `norm2(norm1(h))`); its own
    input where no normalization handed it its input."""
    starts, step = [], source
    while step.takes is not None and len(step.takes) == 1 and next(iter(step.takes.values())) == 1.0:
        producer = flow.producer(next(iter(step.takes)))
        if producer is None or not producer.is_norm or not producer.whole:
            break
        starts.append(producer.input)
        step = producer
    return starts or [source.input]


def _once(live: list, drop) -> bool | None:
    """Is what the dropout `drop` gave dropped no more (no dropout among the `live` calls takes it alone)? None where
    a dropout's input is no sum the grader can write."""
    dropouts = [step for step in live if step.is_dropout and step.key != drop.key]
    if any(step.takes is None for step in dropouts):
        return None
    return not any(step.takes == {drop.key: 1.0} for step in dropouts)


def evaluate(values: dict, mode: str, tol: float) -> dict:
    """Each equation's outcome on one run's boundary `values` in `mode`, by step, and both sums read at the output
    (`SUMS`). A dropout's own step holds where its dropout was found (`boundaries`), and is unknown where not: a
    dropout the forward wrote by hand, or one with another p, is read by the half's reading."""
    if mode not in ("eval", "train"):
        raise ValueError(f"the ledger reads eval-mode and train-mode runs, not {mode!r}")
    outcomes = {}
    for drop, branch in DROPS.items():
        once = values.get(f"{drop}.once") if mode == "train" else None
        outcomes[ONCE[branch]] = UNKNOWN if once is None else HOLDS if once else FAILS
    for step, (left, _) in ALL.items():
        if left in {f"{drop}.in" for drop in DROPS}:
            # in eval mode a dropout gives back what it received: one that acted there breaks its step, one that did not
            # shows nothing
            shown = left in values if mode == "train" else left.replace(".in", ".out") in values
            outcomes[step] = (HOLDS if mode == "train" else FAILS) if shown else UNKNOWN
            continue
        right = _right(values, step, mode)
        outcomes[step] = UNKNOWN if right is None or left not in values else HOLDS if close(values[left], right, tol) else FAILS
    return outcomes


def _right(values: dict, step, mode: str):
    """What the right side of `step`'s equation gives on one run's boundary `values`; None where a boundary it needs
    is not shown."""
    given = EVAL_DROPS if mode == "eval" else {}  # a dropout that did not act in eval mode gave what it received
    names = [(given[name] if name in given and name not in values else name, c) for name, c in ALL[step][1]]
    return sum(c * values[name] for name, c in names) if all(name in values for name, _ in names) else None


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


# What Pre-LN hands each left side a fit is said of, by the node of the table of steps that holds it, and the
# component whose output, named as Pre-LN's (`named_outputs`), makes that value one the run shows
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
    left, right = ALL[step][0], _right(values, step, "eval")
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
