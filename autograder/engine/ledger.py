"""Pre-LN's equations (`steps.EQUATIONS`) evaluated on one recorded run: for each step, does its equation hold
between the values the run recorded at the component boundaries?

The run is read as the grader names it (`reading.dataflow.Flow`): every recorded call checked against the grader's
own component (the child's word is never evidence), calls on pieces joined, values placed at the block's positions.
A boundary's value is taken from it only where the run shows it whole and once: one call of the component's among
those whose value reaches the output (a decoy is no call of the block's), covering every position of the block, and
no run of it the recording missed; of a LayerNorm run more than once, the call whose output its branch received, and
of a branch run more than once, the call its LayerNorm's output went to. In eval mode drop_shortcut hands its input
back, so a dropout's output is the value it received (attention's output, the feed-forward output) and the dropout
steps show nothing, unless a dropout acted on the branch there: its step fails, and its output is what the sum
holds. In train mode a dropout on a branch is the one dropout that received the component's output and kept values
at drop_shortcut's 1/(1 - p), and its output is what the sum holds.

Beside Pre-LN's equations, each half's own parts have one each, read where the half put its values, so that a
mistake at another step leaves them as they are: what the dropout gave is dropped no more (`ONCE`: no other
dropout received it), whatever else takes the branch output (a shortcut replaced by it is the shortcut's step), and
the branch, after the calls that took it alone (its dropout), was added unscaled to the value its half started
from, wherever that sum went (`ADDED`).

Each equation's outcome is one of:

* HOLDS: both sides are equal within the grader's tolerance (`tolerance.close`);
* FAILS: both sides are known and differ;
* UNKNOWN: a boundary it needs is not shown whole and once (a component called twice, not at all, on part of the
  block), or the run does not show the step (a dropout in eval mode).

A part whose equations hold on every recorded run of its mode is paid whatever the rest of the forward does: the
equations are about values, so a mistake at one step does not cost the parts of another.

Where an equation fails in eval mode, `engine.fits` says what its left side received, as a typed fact.
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
FEEDS = {"norm1": "att", "norm2": "ff"}  # each LayerNorm, by the branch Pre-LN hands its output
FED = {branch: norm for norm, branch in FEEDS.items()}  # each branch, by the LayerNorm that feeds it
# The dropout parts' own equation: what the branch's dropout gave no other dropout received (`_once`)
ONCE = {branch: f"{drop} once" for drop, branch in DROPS.items()}  # by the branch: "att", "ff"
# Each addition part's own equation: the branch's output, after the calls that took it alone (its dropout), was added
# unscaled to the value its half started from (`_starts`: what was normalized in front of it), wherever it went (`_added`)
ADDED = {branch: f"{branch} added" for branch in FEEDS.values()}
HALF_SUMS = {ADDED[branch]: (f"{branch}.sum", ((f"{branch}.start", 1.0), (f"{branch}.added", 1.0))) for branch in FEEDS.values()}
# The shortcut path's own: the first half starts from x, the second from where the first's branch went, and the block
# returns where the second's went
PATH = {"path x": ("att.start", (("x", 1.0),)), "path h": ("ff.start", (("att.sum", 1.0),)), "path y": ("y", (("ff.sum", 1.0),))}
RELATIVE = "relative"  # `boundaries`' key for the boundaries whose order holds only against each other's
ALL = {**EQUATIONS, SUMS: BOTH_SUMS, **HALF_SUMS, **PATH}  # every equation the ledger evaluates, by step


def boundaries(flow, drop_p: float | None = None) -> dict:
    """The boundary values a named run (`dataflow.Flow`) shows whole and once, flat over the block's positions, by
    name (`x`, `y`, `att.in`, `att.out`, ...), and each half's own: where its branch went (`att.sum`), the branch as
    added (`att.added`), the value the half started from (`att.start`). In train mode, with drop_shortcut's `drop_p`,
    also each dropout on a branch (`drop1`, `drop2`): the one dropout that received the component's output whole and
    dropped values of it, keeping the rest at 1/(1 - p) with that p, and whether what it gave was dropped no more
    (`drop1.once`); in eval mode, the output of such a dropout left on. Under `RELATIVE`, the boundaries whose positions
    hold only against the values they came from (`_positioned`)."""
    decoys = {step.key for step in flow.decoys}  # calls whose value never reaches the output, where the grader can tell
    values, read, live = {"x": flow.x.reshape(-1), "y": flow.y.reshape(-1)}, {}, [s for s in flow.steps if s.key not in decoys]
    relative = set()  # boundaries whose order holds only against each other's, not against x and y (`_positioned`)
    for name in COMPONENTS:
        made = [call for call in live if call.name == name]
        # every run of it the child counted is a recorded call, or a call of one of its own layers (read as passes)
        recorded = sum(1 for call in flow.calls if call.name == name and call.kind != "manual")
        recorded += sum(1 for call in flow.layers if call.get("name") == name)
        if len(made) > 1 and name in FEEDS:  # a LayerNorm run more than once: the call whose output its branch received
            branch = [call for call in live if call.name == FEEDS[name]]
            made = [call for call in made if len(branch) == 1 and branch[0].takes == {call.key: 1.0}]
        elif len(made) > 1 and FED[name] in read:  # a branch run more than once: the call its LayerNorm's output went to
            made = [call for call in made if call.takes == {read[FED[name]].key: 1.0}]
        if len(made) != 1 or not made[0].whole or made[0].variant is not None or flow.counts.get(name, 0) > recorded:
            continue  # a near miss of a LayerNorm (`variant`) is not the component
        if not _positioned(flow, made[0]):  # its values sit in the order the reading assumed for what it came from
            drops = [f"{drop}.{side}" for drop, branch in DROPS.items() if branch == name for side in ("in", "out")]
            relative.update((f"{name}.in", f"{name}.out", *drops))
        if made[0].key in flow.vectors:
            values[f"{name}.in"], values[f"{name}.out"], read[name] = made[0].input, flow.vectors[made[0].key], made[0]
    for branch in FEEDS.values():
        if branch in read and f"{branch}.out" not in relative and (added := _added(flow, live, read[branch])) is not None:
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
        dropout, scale = found[0], found[0].scale  # kept values at drop_shortcut's 1/(1 - p)?
        kept = drop_p is not None and 0 < drop_p < 1 and scale is not None and abs(scale * (1 - drop_p) - 1) <= 1e-3
        if not flow.train:  # a dropout left on in eval mode acts on the branch: its sum holds what it gave
            values[f"{drop}.out"] = flow.vectors[dropout.key]
        elif kept:
            values[f"{drop}.in"], values[f"{drop}.out"] = dropout.input, flow.vectors[dropout.key]
            values[f"{drop}.once"] = _once(flow, live, dropout)
    values[RELATIVE] = frozenset(relative)
    return values


def _positioned(flow, step) -> bool:
    """Are the block positions the reading gave what `step` received known: received in the block's order, or
    rearranged from values whose own positions are known? Not where it was rearranged from the output of a call whose
    input the reading could not write, whose order it could only assume: then its values are placed right against
    that call's, and an equation that sets them against x or y cannot be read."""
    in_order = all(call.place is not None and (call.place.reshape(-1) == range(call.place.size)).all() for call in step.calls)
    return in_order or all(getattr(flow.producer(key), "takes", {}) is not None for key in step.takes or {})


