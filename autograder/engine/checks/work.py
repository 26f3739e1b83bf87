"""How much work a block's branches do, read from values alone where the grader cannot replay its forward (the
`respond`, `eval_other` and `token` questions), and how many times a component ran."""

from __future__ import annotations

import numpy as np

from autograder.engine.diagnosis.own_layers import calls_with_passes
from autograder.engine.questions.moving import OUTPUT_LAYERS
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
    weights, tol = {}, tolerance(evidence.device)
    calls = {probe: _calls(evidence, probe) for probe in ("eval", "eval_other", "token")}
    for side in ("att", "ff"):
        moved = float(np.linalg.norm(mine[side]["y"] - run["y"]))
        base = float(np.linalg.norm(theirs[side]["y"] - evidence.reference["eval"]["y"]))
        inputs = [c["input"] for c in calls["eval"] if c["name"] == side]
        if not inputs and evidence.flows.get("eval") is not None and times_ran(evidence.flows["eval"], side):
            weights[side] = None  # it ran, unrecorded (in nested vmaps, its output layer left out): the grader's
            continue  # change of its output touched nothing, and says nothing of its work
        fixed = _same_inputs(inputs, calls["eval_other"], side, tol) or _same_inputs(inputs, calls["token"], side, TOKEN_CHANGE)
        weights[side] = 0.0 if not inputs or fixed or base == 0 else moved / base
    return weights


# What a branch's input may move, relative to its size (as `close` measures it), when one token of each sequence is
# given other content and the branch still counts as blind to it: float32 rounding of a global mean, magnified by a
# LayerNorm of a constant, moves it by about 1e-4; in Pre-LN it moves by about a fifth (three tokens of 24 changed by
# half their size).
TOKEN_CHANGE = 1e-3


def _calls(evidence, probe: str) -> list | None:
    """A recorded run's calls, each pass over a component's own layers that computes it among them, and, for a
    component with neither, each call of its output layer the forward made itself (attention written out with
    `self.att.out_proj`, say): the `respond` question changes that layer's output as it changes a call's
    (`questions.moving.OUTPUT_LAYERS`), so what that layer received stands for what the branch received. None: no
    run."""
    run = evidence.obs(probe)
    if not run["ok"]:
        return None
    calls = calls_with_passes(run, evidence.parts, tolerance(evidence.device))
    for side, layer in OUTPUT_LAYERS.items():
        if not any(call["name"] == side for call in calls) and side in evidence.parts:
            index = [name for name, _ in evidence.parts[side].named_modules()].index(layer)
            calls += [
                {"name": side, "input": c["input"]} for c in run.get("layers") or [] if (c["name"], c["layer"]) == (side, index)
            ]
    return calls


def _same_inputs(inputs: list, other: list | None, side: str, tol: float) -> bool:
    """Did `side` receive the same values within `tol` (`engine.tolerance.close`) in the run whose calls are `other`
    as in the eval run?"""
    if other is None:
        return False
    elsewhere = [c["input"] for c in other if c["name"] == side]
    return len(elsewhere) == len(inputs) and all(close(a, b, tol) for a, b in zip(inputs, elsewhere))


def times_ran(flow, component: str) -> int:
    """How many times `component` ran in a run: its recorded calls (not the ones the reading made itself, such as a
    padded call's slice), or the child's count where that is more (calls inside nested vmaps, its own layers called)."""
    recorded = sum(1 for call in flow.calls if call.name == component and call.kind != "manual")
    return max(recorded, (getattr(flow, "counts", None) or {}).get(component, 0))
