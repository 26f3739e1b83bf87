"""Operation order: does the forward compute what the ten Pre-LN steps compute?"""
from __future__ import annotations

from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_order"
ARRANGEMENTS = {
    "Post-LN": "LayerNorm after each addition, as in the original transformer. This block must normalize "
               "before attention and before the feed-forward network (Pre-LN) and add the raw branch output back",
    "no shortcuts": "each half replaces its input instead of adding its output to it",
}


def arrangement(evidence: Evidence) -> str | None:
    """The name of a known arrangement the student's output matches exactly, if any."""
    y = evidence.obs("eval").get("y")
    for name, observation in evidence.named.items():
        if y is not None and observation.get("ok") and evidence.close(y, observation["y"]):
            return name
    return None


def evaluate(evidence: Evidence) -> dict:
    observation = evidence.obs("eval")
    if not observation["ok"]:
        return {"output matches a Pre-LN block": fail(error_text(observation))}
    if evidence.close(observation["y"], evidence.reference["eval"]["y"]):
        return {"output matches a Pre-LN block": PASS}
    parts = [f"Your block's output differs from a Pre-LN block's ({difference(observation['y'], evidence.reference['eval']['y'])})."]
    named = arrangement(evidence)
    if named:
        parts.append(f"It computes the {named} arrangement: {ARRANGEMENTS[named]}.")
    if evidence.divergence:
        parts.append("First divergent step: " + evidence.divergence.text() + ".")
    return {"output matches a Pre-LN block": fail(" ".join(parts))}
