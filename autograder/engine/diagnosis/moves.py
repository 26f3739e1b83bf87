"""How a sum's consumer sees the sum's two terms, from the `moved` question (`questions.probes.probe_moved`).

With attention's and the feed-forward network's outputs held at values of the grader's, the block ran four times:
as it was, with its input moved by an amount, with attention's held output moved by that amount, with the
feed-forward network's moved by it. For one half's sum (x + attention's branch, read where norm2 receives it; h +
the feed-forward branch, read in what the block returns) that tells three facts, each evaluated on the recorded
values:

- the shortcut reaches the consumer as it is: moving it moved the consumer by exactly that amount;
- the branch reaches it as it is: the same, moving the branch;
- the consumer sees only the sum: moving the amount out of the branch and into the shortcut changed nothing
  (while moving the branch alone did change it).

A run whose held components were not held (called more than once, on pieces, inside nested vmaps) tells nothing.
"""

from __future__ import annotations

import functools

import numpy as np

from autograder.engine.replayed import Moved
from .location import locate_padded, whole_tokens
from autograder.engine.steps import HALVES, LAST_STEP_AT
from autograder.engine.tolerance import close as _close

close = functools.partial(_close, flat=True)  # close(a, b, tol): values over the block's positions

HELD = ("att", "ff")
MOVES = {"att": ("x", "att"), "ff": ("att", "ff")}  # half -> (the run that moves its shortcut, its branch)


def _calls(run: dict, name: str) -> list:
    return [c for c in run["calls"] if c["name"] == name and c.get("kind") != "manual"]


def _flat(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float64).reshape(-1)


def _held(runs: dict, values: dict, shape: tuple, tol: float, held: tuple) -> bool:
    """Was each of the `held` components called once in every run, with the block's shape, and did it give the held
    value (moved by the amount in its own run)?"""
    for name, run in runs.items():
        for component in held:
            calls = _calls(run, component)
            if len(calls) != 1 or run["counts"].get(component, 1) != 1 or tuple(np.shape(calls[0]["output"])) != shape:
                return False
            expected = values[component] + (values["delta"] if name == component else 0.0)
            if not close(_flat(calls[0]["output"]), expected, tol):
                return False
    return True


def _consumer(run: dict, where) -> np.ndarray | None:
    """What the grader reads in one run: the block's output ("out"), or the input of the call `where` (by its
    component and number), of the shape it had in the recorded run."""
    if where == "out":
        return _flat(run["y"])
    calls = _calls(run, where.name)
    if len(calls) < where.number or tuple(np.shape(calls[where.number - 1]["input"])) != tuple(where.input.shape):
        return None
    return _flat(calls[where.number - 1]["input"])


def _passes_h(runs: dict, delta: np.ndarray, features: int, near: float) -> bool:
    """Did h move by exactly the amount when attention's held output moved: are norm2's inputs in that run, less
    those of the run as it was, the amount in whole token vectors (norm2 called on h whole, in pieces or padded)?"""
    before, after = _calls(runs["base"], "norm2"), _calls(runs["att"], "norm2")
    if (
        not before
        or len(before) != len(after)
        or any(np.shape(a["input"]) != np.shape(b["input"]) for a, b in zip(after, before))
    ):
        return False
    moved = np.concatenate([_flat(a["input"]) - _flat(b["input"]) for a, b in zip(after, before)])
    return _placed(_positions(moved, delta, near, features), features)


def moves(moved: dict | None, half: str, where, shape: tuple, tol: float) -> dict | None:
    """The facts of `half`'s sum read at `where` ("out" or a recorded call), by what was moved ("shortcut",
    "branch", "across"), and whether the branch reached `where` only rearranged in whole token vectors ("placed");
    a fact the runs cannot tell is None. None: the runs tell nothing."""
    if not moved or not moved.get("runs") or not moved["runs"].get("ok", True):
        return None
    runs = {k: v for k, v in moved["runs"].items() if k != "ok"}
    values, shape = moved["values"], tuple(shape)
    if not _held(runs, values, shape, tol, HELD if half == "ff" or where == "out" else ("att",)):
        return None
    read = {name: _consumer(run, where) for name, run in runs.items()}
    if any(value is None for value in read.values()):
        return None
    delta, base = values["delta"], read["base"]
    shortcut_run, branch_run = MOVES[half]
    name, call = (None, None) if where == "out" else (where.name, where.number)
    whole = base.size == delta.size
    branch_moved, shortcut_moved = read[branch_run] - base, read[shortcut_run] - base
    layout = _positions(branch_moved, delta, 10 * tol, shape[-1])
    facts = {
        "branch": Moved("eval", half, "branch", name, call, whole and close(branch_moved, delta, tol)),
        "placed": _placed(layout, shape[-1]),
        "shortcut rearranged": _placed(_positions(shortcut_moved, delta, 10 * tol, shape[-1]), shape[-1]),
        "scaled in layout": _scaled(_in_block(shortcut_moved, layout, delta), delta, tol),
    }
    facts["shortcut scaled"] = _scaled(shortcut_moved, delta, tol) if whole else facts["scaled in layout"]
    if half == "ff" and not _passes_h(runs, delta, shape[-1], 10 * tol):
        return {**facts, "shortcut": None, "across": None}  # h moves with attention's held output only where the
    facts["shortcut"] = Moved(
        "eval",
        half,
        "shortcut",
        name,
        call,  # first half passes it on as it is
        whole and close(shortcut_moved, delta, tol),
    )
    responds = not close(read[branch_run], base, tol)
    facts["across"] = (
        Moved("eval", half, "across", name, call, close(read[shortcut_run], read[branch_run], tol)) if responds else None
    )
    return facts


