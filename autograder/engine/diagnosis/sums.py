"""The step broken where a half's sum is not Pre-LN's: norm2's input (x + attention's branch), or what the block
returned (h + the feed-forward branch).

The sum is written over Pre-LN's values before it (`Chain.fewest`) and its terms name the step by the table of
`steps`: its branch left out is the whole half left out (`BRANCH_LEFT_OUT`); the shortcut replaced by another value
broke the step that saved it; a term scaled, left out or added is the addition's own step; a dropout on another value
than the branch is the dropout's step. A sum that is no sum of those values is read term by term: the shortcut
reaching it as it is (the sum less the branch), through a dropout or normalized, and, in eval mode, from the `moved`
question's runs (`moves`). Where nothing tells, no step is named.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from autograder.engine.ledger import ADDED, HOLDS, SUMS, fed_by
from autograder.engine.steps import BRANCH_LEFT_OUT, HALVES
from .chain import added
from .moves import moved_step, shortcut_intact

ATT, FF = HALVES["att"], HALVES["ff"]
SUM_AT = {"att": "norm2.in", "ff": "y"}  # where each half's sum is read
TERMS = {"att": ("x", "d1", "a"), "ff": ("h", "d2", "f")}  # each sum's shortcut, branch, and the branch's component
BEFORE = {"att": ("x", "n1", "a"), "ff": ("x", "n1", "a", "h", "n2", "f")}  # the values a sum may be written over
LEFT_OUT = {"att": BRANCH_LEFT_OUT[("d1", "h")], "ff": BRANCH_LEFT_OUT[("d2", "y")]}


def sum_step(r, half: str):
    """The step broken where `half`'s sum equation does not hold on the reading `r`; None: the values cannot tell;
    False: the sum is Pre-LN's, read on."""
    left = r.values.get(SUM_AT[half])
    if half == "att":
        found, left = _first_sum(r, left)
        if found is not None or left is None:
            return found
    if half == "ff" and (out := _normalized_output(r)) is not None:
        return out
    if half == "ff" and not np.any(left):  # the block returned nothing of either term: its last step, where every
        return FF.sum if _pre_ln_calls(r) else None  # call before it received Pre-LN's value (none reached the output)
    steps, (shortcut, branch, own) = HALVES[half], TERMS[half]
    vectors = {n: r.chain[n] for n in BEFORE[half] if n in r.chain}
    given = added(r, half, own_in_eval=True)
    if given is None and half == "ff" and r.dropped_as_pre_ln("ff"):
        return False  # the feed-forward output, dropped as drop_shortcut drops it, added to what norm2 received
    if given is not None or branch in r.chain:
        vectors[branch] = given if given is not None else r.chain[branch]
    if half == "ff" and "norm2.in" in r.values:
        vectors["h"] = r.values["norm2.in"]
    if branch in vectors and own in vectors and r.close(vectors[own], vectors[branch]):
        del vectors[own]
    terms = r.fewest(left, vectors, (shortcut, branch))
    if terms is None:
        return _unfitted(r, half, left, vectors.get(shortcut), vectors.get(branch))
    s, b = terms.pop(shortcut, 0.0), terms.pop(branch, 0.0)
    if not terms:
        if s == b == 1:
            return False  # the sum is Pre-LN's: what made the equation unknown shows later
        if s == 1 and b == 0:  # the branch left out: of the block, or only of what norm2 received
            went = r.values.get("att.sum") if half == "att" else None
            return FF.norm if went is not None and not r.close(went, left) else LEFT_OUT[half]
        if b == 0 and s == 2:  # the branch replaced by the shortcut (the addition's step), or left out and the sum
            return None  # doubled (its half's first step): the values cannot tell
        if b == 0 and s != 0:
            return LEFT_OUT[half]  # the branch left out, whatever else changed after it
        if s == 0 and b == 2:  # the branch as its own shortcut (the saving step), or the shortcut left out and
            return None  # the branch doubled (the addition's): the values cannot tell
        if s == 1 and r.mode == "eval" and not _dropout_took(r, r.chain.get(own)):
            return None  # the branch scaled, where eval mode shows no dropout of it: before its dropout or after?
        return steps.sum
    if s == 0 and b == 1:
        return steps.saved  # the shortcut replaced by another value
    if s == 1 and b == 1:
        return steps.sum  # something added to the sum
    if s == 1 and b == 0 and len(terms) == 1:  # the branch replaced by another value: dropped, that is the dropout's
        return steps.drop if r.mode == "train" and r.dropped(left - vectors[shortcut]) == next(iter(terms)) else steps.sum
    return None


