"""Gradient behaviour: autograd's gradients are the derivative of what the forward computes (in eval and in
train mode), for the block input and for every component, and a deep stack of the student's block passes the
gradient back the way a Pre-LN stack does.

The grader replays the student's forward with its own components (`replays`) and compares: the gradients
the child reports must be those of the function its own run shows, and the deep-stack profile must be that
of a stack of such blocks.
"""

from __future__ import annotations

import numpy as np

from autograder.engine.diagnosis.backward import gradient_cause
from autograder.engine.tolerance import GRADIENTS, tolerance
from . import Evidence, Outcome, PASS, error_text, fail, swept
from .measured import derivative

NAME = "forward_gradients"
INPUT, PARAMS, TRAIN, PROFILE = (
    "the block input's gradient (eval mode)",
    "every component's gradients (eval mode)",
    "gradients flow through every path (train mode)",
    "24-block stack keeps a Pre-LN profile",
)

# Calibrated by benchmarks/calibrate_profile.py on the grader's exact stacks and loss, over the plans of run seeds
# 1..200: in Pre-LN stacks the smallest factor was 0.952 and the second smallest 0.997 (at most one block shrank
# the gradient at all noticeably) and the gradient grew 2.1-5.8x across 24 blocks; every Post-LN stack had two or
# more blocks at 0.933 or less, every no-shortcut stack two at 0.83 or less, and stacks without normalization grew
# it 125x or more. Each threshold sits near the log-midpoint between the groups.
SEVERE_FACTOR = 0.90  # no block may shrink the gradient by 10% or more
MILD_FACTOR = 0.965  # and at most one block by 3.5% or more
MAX_GROWTH = 10**1.5  # nor may it grow more than about 32x across the stack
PROFILE_RTOL = 1e-3  # the child's profile against the grader's replay of the same stack


def profile_verdict(profile: list[float]) -> tuple[bool, str, dict]:
    """Judge a per-block gradient profile (block 1, nearest the input, first). Pure, shared with calibration."""
    values = np.asarray(profile, dtype=np.float64)
    if values.size < 2 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        return False, "the gradient reaching some blocks is zero, NaN or infinite", {}
    factors = values[:-1] / values[1:]  # factors[i]: what block i+1 multiplies the gradient by on its way back
    order = np.argsort(factors)
    growth = float(values[0] / values[-1])
    stats = {
        "min_factor": float(factors[order[0]]),
        "second_factor": float(factors[order[1]]) if factors.size > 1 else float("inf"),
        "growth": growth,
    }
    why = (
        "in a Pre-LN stack the shortcut carries the gradient of the block above straight through every block, so "
        "no block shrinks it by much and at most one shrinks it noticeably"
    )
    if growth < 0.5:  # said only where it is so: the factors' product left block 1 with far less than block 24
        why += (
            f". Over the stack these factors compound: block 1 receives {growth:.2g} times the gradient block "
            f"{values.size} receives, a vanishing gradient"
        )
    shrink = None
    severe = factors[factors < SEVERE_FACTOR]
    if severe.size > 1:  # said of them all: naming the smallest alone would blame one block for what many do
        shrink = (
            f"{severe.size} blocks multiply the gradient by {severe.min():.2f} to {severe.max():.2f} on its way back"
            if severe.max() - severe.min() >= 0.005
            else f"{severe.size} blocks multiply the gradient by {severe.min():.2f} on its way back"
        )
    elif severe.size:
        shrink = f"block {order[0] + 1} of {values.size} multiplies the gradient by {factors[order[0]]:.2f} on its way back"
    else:
        shrinking = [int(i) for i in order if factors[i] < MILD_FACTOR]
        if len(shrinking) > 1:
            named = ", ".join(f"block {i + 1} ({factors[i]:.2f})" for i in sorted(shrinking)[:4])
            more = f" and {len(shrinking) - 4} more" if len(shrinking) > 4 else ""
            shrink = f"{len(shrinking)} blocks shrink the gradient on its way back: {named}{more}"
    if growth > MAX_GROWTH:  # the larger fact comes first; a block that also shrinks it is still named
        explode = (
            f"the gradient grows {growth:.3g}x from the last block back to the first (a Pre-LN stack stays "
            f"within {MAX_GROWTH:.0f}x): factors above 1 compound into an exploding gradient, where in a Pre-LN "
            "stack the LayerNorm in front of each branch keeps every block's factor near 1"
        )
        return False, explode + (f". Besides, {shrink}; {why}" if shrink else ""), stats
    if shrink:
        return False, f"{shrink}; {why}", stats
    return True, "", stats


def _in_place_error(evidence: Evidence, mode: str, error: dict) -> str:
    return (
        f"Backpropagation through your forward ({mode} mode) failed with {error.get('type')}: "
        f"{error.get('message', '')[:200]}. Autograd raises this when a tensor it saved for the backward pass was "
        "written in place afterwards (x += ..., add_): build new tensors instead, x = x + ...."
    )


def _expected(evidence: Evidence, mode: str):
    """The gradients the grader computes for the student's `mode` run: the reference's when the run gave the
    reference's values, else its replay of the student's program (ValueError: it cannot)."""
    if evidence.as_reference(mode):
        reference = evidence.reference[mode]
        return reference["x_grad"], reference["param_grads"]
    if mode == "train" and evidence.matches("train"):
        return evidence.train_gradients()
    if mode == "train" and evidence.train_gradients(False) is not None:  # Pre-LN's values, one mask in both halves
        return evidence.train_gradients(False)
    try:
        return evidence.replays.gradients(mode)
    except ValueError:
        if not evidence.gives_reference(mode):
            raise
        reference = evidence.reference[mode]  # the block computes Pre-LN's function: its derivative is Pre-LN's
        return reference["x_grad"], reference["param_grads"]


