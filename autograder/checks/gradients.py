"""Gradient behaviour: gradients reach everything and are right, the input is untouched, and a deep stack
of the student's block passes the gradient back the way a Pre-LN stack does."""
from __future__ import annotations

import math

import numpy as np

from . import PASS, Evidence, Outcome, error_text, fail

NAME = "forward_gradients"

# Calibrated by benchmarks/calibrate_profile.py on the grader's exact stack, loss and seeds (30 seeds,
# PROFILE_SEED among them): Pre-LN blocks shrank the gradient by at most 1.8% (min factor >= 0.982) and grew it
# 2.2-4.6x across 24 blocks; Post-LN always had a block with factor <= 0.855, no-shortcut <= 0.506, and stacks
# without normalization grew it >= 804x. Each threshold sits near the log-midpoint between the groups.
MIN_BLOCK_FACTOR = 0.92             # no block may shrink the gradient by more than 8%
MAX_GROWTH = 10 ** 1.5              # nor may it grow more than about 32x across the stack


def profile_verdict(profile: list[float]) -> tuple[bool, str, dict]:
    """Judge a per-block gradient profile (first block first). Pure, shared with the calibration script."""
    values = np.asarray(profile, dtype=np.float64)
    if values.size < 2 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        return False, "the gradient reaching some blocks is zero, NaN or infinite", {}
    factors = values[:-1] / values[1:]          # what block k+1 multiplies the gradient by on its way back
    weakest = int(np.argmin(factors))
    growth = float(values[0] / values[-1])
    stats = {"min_factor": float(factors.min()), "growth": growth}
    if factors[weakest] < MIN_BLOCK_FACTOR:
        return False, (f"block {weakest + 2} of {values.size} multiplies the gradient by {factors[weakest]:.2f} on its way "
                       "back; in a Pre-LN stack the shortcut hands every block at least the gradient of the block "
                       "above, so no block shrinks it noticeably. Shrinking factors compound into a vanishing "
                       "gradient"), stats
    if growth > MAX_GROWTH:
        return False, (f"the gradient grows {growth:.3g}x from the last block back to the first (a Pre-LN stack "
                       f"stays within {MAX_GROWTH:.0f}x): without normalization inside each branch, factors above "
                       "1 compound into an exploding gradient"), stats
    return True, "", stats


def _compare_grads(evidence: Evidence, grads: dict) -> Outcome:
    reference = evidence.reference["grads"]
    if grads.get("x_grad") is None:
        return fail("No gradient reached the block input: the whole forward is cut from the autograd graph.")
    missing = [name for name, g in grads["param_grads"].items() if g is None]
    if missing:
        return fail(f"No gradient reached {', '.join(sorted(missing)[:4])}: that component's output does not "
                    "reach the loss through autograd.")
    wrong = [name for name, g in grads["param_grads"].items() if not evidence.close(g, reference["param_grads"][name], 10)]
    if not evidence.close(grads["x_grad"], reference["x_grad"], 10):
        wrong.insert(0, "the block input")
    if wrong:
        return fail(f"With identical weights, the gradients of {', '.join(wrong[:3])} differ from a Pre-LN block's.")
    return PASS


def evaluate(evidence: Evidence) -> dict:
    outcomes = {}
    grads = evidence.obs("grads")
    if not grads["ok"]:
        message = error_text(grads, "forward or backward")
        outcomes["gradients match a Pre-LN block"] = fail(message)
        outcomes["no detached path"] = fail(message)
    else:
        outcomes["gradients match a Pre-LN block"] = _compare_grads(evidence, grads)
        if "directional_error" in grads:
            outcomes["no detached path"] = fail(f"Could not check your gradients in float64: {grads['directional_error']}.")
        else:
            auto, numeric = grads["directional_autograd"], grads["directional_numeric"]
            if math.isfinite(auto) and math.isclose(auto, numeric, rel_tol=1e-5, abs_tol=1e-7):
                outcomes["no detached path"] = PASS
            else:
                hint = evidence.gradient_hint or ("part of the computation is cut from the autograd graph "
                                                  "(.detach(), .data or torch.no_grad() inside forward)")
                outcomes["no detached path"] = fail(
                    "The gradient autograd computes for your forward is not the derivative of what it returns "
                    f"(autograd {auto:.6g}, finite differences {numeric:.6g}): {hint}.")
    inplace = evidence.obs("inplace")
    if not inplace["ok"]:
        outcomes["input left unchanged"] = fail(error_text(inplace))
    elif inplace["version_delta"] == 0 and np.array_equal(inplace["x_after"], evidence.reference["eval"]["x"]):
        outcomes["input left unchanged"] = PASS
    else:
        outcomes["input left unchanged"] = fail(
            "Your forward modified its input tensor in place (for example x += ... on the block input), so the "
            "caller's tensor changed. Build new tensors: x = x + ...")
    profile = evidence.obs("profile")
    if not profile["ok"]:
        outcomes["24-block stack keeps a Pre-LN profile"] = fail(error_text(profile, "a stack of your blocks"))
    else:
        passed, message, stats = profile_verdict(profile["profile"])
        evidence.details["profile"] = {"values": profile["profile"], **stats}
        outcomes["24-block stack keeps a Pre-LN profile"] = PASS if passed else fail(f"In a stack of 24 of your blocks, {message}.")
    return outcomes