def _added(flow, live: list, source) -> tuple | None:
    """(the value the output of the branch's call `source`, after the calls that took it alone, was first added into,
    that output as added), or None where no call nor the returned value takes it. The other branch's call and the
    normalization in front of it take nothing alone for this branch (its sum left out: the next half starts there)."""
    other = next((step for step in live if step.name in FEEDS.values() and step.name != source.name), None)
    others = (
        set() if other is None else {other.key, *(k for k in other.takes or {} if getattr(flow.producer(k), "is_norm", False))}
    )
    current = source
    for step in live:
        if step.index > current.index and step.takes == {current.key: 1.0} and step.key not in others:
            current = step
    if current.key not in flow.vectors:
        return None
    for step in (step for step in live if step.index > current.index):
        if step.takes is None:  # a value the grader cannot write may hold the branch: where it went is unknown
            return None
        if current.key in step.takes:
            return step.input, flow.vectors[current.key]
    takes = flow.y_takes
    return (flow.y.reshape(-1), flow.vectors[current.key]) if takes is not None and current.key in takes else None


def _starts(flow, source) -> list:
    """The values the branch's call `source` started from: the input of each whole normalization that handed the next
    its input alone, from the one in front of the branch back (norm2's, then norm1's, for `norm2(norm1(h))`); its own
    input where no normalization handed it its input."""
    starts, step = [], source
    while (producer := fed_by(flow, step)) is not None and producer.whole:
        starts.append(producer.input)
        step = producer
    return starts or [source.input]


def fed_by(flow, step):
    """The normalization (a LayerNorm, torch's layer_norm, one written by hand or a near miss) that handed the call
    `step` its input alone and unscaled, if any."""
    takes = step.takes
    if not takes or len(takes) != 1 or next(iter(takes.values())) != 1.0:
        return None
    producer = flow.producer(next(iter(takes)))
    return producer if producer is not None and producer.is_norm else None


def _once(flow, live: list, drop) -> bool:
    """Is what the dropout `drop` gave dropped no more: did no other dropout among the `live` calls receive it, at
    the positions that dropout covers?"""
    given = flow.vectors[drop.key]
    again = [step for step in live if step.is_dropout and step.key != drop.key and step.covers.any()]
    return not any(close(step.input[step.covers], given[step.covers], flow.tol) for step in again)


def evaluate(values: dict, mode: str, tol: float) -> dict:
    """Each equation's outcome on one run's boundary `values` in `mode`, by step: Pre-LN's, both sums read at the output
    (`SUMS`) and each half's own (`ONCE`, `ADDED`). A dropout's own step holds in train mode where its dropout was found
    (`boundaries`); in eval mode, where drop_shortcut gives back what it received, one that acted fails it; elsewhere
    it is unknown (a dropout written by hand, or one with another p, is read by the half's reading)."""
    if mode not in ("eval", "train"):
        raise ValueError(f"the ledger reads eval-mode and train-mode runs, not {mode!r}")
    outcomes = {}
    for drop, branch in DROPS.items():
        once = values.get(f"{drop}.once") if mode == "train" else None
        outcomes[ONCE[branch]] = UNKNOWN if once is None else HOLDS if once else FAILS
    for step, (left, _) in ALL.items():
        if left.startswith("drop"):  # a dropout's own step
            shown = (left if mode == "train" else left.replace(".in", ".out")) in values
            outcomes[step] = UNKNOWN if not shown else HOLDS if mode == "train" else FAILS
            continue
        right, names = right_side(values, step, mode), {left, *(name for name, _ in ALL[step][1])}
        # values in an assumed order, set against x or y: equal, the order was right (a wrong one would not give equal
        # values); else it may be the order that differs
        assumed = bool(names & values.get(RELATIVE, frozenset()) and names & {"x", "y"})
        equal = right is not None and left in values and close(values[left], right, tol)
        outcomes[step] = HOLDS if equal else UNKNOWN if right is None or left not in values or assumed else FAILS
    return outcomes


def right_side(values: dict, step, mode: str):
    """The right side of `step`'s equation on a run's boundary `values` (None where a boundary it needs is missing)."""
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