def _first_sum(r, left) -> tuple:
    """(the step, where norm2's input tells it before the sum's own terms, else None; what the first sum holds, where
    the run shows it: norm2's input, that of the normalization in front of the feed-forward network, what the block
    returned where the second half never ran)."""
    norm2 = r.live("norm2", True) or r.calls("norm2", True)  # a call whose output reaches nothing still received h
    if left is None and len(norm2) == 1 and norm2[0].whole:
        left = norm2[0].input  # norm2 ran once, on the whole block, where the ledger could not place it
    if left is not None and norm2 and _blind(r, norm2, left):
        return None, None
    # the second half added its branch to what norm2 received, and the block returned that sum
    second = r.found.get(FF.sum) == HOLDS or (
        r.found.get(ADDED["ff"]) == HOLDS and r.found.get("path y") == HOLDS and r.close(r.values.get("ff.start"), left)
    )
    if left is not None and second and (r.normalizes(left) or r.dropped(left) == "h"):
        return FF.saved, left  # the second half starts from another value than h, its shortcut included
    if (r.found.get(SUMS) == HOLDS and r.found.get(FF.branch) == HOLDS) or (
        left is not None and (_renormalized(r) or r.dropped(left) == "h")
    ):
        return FF.norm, left  # the sum is right where the block returns it: norm2 received another value
    ff = r.live("ff")
    if len(ff) == 1 and ff[0].whole and r.node(ff[0].input, ("x", "n1", "a", "h")) is not None:
        return r.into_branch("ff"), left  # it received an earlier value of Pre-LN's
    producer = fed_by(r.flow, ff[0]) if left is None and len(ff) == 1 else None
    if producer is not None and producer.whole:
        left = producer.input  # what the normalization in front of the feed-forward network received
        if _blind(r, [producer], left):
            return None, None
        added, h = r.values.get("ff.added"), r.chain.get("h")
        if added is not None and not r.close(left, h) and r.close(r.values["y"] - added, h):
            return FF.norm, left  # the block's second shortcut is Pre-LN's h: the normalization received another value
    if left is not None:
        return None, left
    if r.live("norm2", True) and (moved := _moved(r, "att")) is not None:
        return moved, None
    if not r.ran("norm2") and not r.ran("ff"):
        return False, None  # the second half never ran: what the block returned is read as its sum
    if len(ff) == 1 and ff[0].whole and "h" in r.chain and r.normalizes(ff[0].input, r.chain["h"]):
        return False, None  # the feed-forward network received a normalization of Pre-LN's h: the sum is intact
    if not r.ran("norm2"):  # norm2 never ran: is the first sum intact where the block returns it?
        return _moved(r, "att", at_out=True) or (False if _intact(r) else None), None
    if not ff and not r.live("norm2", True) and not _multiple(r, r.values["y"], r.chain.get("h")):
        return None, None  # the second half reaches nothing and the block returned no multiple of h: the first sum's
        # terms, or the output's, changed (the values cannot tell which)
    return (r.into_branch("ff") if ff else False), None


def _blind(r, norms: list, left) -> bool:
    """Do the normalizations in front of the feed-forward network, all read from values (`manual`: written by hand,
    or a call on a padded or cut value), show `left`, Pre-LN's h, as their input where the block's own second shortcut
    (what it returned less the branch) holds another value? Such a one shows its input only up to the shift and scale
    it takes out: the first sum changed, or that shortcut did, and the values cannot tell which."""
    given, h = added(r, "ff"), r.chain.get("h")
    manual = all(c.kind == "manual" for norm in norms for c in norm.calls)
    return r.close(left, h) and manual and given is not None and not r.close(r.values["y"] - given, left)


def _dropout_took(r, value) -> bool:
    """Did a call of a dropout receive a number times `value` (in eval mode too, where it hands its input back)?"""
    calls = [np.asarray(c.input).reshape(-1) for c in r.flow.calls if c.is_dropout]
    return value is not None and any(got.size == value.size and _multiple(r, got, value) for got in calls)


def _multiple(r, value, of) -> bool:
    """Is `value` a number times `of`?"""
    return of is not None and r.fewest(value, {"of": of}, ("of",)) is not None