def _gradients(evidence: Evidence, mode: str, which: str, causes: dict) -> Outcome:
    """`which`: "input" (the block input's gradient), "params" (every component's) or "all"; `causes`: the cut
    path named for each mode's gradients, found once (see `_cause`)."""
    run = evidence.obs(mode)
    label = f"in {mode} mode"
    if not run["ok"]:
        return fail(f"{label.capitalize()}: {error_text(run)}.")
    if "grad_error" in run:
        error = run["grad_error"]
        if "inplace operation" in error.get("message", ""):
            return fail(_in_place_error(evidence, mode, error))
        return fail(f"Backpropagation through your forward ({label}) raised {error.get('type')}: {error.get('message')}.")
    try:
        x_grad, grads = _expected(evidence, mode)
    except ValueError as why:  # judged on the derivative the grader measures instead
        return derivative(evidence, mode, which, str(why))
    reported = {name: (g if g is not None else np.zeros_like(grads[name])) for name, g in run["param_grads"].items()}
    x_reported = run["x_grad"] if run["x_grad"] is not None else np.zeros_like(x_grad)
    wrong = []
    if which in ("input", "all") and not evidence.close(x_reported, x_grad, GRADIENTS):
        wrong.append("the block input")
    if which in ("params", "all"):
        wrong += sorted({name.split(".")[0] for name in grads if not evidence.close(reported[name], grads[name], GRADIENTS)})
    if not wrong:
        return PASS
    if mode not in causes:
        causes[mode] = _cause(evidence, mode)
    cause = causes[mode]
    return fail(
        f"{label.capitalize()}, the gradients autograd computed for {', '.join(wrong)} are not the derivative "
        f"of what your forward returns" + (f": {cause.text()}." if cause else "."),
        facts=(cause,) if cause else (),
        details={f"gradient cause {mode}": cause.text() if cause else None},
    )


def _cause(evidence: Evidence, mode: str):
    """Where the gradients the run kept first leave the chain rule through Pre-LN's equations, as a fact (see
    `diagnosis.backward`); None where they do not, or where the run's values are not Pre-LN's."""
    run, readout = evidence.obs(mode), evidence.replays.readout.numpy()
    return gradient_cause(run, evidence.x, evidence.parts, readout, tolerance(evidence.device), mode)


def _profile(evidence: Evidence, gradients_right: bool) -> Outcome:
    """The deep-stack profile of what the block computes, judged by the calibrated thresholds.

    The grader stacks its own replay of the block's forward (the reference's stack, for a block that matches
    Pre-LN), and when the block's gradients are right the child's own stack must agree with it (a block cannot
    behave differently in a deep stack than alone). Where they are wrong, the stack of the student's own blocks as
    they run must keep the profile too: a path whose gradient is cut or scaled is what vanishes or explodes in a
    deep stack, and a part about the deep stack pays only where it does not."""
    profile = evidence.obs("profile")
    try:
        values = evidence.reference["profile"]["profile"] if evidence.gives_reference("eval") else evidence.replays.profile
    except ValueError as why:
        own = _own_stack(profile) if profile["ok"] else None
        if own is not None:  # what the student's own stack shows can cost the part, never earn it
            return own
        return fail(
            f"The grader cannot rebuild a stack of what your block computes ({why}), so it cannot confirm the "
            "profile of a stack of your own blocks."
        )
    random = any(step.drops for step in evidence.flows["eval"].live) if evidence.flows.get("eval") else False
    if (
        gradients_right
        and not random
        and (not profile["ok"] or not np.allclose(profile["profile"], values, rtol=PROFILE_RTOL, atol=1e-9))
    ):
        what = error_text(profile, "a stack of your blocks") if not profile["ok"] else "the gradients differ"
        return fail(
            "In a stack of 24 of your blocks the gradients are not those of 24 blocks that compute what your "
            f"block computes alone ({what}): your forward behaves differently in a deep stack."
        )
    passed, message, stats = profile_verdict(values)
    details = {"profile": {"values": values, **stats}}
    own = _own_stack(profile, details) if passed and profile["ok"] and not gradients_right else None
    if own is not None:
        # the student's own blocks, stacked as they run, lose (or blow up) the gradient though what they compute would
        # not: a cut or scaled gradient path. The child's answer only ever costs its own block the part.
        return own
    if passed:
        return Outcome(True, details=details)
    cause = (
        f" The first difference from Pre-LN in your block itself: {evidence.divergence.text()}." if evidence.divergence else ""
    )
    return fail(f"In a stack of 24 of your blocks, {message}.{cause}", details=details)


def _own_stack(profile: dict, details: dict | None = None) -> Outcome | None:
    """The part failed with what the child's own stack of 24 blocks shows, where that stack loses or blows up the
    gradient; None where it keeps the profile."""
    kept, message, _ = profile_verdict(profile["profile"])
    return None if kept else fail(f"In a stack of 24 of your own blocks, as they run, {message}.", details=details)


def evaluate(evidence: Evidence) -> dict:
    causes: dict = {}
    in_eval = _gradients(evidence, "eval", "all", causes)
    outcomes = {
        INPUT: _gradients(evidence, "eval", "input", causes),
        PARAMS: _gradients(evidence, "eval", "params", causes),
        TRAIN: _gradients(evidence, "train", "all", causes),
        PROFILE: _profile(evidence, in_eval.passed),
    }
    for part, mode in ((INPUT, "eval"), (TRAIN, "train")):
        if evidence.matches(mode):  # the grader's other inputs, judged against Pre-LN's own values
            outcomes[part] = swept(evidence, part, outcomes[part])
    return {part: evidence.gate(outcome) for part, outcome in outcomes.items()}
