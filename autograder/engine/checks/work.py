"""How much work a block's branches do, read from values alone where the grader cannot replay its forward (the
`respond`, `eval_other` and `token` questions), and how many times a component ran."""

from __future__ import annotations

import numpy as np

from autograder.engine.tolerance import close, tolerance


def weights_from_values(evidence) -> dict | None:
    """The branches' weights from values alone (None: the answers needed are missing): how much the eval output
    moves when the grader changes a branch's output (the `respond` question), as a fraction of how much a
    Pre-LN block's moves under the same change; 0 for a branch whose input does not change with x: its recorded
    inputs on another input (the `eval_other` question), or on the same input with one token of each sequence given
    other content (the `token` question, which a branch that sees only means cannot tell apart), are the same; 0
    for one that never ran; None for one that ran with no call of it recorded."""
    mine, run = evidence.obs("respond"), evidence.obs("eval")
    theirs = evidence.reference.get("respond") or {}
    if not (mine["ok"] and theirs.get("ok") and run["ok"]):
        return None
    weights = {}
    for side in ("att", "ff"):
        moved = float(np.linalg.norm(mine[side]["y"] - run["y"]))
        base = float(np.linalg.norm(theirs[side]["y"] - evidence.reference["eval"]["y"]))
        inputs = [c["input"] for c in run["calls"] if c["name"] == side]
        if not inputs and evidence.flows.get("eval") is not None and times_ran(evidence.flows["eval"], side):
            weights[side] = None  # it ran, through its own layers or unrecorded: the grader's change of its
            continue  # output touched nothing, and says nothing of its work
        fixed = _same_inputs(inputs, evidence.obs("eval_other"), side, tolerance(evidence.device)) or _same_inputs(
            inputs, evidence.obs("token"), side, TOKEN_CHANGE
        )
        weights[side] = 0.0 if not inputs or fixed or base == 0 else moved / base
    return weights


# What a branch's input may move, relative to its size (as `close` measures it), when one token of each sequence is
# given other content and the branch still counts as blind to it: float32 rounding of a global mean, magnified by a
# LayerNorm of a constant, moves it by about 1e-4; in Pre-LN it moves by about a fifth (three tokens of 24 changed by
# half their size).
TOKEN_CHANGE = 1e-3


def _same_inputs(inputs: list, other: dict, side: str, tol: float) -> bool:
    """Did `side` receive the same values within `tol` (`engine.tolerance.close`) in the run `other` as in the eval run?"""
    if not other["ok"]:
        return False
    elsewhere = [c["input"] for c in other["calls"] if c["name"] == side]
    return len(elsewhere) == len(inputs) and all(close(a, b, tol) for a, b in zip(inputs, elsewhere))


def times_ran(flow, component: str) -> int:
    """How many times `component` ran in a run: its recorded calls (not the ones the reading made itself, such as a
    padded call's slice), or the child's count where that is more (calls inside nested vmaps, its own layers called)."""
    recorded = sum(1 for call in flow.calls if call.name == component and call.kind != "manual")
    return max(recorded, (getattr(flow, "counts", None) or {}).get(component, 0))
