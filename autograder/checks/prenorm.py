"""Pre-LN placement: norm1 feeds attention, norm2 feeds the feed-forward network, nothing is normalized again.

The LayerNorms carry random, different scales and shifts, so swapped, reused or parameter-free norms show.
"""
from __future__ import annotations

import numpy as np
import torch

from . import PASS, Evidence, calls_named, error_text, fail, standardized

NAME = "forward_prenorm"


def _norm_params(evidence: Evidence, name: str):
    norm = evidence.parts[name]
    return norm.scale.detach().numpy().astype(np.float64), norm.shift.detach().numpy().astype(np.float64)


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {part: fail(message) for part in
                ("norm1 feeds attention", "norm2 feeds the feed-forward network", "no extra normalization")}
    outcomes = {}
    attention = calls_named(run, "att")
    with torch.no_grad():
        expected = evidence.parts["norm1"](torch.as_tensor(run["x"], dtype=torch.float32)).numpy()
    if not attention:
        outcomes["norm1 feeds attention"] = fail("Attention never ran.")
    elif evidence.close(attention[0]["input"], expected):
        outcomes["norm1 feeds attention"] = PASS
    else:
        received = attention[0]["input"]
        if evidence.close(received, run["x"]):
            why = "it received the block input itself: normalize with norm1 first"
        elif standardized(received, *_norm_params(evidence, "norm2")):
            why = "it received a value normalized by norm2: the attention half uses norm1"
        elif standardized(received):
            why = "it received a normalized value without norm1's scale and shift: call self.norm1(x)"
        else:
            why = "it received something other than norm1(x)"
        outcomes["norm1 feeds attention"] = fail(f"Attention must receive norm1(x), the normalized block input; {why}.")
    feed_forward = calls_named(run, "ff")
    if not feed_forward:
        outcomes["norm2 feeds the feed-forward network"] = fail("The feed-forward network never ran.")
    elif standardized(feed_forward[0]["input"], *_norm_params(evidence, "norm2")):
        outcomes["norm2 feeds the feed-forward network"] = PASS
    else:
        received = feed_forward[0]["input"]
        if standardized(received, *_norm_params(evidence, "norm1")):
            why = "its input was normalized by norm1: the feed-forward half uses norm2"
        elif standardized(received):
            why = "its input was normalized without norm2's scale and shift: call self.norm2(...)"
        else:
            why = "its input was not normalized at all"
        outcomes["norm2 feeds the feed-forward network"] = fail(
            f"The feed-forward network must receive the output of norm2; {why}.")
    repeats = [name for name in ("norm1", "norm2") if len(calls_named(run, name)) > 1]
    normalized_output = any(standardized(run["y"], *params) for params in
                            ((None, None), _norm_params(evidence, "norm1"), _norm_params(evidence, "norm2")))
    if repeats:
        outcomes["no extra normalization"] = fail(
            f"{' and '.join(repeats)} ran more than once in one forward pass: each LayerNorm is used exactly once.")
    elif normalized_output:
        outcomes["no extra normalization"] = fail(
            "The block's output is itself normalized: a Pre-LN block returns the second sum, with no LayerNorm "
            "after the additions.")
    else:
        outcomes["no extra normalization"] = PASS
    return outcomes
