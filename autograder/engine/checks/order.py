"""Operation order: does the forward compute what a Pre-LN block computes?"""

from __future__ import annotations

from . import Evidence, PASS, difference, error_text, fail, swept

NAME = "forward_order"
PART = "output matches a Pre-LN block"
ARRANGEMENTS = {
    "Post-LN": "LayerNorm after each addition, as in the original transformer. This block must normalize "
    "before attention and before the feed-forward network (Pre-LN) and add the raw branch output back",
    "no shortcuts": "each half replaces its input instead of adding its output to it",
}


def arrangement(evidence: Evidence) -> str | None:
    """The name of a known arrangement the student's output matches exactly, if any."""
    y = evidence.obs("eval").get("y")
    for name, other in evidence.named.items():
        if y is not None and evidence.close(y, other):
            return name
    return None


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        return {PART: fail(error_text(run))}
    expected = evidence.reference["eval"]["y"]
    if evidence.close(run["y"], expected):
        return {PART: swept(evidence, PART, PASS)}
    parts = [f"Your block's output differs from a Pre-LN block's ({difference(run['y'], expected)})."]
    named = arrangement(evidence)
    if named:
        parts.append(f"It computes the {named} arrangement: {ARRANGEMENTS[named]}.")
    return {PART: fail(" ".join(parts))}