def _pre_ln_calls(r) -> bool:
    """Did every component's one call, and each branch's dropout, receive Pre-LN's value, whether or not its output
    reached the block's?"""
    for name, node in (("norm1", "x"), ("att", "n1"), ("norm2", "h"), ("ff", "n2")):
        calls = r.calls(name)
        if len(calls) != 1 or not calls[0].whole or r.node(calls[0].input, (node,)) != node:
            return False
    return sorted(r.node(s.input, ("a", "f")) or "" for s in r.dropouts()) == ["a", "f"]  # and each branch's dropout


def _normalized_output(r):
    """The second sum's step where what the block returned is a normalization of h plus the feed-forward branch."""
    takes = r.flow.y_takes
    if not takes or len(takes) != 1 or next(iter(takes.values())) != 1.0 or "norm2.in" not in r.values:
        return None
    producer = r.flow.producer(next(iter(takes)))
    if producer is None or not producer.is_norm or not producer.whole:
        return None
    given = added(r, "ff")
    return FF.sum if given is not None and r.close(producer.input - r.values["norm2.in"], given) else None


def _renormalized(r) -> bool:
    """Did norm2 receive a normalization of h (norm2 run twice, another LayerNorm in front of it)?"""
    call = r.live("norm2")
    producer = fed_by(r.flow, call[0]) if len(call) == 1 else None
    return producer is not None and producer.whole and r.node(producer.input, ("h",)) == "h"


def _unfitted(r, half: str, left, shortcut, branch):
    """A sum that is no sum of Pre-LN's values: which of its terms reached it as it is."""
    steps, own = HALVES[half], TERMS[half][2]
    if shortcut is None:
        return None
    if r.mode == "train" and (dropped := r.dropped(left - shortcut)) is not None:
        if dropped == own and r.dropout_of(left - shortcut, r.chain[own]):
            return False  # the branch, dropped as drop_shortcut drops it: the sum is Pre-LN's
        return steps.drop  # a dropout on another value than the branch, or with another p
    if r.mode == "eval" and r.dropout_of(left - shortcut, r.chain[own]):
        return steps.drop  # the branch dropped in eval mode
    if branch is None:
        return None
    if r.close(left - branch, shortcut):
        return steps.sum  # the shortcut reached it as it is: the branch changed on its way in
    if r.mode == "train" and r.dropped(left - branch) == TERMS[half][0]:
        return steps.sum  # the shortcut passed through a dropout
    if r.normalizes(left - branch):
        return steps.saved  # the shortcut replaced by a normalization
    if r.normalizes(left - shortcut):
        return steps.sum  # the branch normalized on its way in
    if _dropped_to_shortcut(r, left, branch, shortcut, r.chain.get(own)):
        return steps.sum
    if half == "ff" and r.curved:
        return steps.sum  # the sum made as Pre-LN makes it, and changed on its way out
    return _moved(r, half)


def _dropped_to_shortcut(r, left, branch, shortcut, value) -> bool:
    """In train mode, where the run's own dropout zeroed the branch (Pre-LN's `value` there, before the dropout),
    is the sum the shortcut itself, and elsewhere not shortcut plus branch? Then the shortcut reached it as it is,
    and the branch changed on its way in."""
    if r.mode != "train" or value is None:
        return False
    dropped = (branch == 0) & (np.abs(value) > r.tol * max(float(np.max(np.abs(value))), 1.0))
    if dropped.sum() < 8 or dropped.all():
        return False
    return r.close(left[dropped], shortcut[dropped]) and not r.close(left[~dropped], (shortcut + branch)[~dropped])


def _moved(r, half: str, at_out: bool = False):
    """The step the `moved` question's runs show for a half's sum (eval mode), None where they cannot tell;
    `at_out`: attention's half read in what the block returned."""
    if r.mode != "eval" or r.moved is None:
        return None
    norm2 = [c for c in r.flow.calls if c.name == "norm2" and c.kind != "manual"]
    if half == "att" and not at_out and len(norm2) != 1:
        return None
    # the recorded call whose input the question's runs read (norm2's first and only)
    call = None if half == "ff" or at_out else SimpleNamespace(name="norm2", number=1, input=norm2[0].input)
    return moved_step(r.moved, "eval", half, call, r.flow.x.shape, r.tol, at_out)[0]


def _intact(r) -> bool:
    """Do x and attention's output both reach what the block returned as they are (the `moved` runs)?"""
    return r.mode == "eval" and shortcut_intact(r.moved, "ff", None, r.flow.x.shape, r.tol)
