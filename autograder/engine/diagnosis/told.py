"""What a run shows at its first divergence (`first_step.Reading.first`), as facts: the component that gave another
value than the grader's own on Pre-LN's value, a component that never ran, what the failing equation's left side
received (`fits.said`, `fits.why`, `fits.fit`, or written over Pre-LN's own values), or, where the run cannot read the
equation, the next one that tells, up to the named step's own."""

from __future__ import annotations

from autograder.engine.facts import Curved, Gave, Ran, Received, Said, Sum, Unreceived
from autograder.engine.fits import fit, named_outputs, plain, said, why
from autograder.engine.ledger import FAILS, FED
from autograder.engine.steps import BY_NODE, EQUATIONS, HALVES
from autograder.engine.unmet import Unmet, unmet
from .chain import ATT, FF, INPUT, ORDER, OWN, Chain
from .location import locate_padded

__all__ = ["facts_at", "unread_only"]


def facts_at(flows: dict, reading: Chain, index: int, wrong, tol: float, step: int | None = None) -> Said:
    """What the run shows at its first divergence (`Reading.first`): the component that gave another value than the
    grader's on Pre-LN's value; a component that never ran; else what the equation's left side received (`fits.said`
    in eval mode, `fits.why` at a branch or its dropout), or the equation itself. Where the run cannot read that
    equation, the next ones up to the named `step`'s own, or that one, tell what it shows instead."""
    equation, mode = ORDER[index], reading.mode
    if wrong is not None:
        name, _, received, value = wrong
        return Said((Gave(mode, name, _value(received), _value(value), False),))
    never = tuple(Ran(mode, name, 0) for name in _NEVER.get(equation, ()) if not _ran(reading, name))
    if equation == ATT.sum and not reading.ran("norm2"):
        equation = FF.branch  # what the feed-forward network received in its place
    if equation == ATT.norm and reading.found.get(ATT.norm) != FAILS:
        equation = ATT.branch  # norm1's input unread: what attention received in its output's place
    own = _OWN.get(step, min((e for e in ORDER if step is not None and e >= step), default=equation))
    earlier = (own,) if own < equation else ()  # a step read at a later equation (a dropout's, at its sum)
    first = told = _facts_of(flows, reading, equation, tol)
    for later in (*(e for e in ORDER if equation < e <= own), *earlier):
        if not unread_only(told):
            break
        told = _facts_of(flows, reading, later, tol)
    if unread_only(told):
        told = first  # none tells more than the first
        if never:
            return Said(never, told.extra)  # a component that never ran: that is what the run shows
    return Said(never + told.facts, told.extra) if never else told


def _facts_of(flows: dict, reading: Chain, equation, tol: float) -> Said:
    """What the run shows at `equation`."""
    mode = reading.mode
    side = next((side for side in HALVES if equation in (HALVES[side].branch, HALVES[side].drop)), None)
    if equation == FF.sum and reading.curved:
        return Said((Curved(mode, BY_NODE["y"].value),))
    if side is not None:
        eps = float(reading.parts[FED[side]].eps)
        told = why(flows, ((equation,),), mode, tol, reading.found, eps)
    elif mode == "eval" and (found := said(flows, ((equation,),), tol, reading.found)) is not None:
        told = found
    elif mode == "eval" and (found := _fitted(flows, reading, equation, tol)) is not None:
        told = found
    elif (written := _written(reading, equation)) is not None:
        told = written
    else:
        told = unmet(reading.found, ((equation,),), mode)
    if side is not None and unread_only(told):
        told = Said(_unread(reading, side, equation) or told.facts, told.extra)  # what the values show instead
    return told


def _written(reading: Chain, equation) -> Said | None:
    """A sum's left side (norm2's input, what the block returned) the ledger cannot read, where the run shows it whole:
    in eval mode, written over Pre-LN's own values before it (`Chain.fewest`)."""
    left, component = {ATT.sum: ("norm2.in", "norm2"), FF.sum: ("y", None)}.get(equation, (None, None))
    value = reading.values.get(left) if left else None
    if reading.mode != "eval" or value is None or (component and not plain(reading.flow, component, reading.values, reading.tol)):
        return None  # norm2's input where one call of its own received it whole, as "norm2 received" says
    nodes = ("x", "n1", "a") if component else ("h", "x", "n1", "a", "n2", "f")
    terms = reading.fewest(value, {n: reading.chain[n] for n in nodes if n in reading.chain}, nodes[:1])
    if terms is None:
        return None
    if component and len(terms) == 1 and next(iter(terms.values())) == 1:
        return Said((Received(reading.mode, component, None, _value(next(iter(terms))), True),))
    fact = Sum(reading.mode, component, None, tuple((_value(n), c) for n, c in terms.items()))
    return Said((fact,), "" if component else f"Pre-LN returns {BY_NODE['y'].value}")


_OWN = {ATT.saved: ATT.sum, FF.saved: FF.sum}  # the equation a saving step's value first meets


def unread_only(told: Said) -> bool:
    """Does `told` say only that the grader cannot read its equation?"""
    return all(isinstance(f, Unmet) and not f.known for f in told.facts)


def _unread(reading: Chain, side: str, equation) -> tuple:
    """Where the ledger cannot read a branch's equation: that its component received another value than Pre-LN's
    (whole, in pieces or rearranged), or, in train mode, that no dropout received the branch's output."""
    mode, steps = reading.mode, HALVES[side]
    if equation == steps.branch and reading.placed(side, reading.live(side) or reading.calls(side)) is False:
        return (Received(mode, side, None, _value(INPUT[side]), False),)
    unrecorded = equation == steps.branch and not reading.calls(side)  # run through its own layers, say
    if (equation == steps.drop or unrecorded) and mode == "train" and (own := reading.chain.get(OWN[side])) is not None:
        near = 10 * reading.tol
        took = [p.input for s in reading.flow.steps if s.is_dropout for p in s.calls]
        if not any(locate_padded(i, own, near) is not None for i in took):
            return (Unreceived(mode, ("drop_shortcut", "dropout"), _value(OWN[side])),)
    return ()


_NEVER = {  # the components whose never running an equation's failure may be
    ATT.norm: ("norm1",),
    ATT.branch: ("att", "norm1"),
    ATT.drop: ("drop_shortcut",),
    ATT.sum: ("norm2",),
    FF.branch: ("ff", "norm2"),
    FF.drop: ("drop_shortcut",),
}


def _ran(reading: Chain, name: str) -> bool:
    """Did `name` run, or, for drop_shortcut, torch's dropout in its place (that it never ran is then no help)?"""
    return reading.ran(name) or (name == "drop_shortcut" and reading.ran("dropout"))


def _fitted(flows: dict, reading: Chain, equation, tol: float) -> Said | None:
    """An equation the run does not show whole (a boundary it needs unread): its left side written over the values
    before it, where it is read (`fits.fit`), with what Pre-LN returns there."""
    left = EQUATIONS[equation][0]
    if left != "y":
        return None
    runs = [run for run in (flows.get("eval"), getattr(flows.get("eval"), "other", None)) if run is not None]
    fact = fit(runs, left, tol, named_outputs(reading.found))
    return None if fact is None else Said((fact,), f"Pre-LN returns {BY_NODE['y'].value}")


def _value(node: str) -> str:
    """A value of Pre-LN's in the lesson's notation: x, norm1(x), ..., the first sum by its name h."""
    return node if node in ("x", "h") else BY_NODE[node].value
