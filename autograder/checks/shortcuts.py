"""Both shortcut additions: each half adds its branch to the value it started from, and the shortcut path
carries the block input to the output with nothing on it.

The two additions are read from the student's own values (eval mode), so a mistake elsewhere (a wrong norm,
say) does not cost them. The third part confirms the path on a question of its own: with attention and the
feed-forward network silenced a Pre-LN block hands back its input exactly; it pays only when both additions
are right on the real weights, so a block cannot earn it by recognising silenced weights.
"""
from __future__ import annotations

from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_shortcuts"
ATT, FF, PATH = ("shortcut around attention", "shortcut around the feed-forward network",
                 "silent branches give back the input")


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {ATT: fail(message), FF: fail(message), PATH: fail(message)}
    outcomes = {part: evidence.half_part("eval", side, "addition", ", so there is no branch to add a shortcut around")
                for part, side in ((ATT, "att"), (FF, "ff"))}
    zero = evidence.obs("zero")
    if not zero["ok"]:
        outcomes[PATH] = fail(f"With attention and feed-forward silenced: {error_text(zero)}.")
    elif not evidence.close(zero["y"], evidence.x):
        outcomes[PATH] = fail(
            "With attention and the feed-forward network silenced (every weight and bias 0) each half adds zero, so "
            f"a Pre-LN block hands back its input exactly; yours did not ({difference(zero['y'], evidence.x)}). A "
            "shortcut is missing or scaled, or a LayerNorm sits on the shortcut path.")
    elif not (outcomes[ATT].passed and outcomes[FF].passed):
        outcomes[PATH] = fail("Not credited: with silenced branches your block handed back its input, but this part "
                              "counts only when both additions above are right on the real weights.")
    else:
        found = evidence.anatomy("eval").stream()
        outcomes[PATH] = PASS if found is None else fail(
            "With silenced branches your block handed back its input, but on the real weights the shortcut path "
            "does not run straight from input to output: " + found.text() + ".")
    return outcomes