def _positions(moved: np.ndarray, delta: np.ndarray, near: float, features: int) -> np.ndarray | None:
    """Where each element of `moved` sits in the amount (flat, -1 for padding), where `moved` is all of the amount,
    rearranged and padded (in whole token vectors where it can be); None where it is not."""
    where = locate_padded(moved, delta, near, features)
    if where is None:
        where = locate_padded(moved, delta, near)
    if where is None:
        return None
    flat = where.reshape(-1)
    return flat if np.unique(flat[flat >= 0]).size == delta.size else None


def _in_block(moved: np.ndarray, where: np.ndarray | None, delta: np.ndarray) -> np.ndarray | None:
    """`moved`, read in a consumer whose layout the branch's move shows (`where`, from `_positions`: h padded,
    say), put back in block positions; None where the branch's move shows none."""
    if where is None or np.size(moved) != where.size:
        return None
    block, kept = np.zeros(delta.size), where >= 0
    block[where[kept]] = moved.reshape(-1)[kept]
    return block


def _scaled(moved: np.ndarray | None, delta: np.ndarray, tol: float) -> bool:
    """Is `moved` the amount times a number other than 1 (0 included)?"""
    if moved is None or moved.size != delta.size:
        return False
    c = float(moved @ delta / (delta @ delta)) if np.any(delta) else 1.0
    return abs(c - 1.0) > 1e-3 and close(moved, c * delta, tol)


def _placed(where: np.ndarray | None, features: int) -> bool:
    """Is a move whose `_positions` are `where` the amount, rearranged in whole token vectors (padded, reordered)?"""
    return where is not None and whole_tokens(where, features)


def step_of(facts: dict | None, half: str, at_out: bool = False) -> tuple[int | None, list]:
    """The step a wrong sum of `half` breaks, from the facts of `moves`, with the facts that show it: the shortcut
    reaching the consumer as it is, the branch was changed on its way in or something added (the half's sum), and so
    where the shortcut reaches it scaled (a scaled shortcut breaks the addition); the branch reaching it whole
    (rearranged only as the consumer's own input is) and the shortcut not even rearranged or scaled, the shortcut was
    replaced (the step that saves it); only the sum reaching it, something was done to the sum (the last step seen
    where the sum is read: norm2's, or the output's). `at_out`: attention's half read in what the block returned,
    through the second shortcut, where the sum may be right and the second shortcut changed: only a branch that
    reaches it as it is shows the way from h to the output intact, and then a shortcut scaled breaks the addition,
    one otherwise changed was replaced. (None, []): they cannot tell."""
    if facts is None or facts["shortcut"] is None:
        return None, []
    half_steps, shortcut, branch, across = HALVES[half], facts["shortcut"], facts["branch"], facts["across"]
    if at_out:
        if not branch.exactly or shortcut.exactly:
            return None, []
        return (half_steps.sum if facts["shortcut scaled"] else half_steps.saved), [shortcut, branch]
    if shortcut.exactly or facts["shortcut scaled"]:
        return half_steps.sum, [shortcut]
    if facts["placed"] and not facts["shortcut rearranged"] and not facts["scaled in layout"]:
        return half_steps.saved, [shortcut] + ([branch] if branch.exactly else [])
    if across is not None and across.exactly and not branch.exactly and not facts["placed"]:
        return LAST_STEP_AT[half_steps.sum], [across, branch]
    return None, []


def moved_step(
    moved: dict | None, mode: str, half: str, call, shape: tuple, tol: float, at_out: bool = False
) -> tuple[int | None, list]:
    """`step_of` for `half`'s sum read where the walk reads it: norm2's input (`call`) for attention's half, what the
    block returned (`call` None) for the feed-forward half, or for attention's half with `at_out` (norm2 unrecorded,
    and what the block returned, less the feed-forward branch, not h); eval mode only (the question's mode)."""
    where = "out" if call is None else call
    if mode != "eval" or (where == "out") != (half == "ff" or at_out):
        return None, []
    return step_of(moves(moved, half, where, shape, tol), half, at_out)


def shortcut_intact(moved: dict | None, half: str, norm2, shape: tuple, tol: float) -> bool:
    """Does `half`'s shortcut reach its sum's consumer as it is: the block input reaching norm2's input (`norm2`, a
    call) for attention's half; for the feed-forward half, the block input and attention's output both reaching what
    the block returned (its second shortcut is then x plus attention's branch, h)?"""
    if half == "att":
        facts = None if norm2 is None else moves(moved, "att", norm2, shape, tol)
        return bool(facts and facts["shortcut"] is not None and facts["shortcut"].exactly)
    facts = moves(moved, "att", "out", shape, tol)
    return bool(facts and facts["shortcut"] is not None and facts["shortcut"].exactly and facts["branch"].exactly)
