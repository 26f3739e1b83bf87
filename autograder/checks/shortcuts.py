"""Both shortcut additions: each half adds its branch to the value it started from.

Three views, each blind to the other mistakes: a reference-free identity (with attention and feed-forward
zeroed a Pre-LN block returns its input exactly), and each addition measured on the student's own values.
"""
from __future__ import annotations

import numpy as np

from . import PASS, Evidence, calls_named, difference, error_text, fail, standardized

NAME = "forward_shortcuts"


def entering_second_half(evidence: Evidence, run: dict):
    """The value the second half starts from, as seen in the trace.

    Normally the input of the first norm called after attention. Code that normalizes without calling the
    modules shows only the normalized value; then the start is inferred from the output, y - ff's output.
    """
    calls = run["calls"]
    first_att = next((i for i, c in enumerate(calls) if c["name"] == "att"), None)
    if first_att is None:
        return None
    for call in calls[first_att + 1:]:
        if call["name"] in ("norm1", "norm2"):
            return call["input"]
        if call["name"] == "ff":
            norms = [(None, None)] + [tuple(p.detach().numpy() for p in (evidence.parts[n].scale, evidence.parts[n].shift))
                                      for n in ("norm1", "norm2")]
            if any(standardized(call["input"], *params) for params in norms):
                return run["y"] - call["output"]
            return call["input"]
    return None


def evaluate(evidence: Evidence) -> dict:
    zero, run = evidence.obs("shortcut_zero"), evidence.obs("eval")
    outcomes = {}
    if not zero["ok"]:
        outcomes["identity when attention and feed-forward are zero"] = fail(error_text(zero))
    elif evidence.close(zero["y"], zero["x"]):
        outcomes["identity when attention and feed-forward are zero"] = PASS
    elif np.allclose(zero["y"], 0, atol=1e-6):
        outcomes["identity when attention and feed-forward are zero"] = fail(
            "With attention and feed-forward set to zero your block returned zeros: both shortcuts must add the "
            "input back, so a Pre-LN block returns its input unchanged.")
    else:
        outcomes["identity when attention and feed-forward are zero"] = fail(
            "With attention and feed-forward set to zero, each half adds zero to its shortcut, so a Pre-LN block "
            f"returns its input unchanged; yours did not ({difference(zero['y'], zero['x'])}). A shortcut is "
            "missing, scaled, taken after a norm, or the output is normalized again.")
    if not run["ok"]:
        message = error_text(run)
        outcomes["first shortcut adds the block input"] = fail(message)
        outcomes["second shortcut adds the first half's result"] = fail(message)
        return outcomes
    attention, h = calls_named(run, "att"), entering_second_half(evidence, run)
    if not attention or h is None:
        missing = "attention never ran" if not attention else "no norm or feed-forward call follows attention"
        outcomes["first shortcut adds the block input"] = fail(f"Cannot find the first addition: {missing}.")
        outcomes["second shortcut adds the first half's result"] = fail(f"Cannot find the second addition: {missing}.")
        return outcomes
    added = h - attention[0]["output"]
    outcomes["first shortcut adds the block input"] = PASS if evidence.close(added, run["x"]) else fail(
        "The value entering the second half should be the block input plus the attention branch; what was added "
        f"to the branch is not the block input ({difference(added, run['x'])}).")
    ff_calls = calls_named(run, "ff")
    if not ff_calls:
        outcomes["second shortcut adds the first half's result"] = fail("The feed-forward network never ran.")
    else:
        expected = h + ff_calls[0]["output"]
        outcomes["second shortcut adds the first half's result"] = PASS if evidence.close(run["y"], expected) else fail(
            "The block should return the value its second half started from plus the feed-forward branch; it "
            f"returned something else ({difference(run['y'], expected)}).")
    return outcomes
